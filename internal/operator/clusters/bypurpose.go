package clusters

import (
	"context"
	"fmt"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

var _ Provisioner = byPurpose{}

// byPurpose hands each request to the Provisioner of its purpose, or else to
// the fallback.
type byPurpose struct {
	fallback  Provisioner
	byPurpose map[string]Provisioner
}

// ByPurpose returns a Provisioner that asks provisioners[purpose] for requests
// of a purpose it lists and fallback for the others; fallback may be nil, a
// request of another purpose then gets no new cluster.
func ByPurpose(fallback Provisioner, provisioners map[string]Provisioner) Provisioner {
	b := byPurpose{fallback: fallback, byPurpose: map[string]Provisioner{}}
	for purpose, p := range provisioners {
		b.byPurpose[purpose] = p
	}
	return b
}

func (b byPurpose) of(purpose string) Provisioner {
	if p, ok := b.byPurpose[purpose]; ok {
		return p
	}
	return b.fallback
}

// Provision implements Provisioner.
func (b byPurpose) Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	p := b.of(req.Spec.Purpose)
	if p == nil {
		return nil, fmt.Errorf("purpose %q: %w", req.Spec.Purpose, ErrNoProvisioner)
	}
	return p.Provision(ctx, req)
}

// Release implements Provisioner.
func (b byPurpose) Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error) {
	p := b.of(req.Spec.Purpose)
	if p == nil {
		return true, nil
	}
	return p.Release(ctx, req, cluster)
}
