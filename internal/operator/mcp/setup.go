package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// SetupWithManager registers the controllers with mgr: one for
// ManagedControlPlanes and one for ControlPlanes, both running this
// Reconciler's code. Both clusters given to NewReconciler must be run by mgr
// (be mgr, or have been added with mgr.Add), so that their caches start with
// it.
//
// Each controller watches, on the onboarding cluster, the control planes of
// its kind and (metadata only) the kubeconfig Secrets they own; on the
// platform cluster, the platform namespaces, ClusterRequests and
// AccessRequests made for control planes (mapped back through the MCP
// labels, to the control plane of that namespace and name of either kind:
// the one that does not hold them learns so on its reconcile), the Clusters
// granted to them, and (metadata only) the Secrets of the AccessRequests,
// so that a refreshed token is copied at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	for _, k := range kinds {
		name := r.name
		if k.name == KindControlPlane {
			name = r.controlPlaneName
		}
		if err := r.setupKind(mgr, k, name); err != nil {
			return fmt.Errorf("set up the %s controller: %w", k.name, err)
		}
	}
	return nil
}

// setupKind registers the controller of the control planes of kind k.
func (r *Reconciler) setupKind(mgr ctrl.Manager, k kind, name string) error {
	onboardingCache, platformCache := r.onboarding.GetCache(), r.platform.GetCache()

	ownedSecret := &metav1.PartialObjectMetadata{}
	ownedSecret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	platformSecret := &metav1.PartialObjectMetadata{}
	platformSecret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	// Only Secrets in MCP namespaces can be the kubeconfig of an MCP's
	// AccessRequest.
	inMCPNamespace := predicate.NewTypedPredicateFuncs(func(o *metav1.PartialObjectMetadata) bool {
		return strings.HasPrefix(o.GetNamespace(), corev2alpha1.MCPNamespacePrefix)
	})
	isMCPNamespace := predicate.NewTypedPredicateFuncs(func(o *corev1.Namespace) bool {
		return strings.HasPrefix(o.GetName(), corev2alpha1.MCPNamespacePrefix)
	})

	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(r.controllerOptions).
		WatchesRawSource(source.Kind[client.Object](onboardingCache, k.new(), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Kind(onboardingCache, ownedSecret,
			handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](r.onboarding.GetScheme(), r.onboarding.GetRESTMapper(),
				k.new(), handler.OnlyControllerOwner()))).
		WatchesRawSource(source.Kind(platformCache, &corev1.Namespace{},
			handler.TypedEnqueueRequestsFromMapFunc(mapByLabels[*corev1.Namespace]), isMCPNamespace)).
		WatchesRawSource(source.Kind(platformCache, &clustersv1alpha1.ClusterRequest{},
			handler.TypedEnqueueRequestsFromMapFunc(mapByLabels[*clustersv1alpha1.ClusterRequest]))).
		WatchesRawSource(source.Kind(platformCache, &clustersv1alpha1.AccessRequest{},
			handler.TypedEnqueueRequestsFromMapFunc(mapByLabels[*clustersv1alpha1.AccessRequest]))).
		WatchesRawSource(source.Kind(platformCache, &clustersv1alpha1.Cluster{},
			handler.TypedEnqueueRequestsFromMapFunc(r.mapCluster))).
		WatchesRawSource(source.Kind(platformCache, platformSecret,
			handler.TypedEnqueueRequestsFromMapFunc(r.mapPlatformSecret), inMCPNamespace)).
		Complete(kindReconciler{r: r, kind: k})
}

// mapByLabels maps an object created for an MCP back to the MCP through its
// MCPNameLabel and MCPNamespaceLabel.
func mapByLabels[T client.Object](_ context.Context, o T) []reconcile.Request {
	if req, ok := mcpRequest(o); ok {
		return []reconcile.Request{req}
	}
	return nil
}

// mcpRequest returns the request for the MCP o was created for.
func mcpRequest(o metav1.Object) (reconcile.Request, bool) {
	name, namespace := o.GetLabels()[corev2alpha1.MCPNameLabel], o.GetLabels()[corev2alpha1.MCPNamespaceLabel]
	if name == "" || namespace == "" {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}, true
}

// mapCluster maps a Cluster to the MCPs whose ClusterRequests it serves: the
// Cluster carries a finalizer with the UID of each of its requests.
func (r *Reconciler) mapCluster(ctx context.Context, c *clustersv1alpha1.Cluster) []reconcile.Request {
	uids := c.RequestUIDs()
	if len(uids) == 0 {
		return nil
	}
	list := &clustersv1alpha1.ClusterRequestList{}
	if err := r.platform.GetCache().List(ctx, list, client.HasLabels{corev2alpha1.MCPNameLabel}); err != nil {
		logf.FromContext(ctx).Error(err, "Map Cluster to ManagedControlPlanes", "cluster", client.ObjectKeyFromObject(c))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		cr := &list.Items[i]
		if !slices.Contains(uids, string(cr.UID)) {
			continue
		}
		if req, ok := mcpRequest(cr); ok {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// mapPlatformSecret maps a Secret on the platform cluster to the MCP whose
// AccessRequest names it in status.secretRef.
func (r *Reconciler) mapPlatformSecret(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
	list := &clustersv1alpha1.AccessRequestList{}
	if err := r.platform.GetCache().List(ctx, list, client.InNamespace(s.Namespace), client.HasLabels{corev2alpha1.MCPNameLabel}); err != nil {
		logf.FromContext(ctx).Error(err, "Map Secret to ManagedControlPlanes", "secret", client.ObjectKeyFromObject(s))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		ref := list.Items[i].Status.SecretRef
		if ref == nil || ref.Name != s.Name || (ref.Namespace != "" && ref.Namespace != s.Namespace) {
			continue
		}
		if req, ok := mcpRequest(&list.Items[i]); ok {
			reqs = append(reqs, req)
		}
	}
	return reqs
}
