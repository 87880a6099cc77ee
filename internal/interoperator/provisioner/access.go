package provisioner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// InstanceAccess is the ClusterAccess of SFServiceInstances: the SFCluster
// named by spec.clusterId, or, for an instance without one, the cluster the
// default scheduler picks (clusters.Schedule). The instance reconciler
// persists that choice in spec.clusterId. The target cluster is handed out
// as the ClusterContext's WorkloadCluster.
type InstanceAccess struct {
	providerName string
	platform     cluster.Cluster
	registry     *clusters.Registry
}

var _ spruntime.ClusterAccess[*osbv1alpha1.SFServiceInstance] = &InstanceAccess{}

// NewInstanceAccess returns the ClusterAccess of instances of the
// inter-operator named providerName.
func NewInstanceAccess(providerName string, platform cluster.Cluster, registry *clusters.Registry) *InstanceAccess {
	return &InstanceAccess{providerName: providerName, platform: platform, registry: registry}
}

// Clusters implements spruntime.ClusterAccess. Configuration problems (no
// SFCluster to schedule on, an unknown SFCluster, a bad kubeconfig) are
// invalid user input; while the instance is being deleted only a missing
// SFCluster is (the cluster is gone, and the resources with it), so that a
// kubeconfig problem does not leave resources behind.
func (a *InstanceAccess) Clusters(ctx context.Context, inst *osbv1alpha1.SFServiceInstance) (spruntime.ClusterContext, bool, error) {
	cfg, err := providerConfig(ctx, a.platform, a.providerName)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	deleting := inst.DeletionTimestamp != nil
	name := inst.Spec.ClusterID
	if name == "" {
		if deleting {
			return spruntime.ClusterContext{}, false, spruntime.InvalidUserInput(string(ReasonNotScheduled), "the instance was never scheduled; nothing to delete")
		}
		if name, err = clusters.Schedule(ctx, a.platform.GetClient(), cfg.CatalogNamespace(), cfg.Spec.DefaultCluster); err != nil {
			return spruntime.ClusterContext{}, false, clusterError(err, false)
		}
	}
	return target(ctx, a.registry, cfg, name, deleting)
}

// Release implements spruntime.ClusterAccess: access to SFClusters is not
// per instance, there is nothing to release.
func (a *InstanceAccess) Release(context.Context, *osbv1alpha1.SFServiceInstance) (bool, error) {
	return true, nil
}

// BindingAccess is the ClusterAccess of SFServiceBindings: the cluster of
// their instance.
type BindingAccess struct {
	providerName string
	platform     cluster.Cluster
	registry     *clusters.Registry
	instances    client.Reader
}

var _ spruntime.ClusterAccess[*osbv1alpha1.SFServiceBinding] = &BindingAccess{}

// NewBindingAccess returns the ClusterAccess of bindings of the
// inter-operator named providerName; instances reads SFServiceInstances on
// the onboarding cluster.
func NewBindingAccess(providerName string, platform cluster.Cluster, registry *clusters.Registry, instances client.Reader) *BindingAccess {
	return &BindingAccess{providerName: providerName, platform: platform, registry: registry, instances: instances}
}

// Clusters implements spruntime.ClusterAccess. A binding whose instance
// does not exist is invalid user input; one whose instance is not yet
// scheduled waits.
func (a *BindingAccess) Clusters(ctx context.Context, b *osbv1alpha1.SFServiceBinding) (spruntime.ClusterContext, bool, error) {
	cfg, err := providerConfig(ctx, a.platform, a.providerName)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	deleting := b.DeletionTimestamp != nil
	inst, err := instanceOf(ctx, a.instances, b)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	if inst == nil {
		return spruntime.ClusterContext{}, false, spruntime.InvalidUserInput(string(ReasonInstanceNotFound), "the SFServiceInstance %s does not exist in namespace %s", b.Spec.InstanceID, b.Namespace)
	}
	if inst.Spec.ClusterID == "" {
		if deleting {
			return spruntime.ClusterContext{}, false, spruntime.InvalidUserInput(string(ReasonNotScheduled), "the instance was never scheduled; nothing to delete")
		}
		return spruntime.ClusterContext{}, false, nil
	}
	return target(ctx, a.registry, cfg, inst.Spec.ClusterID, deleting)
}

// Release implements spruntime.ClusterAccess: there is nothing to release.
func (a *BindingAccess) Release(context.Context, *osbv1alpha1.SFServiceBinding) (bool, error) {
	return true, nil
}

// target returns the ClusterContext of the SFCluster name.
func target(ctx context.Context, registry *clusters.Registry, cfg *interoperatorv1alpha1.ProviderConfig, name string, deleting bool) (spruntime.ClusterContext, bool, error) {
	t, err := registry.Target(ctx, cfg.CatalogNamespace(), name)
	if err != nil {
		return spruntime.ClusterContext{}, false, clusterError(err, deleting)
	}
	return spruntime.ClusterContext{WorkloadCluster: t.Cluster}, true, nil
}

// clusterError turns a configuration problem of the clusters into invalid
// user input. While deleting, only a missing SFCluster is: anything else is
// retried, so that no resources are left behind by mistake.
func clusterError(err error, deleting bool) error {
	ce, ok := clusters.AsError(err)
	if !ok || (deleting && ce.Reason != clusters.ReasonClusterNotFound) {
		return err
	}
	return spruntime.InvalidUserInput(ce.Reason, "%s", ce.Message)
}

// providerConfig reads the inter-operator's ProviderConfig.
func providerConfig(ctx context.Context, platform cluster.Cluster, name string) (*interoperatorv1alpha1.ProviderConfig, error) {
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := platform.GetClient().Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
		return nil, fmt.Errorf("get ProviderConfig %s: %w", name, err)
	}
	return cfg, nil
}

// instanceOf returns the instance of a binding, or nil when it does not
// exist. The instance is named by its id or, when the id is not a valid
// name, by the SHA-224 of the id, as Service Fabrik names it.
func instanceOf(ctx context.Context, reader client.Reader, b *osbv1alpha1.SFServiceBinding) (*osbv1alpha1.SFServiceInstance, error) {
	id := b.Spec.InstanceID
	sum := sha256.Sum224([]byte(id))
	for _, name := range []string{id, hex.EncodeToString(sum[:])} {
		inst := &osbv1alpha1.SFServiceInstance{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, inst)
		if err == nil {
			return inst, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get SFServiceInstance %s/%s: %w", b.Namespace, name, err)
		}
	}
	return nil, nil
}
