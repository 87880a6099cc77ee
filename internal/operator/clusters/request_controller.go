package clusters

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

var _ reconcile.Reconciler = &RequestReconciler{}

// RequestReconciler schedules ClusterRequests onto Clusters (see the package
// documentation for the rules).
type RequestReconciler struct {
	client            client.Client
	name              string
	tenancies         map[string]clustersv1alpha1.Tenancy
	provisioner       Provisioner
	provisionInterval time.Duration
	recorder          events.EventRecorder
	onboarding        policy.OnboardingSource
	enforcer          *policy.Enforcer
}

// RequestOption configures a RequestReconciler.
type RequestOption func(*RequestReconciler)

// WithRequestControllerName names the controller (default
// RequestControllerName); the name labels its metrics and events.
func WithRequestControllerName(name string) RequestOption {
	return func(r *RequestReconciler) { r.name = name }
}

// WithTenancy makes requests of purpose get a cluster of tenancy t,
// overriding DefaultTenancies for that purpose.
func WithTenancy(purpose string, t clustersv1alpha1.Tenancy) RequestOption {
	return func(r *RequestReconciler) { r.tenancies[purpose] = t }
}

// WithProvisioner lets the controller ask p for a new cluster when an
// Exclusive request finds no free one. Without a provisioner, or when p
// returns ErrNoProvisioner for the request's purpose, such a request is
// Denied.
func WithProvisioner(p Provisioner) RequestOption {
	return func(r *RequestReconciler) { r.provisioner = p }
}

// WithProvisionInterval sets how often the Provisioner is asked again while
// it is creating or releasing a cluster (default DefaultProvisionInterval).
func WithProvisionInterval(d time.Duration) RequestOption {
	return func(r *RequestReconciler) { r.provisionInterval = d }
}

// WithRequestOnboarding sets how the access policy reaches the onboarding
// cluster to find a provider's tenants, for the ClusterRequests a provider
// makes in its tenants' MCP namespaces (default: the admin kubeconfig of
// the Cluster with purpose onboarding).
func WithRequestOnboarding(src policy.OnboardingSource) RequestOption {
	return func(r *RequestReconciler) { r.onboarding = src }
}

// NewRequestReconciler returns a ClusterRequest controller working through
// c, a client of the platform cluster.
func NewRequestReconciler(c client.Client, opts ...RequestOption) *RequestReconciler {
	r := &RequestReconciler{
		client:            c,
		name:              RequestControllerName,
		tenancies:         DefaultTenancies(),
		provisionInterval: DefaultProvisionInterval,
	}
	for _, opt := range opts {
		opt(r)
	}
	if r.onboarding == nil {
		r.onboarding = OnboardingFromClusters(c, onboardingTimeout)
	}
	r.enforcer = policy.NewEnforcer(c, r.onboarding, "")
	return r
}

// onboardingTimeout bounds each request of the tenant check to the
// onboarding cluster.
const onboardingTimeout = 10 * time.Second

// Tenancy returns the tenancy requests of purpose get.
func (r *RequestReconciler) Tenancy(purpose string) clustersv1alpha1.Tenancy {
	if t, ok := r.tenancies[purpose]; ok {
		return t
	}
	return clustersv1alpha1.TenancyShared
}

// SetupWithManager registers the controller with mgr. Every change of a
// Cluster re-evaluates the requests that are not granted yet (and those
// being deleted, which may wait for a cluster to go). The access policy's
// limits are re-evaluated when a request of the same namespace comes or
// goes, and when a provider's spec (spec.accessPolicy) changes.
func (r *RequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.recorder = mgr.GetEventRecorder(r.name)
	spec := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		For(&clustersv1alpha1.ClusterRequest{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&clustersv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.openRequests)).
		Watches(&clustersv1alpha1.ClusterRequest{}, handler.EnqueueRequestsFromMapFunc(r.deniedSiblings)).
		Watches(&providerv1alpha1.ServiceProvider{}, handler.EnqueueRequestsFromMapFunc(r.providerRequests(policy.KindServiceProvider)), spec).
		Watches(&providerv1alpha1.ClusterProvider{}, handler.EnqueueRequestsFromMapFunc(r.providerRequests(policy.KindClusterProvider)), spec).
		Watches(&providerv1alpha1.PlatformService{}, handler.EnqueueRequestsFromMapFunc(r.providerRequests(policy.KindPlatformService)), spec).
		Complete(r)
}

// deniedSiblings returns the requests of obj's namespace that the access
// policy denied: one more or one less request there can change the count.
func (r *RequestReconciler) deniedSiblings(ctx context.Context, obj client.Object) []reconcile.Request {
	out := r.policyDenied(ctx, client.InNamespace(obj.GetNamespace()), obj.GetName())
	if owner := obj.GetLabels()[providerv1alpha1.ManagedByLabel]; owner != "" {
		// A provider's exclusive clusters count over all its tenants'
		// MCP namespaces.
		out = append(out, r.policyDenied(ctx, client.MatchingLabels{providerv1alpha1.ManagedByLabel: owner}, obj.GetName())...)
	}
	return out
}

// providerRequests returns the requests in the namespace of a provider
// whose spec changed that are not granted: its limits may have changed.
func (r *RequestReconciler) providerRequests(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var out []reconcile.Request
		for _, ns := range policy.WatchedNamespaces(ctx, r.client, kind, obj) {
			out = append(out, r.policyDenied(ctx, client.InNamespace(ns), "")...)
		}
		if kind == policy.KindServiceProvider {
			// Its requests in its tenants' MCP namespaces.
			out = append(out, r.policyDenied(ctx, client.MatchingLabels{providerv1alpha1.ManagedByLabel: obj.GetName()}, "")...)
		}
		return out
	}
}

// policyDenied returns the requests that sel selects, other than skip,
// that the access policy denied.
func (r *RequestReconciler) policyDenied(ctx context.Context, sel client.ListOption, skip string) []reconcile.Request {
	list := &clustersv1alpha1.ClusterRequestList{}
	if err := r.client.List(ctx, list, sel); err != nil {
		logf.FromContext(ctx).Error(err, "List ClusterRequests")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		cr := &list.Items[i]
		c := apimeta.FindStatusCondition(cr.Status.Conditions, common.ConditionTypeReady)
		if cr.Name != skip && cr.Status.Cluster == nil && c != nil && c.Reason == string(ReasonPolicyViolation) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
		}
	}
	return out
}

// openRequests returns every ClusterRequest that a Cluster change can
// affect: those not granted and those being deleted.
func (r *RequestReconciler) openRequests(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &clustersv1alpha1.ClusterRequestList{}
	if err := r.client.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "List ClusterRequests")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		cr := &list.Items[i]
		if !cr.Status.IsGranted() || !cr.DeletionTimestamp.IsZero() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
		}
	}
	return out
}

// Reconcile schedules one ClusterRequest.
func (r *RequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := r.client.Get(ctx, req.NamespacedName, cr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cr.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, cr)
	}
	if !controllerutil.ContainsFinalizer(cr, clustersv1alpha1.ClusterRequestFinalizer) {
		before := cr.DeepCopy()
		controllerutil.AddFinalizer(cr, clustersv1alpha1.ClusterRequestFinalizer)
		if err := r.client.Patch(ctx, cr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to ClusterRequest %s: %w", req.NamespacedName, err)
		}
	}
	orig := cr.DeepCopy()
	defer func() {
		if !equality.Semantic.DeepEqual(orig.Status, cr.Status) {
			if perr := r.client.Status().Patch(ctx, cr, client.MergeFrom(orig)); client.IgnoreNotFound(perr) != nil {
				err = errors.Join(err, fmt.Errorf("update status of ClusterRequest %s: %w", req.NamespacedName, perr))
			}
		}
	}()
	cr.Status.ObservedGeneration = cr.Generation

	if cr.Status.Cluster != nil {
		return ctrl.Result{}, r.keepGrant(ctx, cr)
	}
	return r.schedule(ctx, cr)
}

// keepGrant makes sure the granted Cluster still carries the request's
// finalizer (someone may have removed it) and reports the grant.
func (r *RequestReconciler) keepGrant(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) error {
	cluster := &clustersv1alpha1.Cluster{}
	if err := r.client.Get(ctx, cr.Status.Cluster.NamespacedName(), cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(cr, metav1.ConditionFalse, ReasonClusterNotFound,
				fmt.Sprintf("the granted Cluster %s no longer exists", cr.Status.Cluster.NamespacedName()))
			return nil
		}
		return fmt.Errorf("get Cluster %s: %w", cr.Status.Cluster.NamespacedName(), err)
	}
	if err := r.claim(ctx, cluster, cr, false); err != nil {
		return err
	}
	r.grant(cr, cluster)
	return nil
}

// schedule finds a cluster for a request that has none yet.
func (r *RequestReconciler) schedule(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	purpose, tenancy := cr.Spec.Purpose, r.Tenancy(cr.Spec.Purpose)
	list := &clustersv1alpha1.ClusterList{}
	if err := r.client.List(ctx, list); err != nil {
		return ctrl.Result{}, fmt.Errorf("list Clusters: %w", err)
	}

	// A grant whose status write was lost is recovered from the finalizer
	// the Cluster already carries.
	cluster := clusterWithFinalizer(list.Items, cr.FinalizerForCluster())
	provisioned := false
	if cluster == nil {
		// The access policy first: a request beyond the provider's limits
		// gets no cluster, and above all no new one.
		v, err := r.enforcer.CheckClusterRequest(ctx, cr, func(p string) bool { return r.Tenancy(p) == clustersv1alpha1.TenancyExclusive })
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("check the access policy for ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		if v != nil {
			r.setPhase(cr, clustersv1alpha1.RequestDenied, ReasonPolicyViolation, v.Error())
			log.V(1).Info("Denied by the access policy", "rule", v.Rule)
			return ctrl.Result{}, nil
		}
		cluster = choose(list.Items, purpose, tenancy)
	}
	if cluster == nil && tenancy == clustersv1alpha1.TenancyExclusive && r.provisioner != nil {
		c, res, err := r.provision(ctx, cr, tenancy)
		if c == nil && (err != nil || !res.IsZero()) {
			return res, err
		}
		cluster, provisioned = c, c != nil
	}
	if cluster == nil {
		if c := waitFor(list.Items, purpose, tenancy); c != nil {
			// A cluster that is starting, or did not answer one check of
			// a loaded machine, is no reason to deny: a denial is final
			// for openMCP's library, and the provider would give up.
			why := "has no Ready condition yet"
			if ready := apimeta.FindStatusCondition(c.Status.Conditions, common.ConditionTypeReady); ready != nil {
				why = "is Ready=" + string(ready.Status) + " (" + ready.Reason + ")"
			}
			r.setPhase(cr, clustersv1alpha1.RequestPending, ReasonClusterNotReady,
				fmt.Sprintf("waiting for Cluster %s/%s, the %s cluster with purpose %q, which %s", c.Namespace, c.Name, tenancy, purpose, why))
			log.V(1).Info("Waiting for a cluster to be Ready", "cluster", client.ObjectKeyFromObject(c))
			return ctrl.Result{}, nil
		}
		msg := fmt.Sprintf("no Ready %s cluster with purpose %q is available", tenancy, purpose)
		if tenancy == clustersv1alpha1.TenancyExclusive {
			msg = fmt.Sprintf("no Ready %s cluster with purpose %q is free and no cluster provider can create one", tenancy, purpose)
		}
		r.setPhase(cr, clustersv1alpha1.RequestDenied, ReasonNoMatchingCluster, msg)
		log.V(1).Info("No cluster fits", "purpose", purpose, "tenancy", tenancy)
		return ctrl.Result{}, nil
	}
	if err := r.claim(ctx, cluster, cr, provisioned); err != nil {
		return ctrl.Result{}, err
	}
	cr.Status.Cluster = &common.ObjectReference{Name: cluster.Name, Namespace: cluster.Namespace}
	r.grant(cr, cluster)
	log.V(1).Info("Granted cluster", "cluster", client.ObjectKeyFromObject(cluster), "purpose", purpose, "tenancy", tenancy)
	return ctrl.Result{}, nil
}

// provision asks the Provisioner for a new cluster. It returns the cluster,
// or the result to return while there is none; nil and a zero result when
// the Provisioner creates no clusters of the request's purpose.
func (r *RequestReconciler) provision(ctx context.Context, cr *clustersv1alpha1.ClusterRequest, tenancy clustersv1alpha1.Tenancy) (*clustersv1alpha1.Cluster, ctrl.Result, error) {
	c, err := r.provisioner.Provision(ctx, cr)
	switch {
	case errors.Is(err, ErrNoProvisioner):
		return nil, ctrl.Result{}, nil
	case err != nil:
		r.setPhase(cr, clustersv1alpha1.RequestPending, ReasonProvisioningFailed, fmt.Sprintf("provisioning a cluster failed: %v", err))
		return nil, ctrl.Result{}, fmt.Errorf("provision cluster for ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	case c == nil:
		r.setPhase(cr, clustersv1alpha1.RequestPending, ReasonProvisioning,
			fmt.Sprintf("a new %s cluster with purpose %q is being provisioned", tenancy, cr.Spec.Purpose))
		return nil, ctrl.Result{RequeueAfter: r.provisionInterval}, nil
	}
	if c.ResourceVersion == "" {
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return nil, ctrl.Result{}, fmt.Errorf("get provisioned Cluster %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return c, ctrl.Result{}, nil
}

// claim puts the request's finalizer (and, for a provisioned cluster, the
// ProvisionedForAnnotation) on cluster. The patch carries the resource
// version, so that two requests scheduled from a stale cache cannot both
// take the last free Exclusive cluster, or count tenants wrongly: the
// loser gets a conflict and is scheduled again.
func (r *RequestReconciler) claim(ctx context.Context, cluster *clustersv1alpha1.Cluster, cr *clustersv1alpha1.ClusterRequest, provisioned bool) error {
	before := cluster.DeepCopy()
	controllerutil.AddFinalizer(cluster, cr.FinalizerForCluster())
	if provisioned {
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[ProvisionedForAnnotation] = string(cr.UID)
	}
	if equality.Semantic.DeepEqual(before.ObjectMeta, cluster.ObjectMeta) {
		return nil
	}
	if err := r.client.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("claim Cluster %s/%s for ClusterRequest %s/%s: %w", cluster.Namespace, cluster.Name, cr.Namespace, cr.Name, err)
	}
	return nil
}

func (r *RequestReconciler) grant(cr *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) {
	r.setPhase(cr, clustersv1alpha1.RequestGranted, ReasonGranted,
		fmt.Sprintf("granted Cluster %s/%s", cluster.Namespace, cluster.Name))
}

// setPhase sets the phase and the matching Ready condition.
func (r *RequestReconciler) setPhase(cr *clustersv1alpha1.ClusterRequest, phase string, reason Reason, msg string) {
	cr.Status.Phase = phase
	status := metav1.ConditionFalse
	if phase == clustersv1alpha1.RequestGranted {
		status = metav1.ConditionTrue
	}
	r.setReady(cr, status, reason, msg)
}

// setReady sets the Ready condition and records an event when its status or
// reason changes.
func (r *RequestReconciler) setReady(cr *clustersv1alpha1.ClusterRequest, status metav1.ConditionStatus, reason Reason, msg string) {
	old := apimeta.FindStatusCondition(cr.Status.Conditions, common.ConditionTypeReady)
	apimeta.SetStatusCondition(&cr.Status.Conditions, metav1.Condition{
		Type:               common.ConditionTypeReady,
		Status:             status,
		Reason:             string(reason),
		Message:            msg,
		ObservedGeneration: cr.Generation,
	})
	if r.recorder == nil || (old != nil && old.Status == status && old.Reason == string(reason)) {
		return
	}
	eventType := corev1.EventTypeNormal
	if reason == ReasonNoMatchingCluster || reason == ReasonProvisioningFailed || reason == ReasonClusterNotFound || reason == ReasonPolicyViolation {
		eventType = corev1.EventTypeWarning
	}
	r.recorder.Eventf(cr, nil, eventType, string(reason), "Schedule", "%s", msg)
}

// finalize releases the request's cluster and then the request: it removes
// the request's finalizer from the Cluster, hands a provisioned cluster back
// to the Provisioner (waiting for it when spec.waitForClusterDeletion says
// so), deletes a registered cluster labelled delete-without-requests that
// has no tenant left, and finally drops the request's own finalizer.
func (r *RequestReconciler) finalize(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cr, clustersv1alpha1.ClusterRequestFinalizer) {
		return ctrl.Result{}, nil
	}
	tenancy := r.Tenancy(cr.Spec.Purpose)
	cluster, err := r.grantedCluster(ctx, cr)
	if err != nil {
		return ctrl.Result{}, err
	}
	release := r.provisioner != nil && tenancy == clustersv1alpha1.TenancyExclusive && cr.Status.Cluster == nil
	if cluster != nil {
		before := cluster.DeepCopy()
		if controllerutil.RemoveFinalizer(cluster, cr.FinalizerForCluster()) {
			if err := r.client.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("release Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
			}
		}
		release = r.provisioner != nil && cluster.Annotations[ProvisionedForAnnotation] == string(cr.UID)
		if !release && cluster.Labels[clustersv1alpha1.DeleteWithoutRequestsLabel] == "true" &&
			len(cluster.RequestUIDs()) == 0 && cluster.DeletionTimestamp.IsZero() {
			if err := r.client.Delete(ctx, cluster); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete Cluster %s/%s without requests: %w", cluster.Namespace, cluster.Name, err)
			}
		}
	}
	if release {
		done, err := r.provisioner.Release(ctx, cr, cluster)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("release provisioned cluster of ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		if !done && waitForClusterDeletion(cr, tenancy) {
			return ctrl.Result{RequeueAfter: r.provisionInterval}, nil
		}
	}
	before := cr.DeepCopy()
	controllerutil.RemoveFinalizer(cr, clustersv1alpha1.ClusterRequestFinalizer)
	if err := r.client.Patch(ctx, cr, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer of ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	return ctrl.Result{}, nil
}

// grantedCluster returns the Cluster the request holds: the one in
// status.cluster, or else the one carrying its finalizer; nil if none
// exists.
func (r *RequestReconciler) grantedCluster(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	if ref := cr.Status.Cluster; ref != nil {
		cluster := &clustersv1alpha1.Cluster{}
		if err := r.client.Get(ctx, ref.NamespacedName(), cluster); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("get Cluster %s: %w", ref.NamespacedName(), err)
		}
		return cluster, nil
	}
	list := &clustersv1alpha1.ClusterList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list Clusters: %w", err)
	}
	return clusterWithFinalizer(list.Items, cr.FinalizerForCluster()), nil
}

// waitForClusterDeletion applies the documented default of
// spec.waitForClusterDeletion: true for Exclusive, false for Shared.
func waitForClusterDeletion(cr *clustersv1alpha1.ClusterRequest, tenancy clustersv1alpha1.Tenancy) bool {
	if cr.Spec.WaitForClusterDeletion != nil {
		return *cr.Spec.WaitForClusterDeletion
	}
	return tenancy == clustersv1alpha1.TenancyExclusive
}
