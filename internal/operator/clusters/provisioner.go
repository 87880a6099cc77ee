package clusters

import (
	"context"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// Provisioner is a cluster provider that creates Exclusive clusters on
// demand, asked by the ClusterRequest controller when no registered cluster
// is free. The static provider has none; the local landscape's provider
// starts a fresh API server per request.
type Provisioner interface {
	// Provision returns the Cluster created for req, an object on the
	// platform cluster. It returns nil, nil while the cluster is still
	// being created and is then asked again; it must be idempotent. An
	// error wrapping ErrNoProvisioner says it creates no clusters of the
	// request's purpose.
	Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error)

	// Release undoes Provision for a deleted request. cluster is the
	// Cluster Provision returned, or nil when the request was never granted
	// one (provisioning may be under way). It reports done once everything
	// created for req is gone; until then it is asked again.
	Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (done bool, err error)
}

// ProvisionerFns adapts a pair of functions to a Provisioner. A nil function
// provisions nothing (returns nil, nil) or releases at once (returns true).
type ProvisionerFns struct {
	// ProvisionFn implements Provision.
	ProvisionFn func(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error)
	// ReleaseFn implements Release.
	ReleaseFn func(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error)
}

var _ Provisioner = ProvisionerFns{}

// Provision calls ProvisionFn.
func (p ProvisionerFns) Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	if p.ProvisionFn == nil {
		return nil, nil
	}
	return p.ProvisionFn(ctx, req)
}

// Release calls ReleaseFn.
func (p ProvisionerFns) Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error) {
	if p.ReleaseFn == nil {
		return true, nil
	}
	return p.ReleaseFn(ctx, req, cluster)
}
