package clusteraccess

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// For returns m as the cluster access of the runtime's reconciler for the
// API type T.
func For[T spruntime.API](m *Manager) spruntime.ClusterAccess[T] { return access[T]{m: m} }

// access adapts a Manager to spruntime.ClusterAccess[T].
type access[T spruntime.API] struct{ m *Manager }

var _ spruntime.ClusterAccess[spruntime.API] = access[spruntime.API]{}

// Clusters implements spruntime.ClusterAccess.
func (a access[T]) Clusters(ctx context.Context, obj T) (spruntime.ClusterContext, bool, error) {
	return a.m.Clusters(ctx, obj)
}

// Release implements spruntime.ClusterAccess.
func (a access[T]) Release(ctx context.Context, obj T) (bool, error) {
	return a.m.Release(ctx, obj)
}

// MCPClusterRequest returns the key of the ClusterRequest of the
// ManagedControlPlane or ControlPlane that the service object namespace/name
// belongs to, in openMCP's platform namespace. A control plane created by a
// Marketplane version before openMCP's namespace was adopted has it in
// LegacyMCPClusterRequest instead; the Manager looks in both.
func MCPClusterRequest(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: corev2alpha1.StableMCPNamespace(namespace, name), Name: name}
}

// LegacyMCPClusterRequest returns the key of the ClusterRequest of a control
// plane namespace/name created by an earlier Marketplane version, in its
// legacy platform namespace (corev2alpha1.LegacyMCPNamespace).
func LegacyMCPClusterRequest(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: corev2alpha1.LegacyMCPNamespace(namespace, name), Name: name}
}

// mcpClusterRequest finds the ClusterRequest of the control plane of the
// service object obj: in openMCP's platform namespace, or else in the legacy
// one, where control planes of earlier versions keep theirs. A request found
// in the legacy namespace counts only when it carries the MCP labels of obj's
// namespace and name. found is false when neither exists.
func (m *Manager) mcpClusterRequest(ctx context.Context, obj client.Object) (cr *clustersv1alpha1.ClusterRequest, found bool, err error) {
	for i, key := range []types.NamespacedName{
		MCPClusterRequest(obj.GetNamespace(), obj.GetName()),
		LegacyMCPClusterRequest(obj.GetNamespace(), obj.GetName()),
	} {
		cr := &clustersv1alpha1.ClusterRequest{}
		err := m.reader.Get(ctx, key, cr)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, false, fmt.Errorf("get ClusterRequest %s of the control plane %s/%s: %w", key, obj.GetNamespace(), obj.GetName(), err)
		case i > 0 && !corev2alpha1.HasMCPLabels(cr.Labels, obj.GetNamespace(), obj.GetName()):
			continue
		}
		return cr, true, nil
	}
	return nil, false, nil
}

// mcpAccessRequestKey is the key of obj's MCP AccessRequest.
func (m *Manager) mcpAccessRequestKey(obj client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: m.namespace, Name: MCPAccessRequestName(m.provider, obj.GetNamespace(), obj.GetName())}
}

// Clusters returns the clusters of the service object obj: the MCP cluster
// of its ManagedControlPlane (same name and namespace) and, with
// WithWorkloadCluster, the shared workload cluster. It creates the
// AccessRequests it needs; ready is false (and err nil) until they are
// granted. An object without a ManagedControlPlane is an error wrapping
// ErrMCPNotFound that also is an spruntime.InvalidUserInputError (reason
// ReasonMCPNotFound); a denied request is an error wrapping ErrAccessDenied.
func (m *Manager) Clusters(ctx context.Context, obj client.Object) (spruntime.ClusterContext, bool, error) {
	mcp, ready, err := m.mcpCluster(ctx, obj)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	cc := spruntime.ClusterContext{MCPCluster: mcp}
	if m.workload != nil {
		// Asked for even while the MCP access is pending, so that both
		// are granted in parallel.
		wl, wlReady, err := m.workloadCluster(ctx)
		if err != nil {
			return spruntime.ClusterContext{}, false, err
		}
		cc.WorkloadCluster, ready = wl, ready && wlReady
	}
	if !ready {
		return spruntime.ClusterContext{}, false, nil
	}
	return cc, true, nil
}

// mcpCluster obtains the MCP cluster of obj.
func (m *Manager) mcpCluster(ctx context.Context, obj client.Object) (*spruntime.Cluster, bool, error) {
	cr, found, err := m.mcpClusterRequest(ctx, obj)
	if err != nil {
		return nil, false, err
	}
	if !found {
		// No AccessRequest is made: it would wait for a cluster that may
		// never come.
		return nil, false, fmt.Errorf("%w: %w", ErrMCPNotFound, spruntime.InvalidUserInput(ReasonMCPNotFound,
			"no ManagedControlPlane or ControlPlane %s/%s: its ClusterRequest %s does not exist; create a ManagedControlPlane or ControlPlane with the same name and namespace as this object",
			obj.GetNamespace(), obj.GetName(), MCPClusterRequest(obj.GetNamespace(), obj.GetName())))
	}
	crKey := client.ObjectKeyFromObject(cr)
	if err := clusterRequestDenied(cr, fmt.Sprintf("the MCP cluster of control plane %s/%s", obj.GetNamespace(), obj.GetName())); err != nil {
		return nil, false, err
	}
	arKey := m.mcpAccessRequestKey(obj)
	labels := m.labels(purposeMCP, map[string]string{
		providerv1alpha1.OnboardingNameLabel:      labelValue(obj.GetName()),
		providerv1alpha1.OnboardingNamespaceLabel: labelValue(obj.GetNamespace()),
	})
	ar, err := m.ensureAccessRequest(ctx, m.accessRequest(arKey, crKey, m.mcp, labels))
	if err != nil {
		return nil, false, err
	}
	return m.clusterOf(ctx, ar, clusterName(cr))
}

// workloadCluster obtains the provider's shared workload cluster.
func (m *Manager) workloadCluster(ctx context.Context) (*spruntime.Cluster, bool, error) {
	key := types.NamespacedName{Namespace: m.namespace, Name: WorkloadRequestName(m.provider)}
	cr, err := m.ensureClusterRequest(ctx, key, clustersv1alpha1.PurposeWorkload)
	if err != nil {
		return nil, false, err
	}
	if err := clusterRequestDenied(cr, "the workload cluster"); err != nil {
		return nil, false, err
	}
	ar, err := m.ensureAccessRequest(ctx, m.accessRequest(key, key, *m.workload, m.labels(purposeWorkload, nil)))
	if err != nil {
		return nil, false, err
	}
	return m.clusterOf(ctx, ar, clusterName(cr))
}

// clusterOf returns the (cached) cluster of ar once it is granted.
func (m *Manager) clusterOf(ctx context.Context, ar *clustersv1alpha1.AccessRequest, name string) (*spruntime.Cluster, bool, error) {
	secret, granted, err := grantedSecret(ar)
	if err != nil || !granted {
		if err == nil {
			logf.FromContext(ctx).V(2).Info("Waiting for cluster access", "state", describe(ar))
		}
		return nil, false, err
	}
	if name == "" {
		name = ar.Name
	}
	return m.cachedClusterFor(ctx, client.ObjectKeyFromObject(ar), secret, name)
}

// clusterName is the name of the Cluster granted to cr, or "" when none is
// known yet.
func clusterName(cr *clustersv1alpha1.ClusterRequest) string {
	if cr.Status.Cluster == nil {
		return ""
	}
	return cr.Status.Cluster.Name
}

// Release deletes the MCP AccessRequest of obj, which revokes its token, and
// reports done once it is gone. The shared workload access is kept.
func (m *Manager) Release(ctx context.Context, obj client.Object) (bool, error) {
	key := m.mcpAccessRequestKey(obj)
	m.forget(key)
	ar := &clustersv1alpha1.AccessRequest{}
	if err := m.reader.Get(ctx, key, ar); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get AccessRequest %s: %w", key, err)
	}
	if ar.DeletionTimestamp.IsZero() {
		if err := m.platform.Delete(ctx, ar); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("delete AccessRequest %s: %w", key, err)
		}
		logf.FromContext(ctx).V(1).Info("Deleted AccessRequest", "accessRequest", key)
	}
	return false, nil
}
