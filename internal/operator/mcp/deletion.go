package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// reconcileDelete tears an MCP down in order: its service objects on the
// onboarding cluster, then its AccessRequests, then its ClusterRequest, then
// the kubeconfig Secrets and the platform namespace; then the finalizer goes.
func (r *Reconciler) reconcileDelete(ctx context.Context, m object) (ctrl.Result, error) {
	logger := logf.FromContext(ctx)
	m.ControlPlaneStatus().Phase = common.StatusPhaseTerminating
	setCondition(m, common.ConditionTypeReady, metav1.ConditionFalse, ReasonTerminating, "The "+kindOf(m)+" is being deleted.")
	if !controllerutil.ContainsFinalizer(m, corev2alpha1.MCPFinalizer) {
		return ctrl.Result{}, nil
	}
	var platformNS string
	if len(m.GetName()) <= MaxNameLength {
		// A legacy MCP deleted before this version recorded its namespace
		// is found through its ClusterRequest; the annotation then keeps
		// the namespace once that request is gone.
		var err error
		if platformNS, err = r.resolvePlatformNamespace(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
		// A control plane that lost its name to the other kind deletes
		// nothing: the service objects and requests named like it are the
		// other's.
		conflict, err := r.deletionConflict(ctx, m, platformNS)
		if err != nil {
			return ctrl.Result{}, err
		}
		if conflict != "" {
			logger.V(1).Info("Deleting a control plane that never held its name; leaving the holder's objects alone")
			return ctrl.Result{}, r.removeFinalizer(ctx, m)
		}
		if err := r.recordPlatformNamespace(ctx, m, platformNS); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}

	left, err := r.deleteServices(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(left) > 0 {
		setCondition(m, corev2alpha1.ConditionAllServicesDeleted, metav1.ConditionFalse, ReasonDeletingServices,
			"Waiting for the deletion of: "+strings.Join(left, ", ")+".")
		logger.V(1).Info("Waiting for service objects", "left", left)
		return ctrl.Result{RequeueAfter: r.servicePollInterval}, nil
	}
	setCondition(m, corev2alpha1.ConditionAllServicesDeleted, metav1.ConditionTrue, ReasonAllServicesDeleted, "No service object of the "+kindOf(m)+" is left.")

	// Nothing was created on the platform cluster for an MCP whose name is
	// too long (and its name cannot be used in a label selector).
	if len(m.GetName()) <= MaxNameLength {
		left, err := r.deleteRequests(ctx, m, platformNS)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(left) > 0 {
			// The watches on AccessRequests and ClusterRequests bring the
			// MCP back when they are gone.
			setCondition(m, corev2alpha1.ConditionAllClusterRequestsDeleted, metav1.ConditionFalse, ReasonDeletingClusterRequests,
				"Waiting for the deletion of: "+strings.Join(left, ", ")+".")
			logger.V(1).Info("Waiting for requests", "left", left)
			return ctrl.Result{}, nil
		}
		setCondition(m, corev2alpha1.ConditionAllClusterRequestsDeleted, metav1.ConditionTrue, ReasonAllClusterRequestsDeleted, "The AccessRequests and the ClusterRequest are gone.")

		if err := r.deleteStaleSecrets(ctx, m, nil); err != nil {
			return ctrl.Result{}, err
		}
		// The namespace is empty now. Its deletion is not waited for: it
		// needs the namespace controller, and nothing of the MCP is left
		// in it.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}
		if err := r.platform.GetClient().Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("delete platform namespace %s: %w", ns.Name, err)
		}
	}
	if err := r.removeFinalizer(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	logger.V(1).Info("Deleted")
	return ctrl.Result{}, nil
}

// deleteServices deletes, on the onboarding cluster, the object with the
// MCP's name and namespace of every kind that a ServiceProvider registered
// in status.resources and owns the API group of, and returns what is still
// there (including the service finalizers on the MCP itself). A kind that
// the onboarding cluster does not serve has nothing to delete.
//
// status.resources is written by the provider itself: a kind whose group
// the provider does not own (a Secret, another provider's kind) is never
// deleted, or any provider could make MCP deletion delete a tenant's
// objects of that name (issue #10). The provider learns of it from its
// ResourcesAccepted condition.
func (r *Reconciler) deleteServices(ctx context.Context, m object) ([]string, error) {
	logger := logf.FromContext(ctx)
	// From the API server, not the cache: deletion is rare, and the cache
	// would need informers for every provider kind.
	own, err := policy.LoadOwnership(ctx, r.platform.GetAPIReader())
	if err != nil {
		return nil, err
	}
	kinds := map[schema.GroupKind]bool{}
	for _, sp := range own.Providers(policy.KindServiceProvider) {
		for _, gvk := range own.Kinds(policy.KindServiceProvider, sp) {
			kinds[schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}] = true
		}
		if rejected := own.Rejected(policy.KindServiceProvider, sp); len(rejected) > 0 {
			logger.V(1).Info("Not deleting service kinds whose API group the provider does not own", "serviceProvider", sp, "rejected", len(rejected))
		}
	}
	sorted := make([]schema.GroupKind, 0, len(kinds))
	for gk := range kinds {
		sorted = append(sorted, gk)
	}
	slices.SortFunc(sorted, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })

	var left []string
	for _, gk := range sorted {
		// The kind matters, not the registered version: every version of a
		// kind serves the same objects.
		mapping, err := r.onboarding.GetRESTMapper().RESTMapping(gk)
		if err != nil {
			if isNoMatch(err) {
				logger.V(2).Info("Service kind not served on the onboarding cluster", "kind", gk.String())
				continue
			}
			return nil, fmt.Errorf("look up service kind %s: %w", gk, err)
		}
		if mapping.Scope.Name() != apimeta.RESTScopeNameNamespace {
			// Service objects are namespaced like their MCP; a cluster-scoped
			// object of the same name could belong to an MCP of that name in
			// another namespace.
			logger.V(1).Info("Skipping cluster-scoped service kind", "kind", gk.String())
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(mapping.GroupVersionKind)
		key := types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
		if err := r.onboarding.GetAPIReader().Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) || isNoMatch(err) {
				continue
			}
			return nil, fmt.Errorf("get %s %s: %w", gk, key, err)
		}
		if obj.GetDeletionTimestamp() == nil {
			if err := r.onboarding.GetClient().Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("delete %s %s: %w", gk, key, err)
			}
			logger.V(1).Info("Deleted service object", "kind", gk.String())
		}
		left = append(left, gk.String()+" "+key.String())
	}
	for _, f := range m.GetFinalizers() {
		if strings.HasPrefix(f, corev2alpha1.ServiceDependencyFinalizerPrefix) {
			left = append(left, "finalizer "+f)
		}
	}
	return left, nil
}

// isNoMatch reports whether err says that a kind is not served. A discovery
// error counts only when every part of it is such a "no match": a failed
// discovery of a group must not pass for an absent kind.
func isNoMatch(err error) bool {
	var discovery *apiutil.ErrResourceDiscoveryFailed
	if errors.As(err, &discovery) {
		for _, e := range discovery.Unwrap() {
			if !apimeta.IsNoMatchError(e) {
				return false
			}
		}
		return true
	}
	return apimeta.IsNoMatchError(err)
}

// deleteRequests deletes the MCP's AccessRequests and, once they are gone,
// its ClusterRequest (an AccessRequest needs the granted cluster to revoke
// its access). It returns what is still there. It reads from the API server,
// not the cache, so that a request created just before cannot be missed.
func (r *Reconciler) deleteRequests(ctx context.Context, m object, ns string) ([]string, error) {
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := r.platform.GetAPIReader().List(ctx, ars, client.InNamespace(ns), client.MatchingLabels(mcpLabels(m.GetNamespace(), m.GetName()))); err != nil {
		return nil, fmt.Errorf("list AccessRequests: %w", err)
	}
	var left []string
	for i := range ars.Items {
		ar := &ars.Items[i]
		if ar.DeletionTimestamp.IsZero() {
			if err := r.platform.GetClient().Delete(ctx, ar); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("delete AccessRequest %s: %w", client.ObjectKeyFromObject(ar), err)
			}
		}
		left = append(left, "AccessRequest "+client.ObjectKeyFromObject(ar).String())
	}
	if len(left) > 0 {
		return left, nil
	}

	cr := &clustersv1alpha1.ClusterRequest{}
	key := types.NamespacedName{Namespace: ns, Name: m.GetName()}
	if err := r.platform.GetAPIReader().Get(ctx, key, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get ClusterRequest %s: %w", key, err)
	}
	if cr.DeletionTimestamp.IsZero() {
		if err := r.platform.GetClient().Delete(ctx, cr); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete ClusterRequest %s: %w", key, err)
		}
	}
	return []string{"ClusterRequest " + key.String()}, nil
}
