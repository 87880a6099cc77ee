package access

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

var _ reconcile.Reconciler = &Reconciler{}

// Reconciler is the AccessRequest controller (see the package
// documentation).
type Reconciler struct {
	client          client.Client
	name            string
	accessNamespace string
	backoff         clusters.Backoff
	resync          time.Duration
	now             func() time.Time
	recorder        events.EventRecorder
	onboarding      policy.OnboardingSource
	enforcer        *policy.Enforcer
	// admission remembers on which targets the admission policies are
	// known to be enforced.
	admission admissionState
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithName names the controller (default ControllerName); the name labels
// its metrics and events.
func WithName(name string) Option { return func(r *Reconciler) { r.name = name } }

// WithAccessNamespace sets the namespace on target clusters that holds the
// ServiceAccounts (default AccessNamespace).
func WithAccessNamespace(ns string) Option {
	return func(r *Reconciler) { r.accessNamespace = ns }
}

// WithRetryBackoff sets how requests whose target cluster cannot be used
// are retried (default clusters.DefaultBackoff).
func WithRetryBackoff(b clusters.Backoff) Option {
	return func(r *Reconciler) { r.backoff = b }
}

// WithResyncInterval sets the longest time between two reconciles of a
// granted request (default DefaultResyncInterval).
func WithResyncInterval(d time.Duration) Option {
	return func(r *Reconciler) { r.resync = d }
}

// WithOnboarding sets how the access policy reaches the onboarding cluster
// to find a provider's tenants (default: the admin kubeconfig of the
// Cluster with purpose onboarding).
func WithOnboarding(src policy.OnboardingSource) Option {
	return func(r *Reconciler) { r.onboarding = src }
}

// NewReconciler returns an AccessRequest controller working through c, a
// client of the platform cluster. It enforces the access policy on the
// requests in provider namespaces.
func NewReconciler(c client.Client, opts ...Option) *Reconciler {
	r := &Reconciler{
		client:          c,
		name:            ControllerName,
		accessNamespace: AccessNamespace,
		backoff:         clusters.DefaultBackoff,
		resync:          DefaultResyncInterval,
		now:             time.Now,
	}
	for _, opt := range opts {
		opt(r)
	}
	if r.onboarding == nil {
		r.onboarding = clusters.OnboardingFromClusters(c, TargetTimeout)
	}
	r.enforcer = policy.NewEnforcer(c, r.onboarding, r.accessNamespace)
	return r
}

// SetupWithManager registers the controller with mgr. It watches the
// kubeconfig Secrets it owns (a deleted or edited Secret is rewritten) and
// the Roles and RoleBindings that let a provider read one in an MCP
// namespace, the
// ClusterRequests that requests refer to (a grant proceeds at once), the
// Clusters (a cluster becoming ready retries the requests waiting for it)
// and the providers (a changed spec.accessPolicy checks their requests
// again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.recorder = mgr.GetEventRecorder(r.name)
	spec := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		For(&clustersv1alpha1.AccessRequest{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Owns(&corev1.Secret{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&clustersv1alpha1.ClusterRequest{}, handler.EnqueueRequestsFromMapFunc(r.requestsForClusterRequest)).
		Watches(&clustersv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster)).
		Watches(&providerv1alpha1.ServiceProvider{}, handler.EnqueueRequestsFromMapFunc(r.requestsForProvider(policy.KindServiceProvider)), spec).
		Watches(&providerv1alpha1.ClusterProvider{}, handler.EnqueueRequestsFromMapFunc(r.requestsForProvider(policy.KindClusterProvider)), spec).
		Watches(&providerv1alpha1.PlatformService{}, handler.EnqueueRequestsFromMapFunc(r.requestsForProvider(policy.KindPlatformService)), spec).
		Complete(r)
}

func (r *Reconciler) requestsForClusterRequest(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.matching(ctx, func(ar *clustersv1alpha1.AccessRequest) bool {
		ref := ar.Spec.RequestRef
		return ref != nil && ref.Name == obj.GetName() && ref.Namespace == obj.GetNamespace()
	})
}

// requestsForCluster returns the requests for a Cluster that are not Ready
// (or are being deleted): only they can make progress when it changes.
func (r *Reconciler) requestsForCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(obj)
	return r.matching(ctx, func(ar *clustersv1alpha1.AccessRequest) bool {
		if apimeta.IsStatusConditionTrue(ar.Status.Conditions, common.ConditionTypeReady) && ar.DeletionTimestamp.IsZero() {
			return false
		}
		if ref := ar.Spec.ClusterRef; ref != nil {
			return ref.NamespacedName() == key
		}
		if ar.Annotations[TargetClusterAnnotation] == key.String() {
			return true
		}
		if ref := ar.Spec.RequestRef; ref != nil {
			cr := &clustersv1alpha1.ClusterRequest{}
			if err := r.client.Get(ctx, ref.NamespacedName(), cr); err != nil {
				return false
			}
			return cr.Status.Cluster != nil && cr.Status.Cluster.NamespacedName() == key
		}
		return false
	})
}

func (r *Reconciler) matching(ctx context.Context, match func(*clustersv1alpha1.AccessRequest) bool) []reconcile.Request {
	list := &clustersv1alpha1.AccessRequestList{}
	if err := r.client.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "List AccessRequests")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if match(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// outcome is how a reconcile step ended when it could not finish the work:
// the phase (empty: unchanged) and Ready reason to report, and whether to
// retry with backoff (otherwise only a watched object's change retries).
type outcome struct {
	phase   string
	reason  Reason
	message string
	retry   bool
}

// Reconcile grants or revokes one AccessRequest.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	ar := &clustersv1alpha1.AccessRequest{}
	if err := r.client.Get(ctx, req.NamespacedName, ar); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := ar.DeepCopy()
	defer func() {
		if !equality.Semantic.DeepEqual(orig.Status, ar.Status) {
			if perr := r.client.Status().Patch(ctx, ar, client.MergeFrom(orig)); client.IgnoreNotFound(perr) != nil {
				err = errors.Join(err, fmt.Errorf("update status of AccessRequest %s: %w", req.NamespacedName, perr))
			}
		}
	}()
	ar.Status.ObservedGeneration = ar.Generation

	var o *outcome
	var next time.Duration
	switch {
	case !ar.DeletionTimestamp.IsZero():
		o, err = r.revoke(ctx, ar)
	case ar.Spec.OIDC != nil || ar.Spec.Token == nil || ttlError(ar) != nil:
		o, err = r.refuse(ctx, ar)
	default:
		o, next, err = r.grant(ctx, ar)
	}
	if err != nil || o == nil {
		return ctrl.Result{RequeueAfter: next}, err
	}
	return r.report(ctx, ar, o), nil
}

// refuse reports a request the controller cannot serve (OIDC, no token, or
// a spec.ttl that is not a duration). Anything a token request created
// earlier is revoked first: it must not outlive a change of the spec.
func (r *Reconciler) refuse(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*outcome, error) {
	if o, err := r.revoke(ctx, ar); o != nil || err != nil {
		return o, err
	}
	ar.Status.SecretRef = nil
	if ar.Spec.OIDC != nil {
		return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonOIDCNotSupported,
			message: "OIDC access is not supported on Marketplane's clusters; request token access"}, nil
	}
	if ar.Spec.Token == nil {
		return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonInvalidSpec, message: "spec.token is not set"}, nil
	}
	return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonInvalidSpec, message: ttlError(ar).Error()}, nil
}

// report turns an outcome into the status (Ready=False) and the result:
// retried with backoff when the outcome says so, else only when a watched
// object changes.
func (r *Reconciler) report(ctx context.Context, ar *clustersv1alpha1.AccessRequest, o *outcome) ctrl.Result {
	oldReason := ""
	if c := apimeta.FindStatusCondition(ar.Status.Conditions, common.ConditionTypeReady); c != nil {
		oldReason = c.Reason
	}
	countDenied(ar, o, oldReason)
	switch {
	case o.phase != "":
		ar.Status.Phase = o.phase
	case ar.Status.Phase == "":
		// Never granted nor denied yet; a granted request keeps its phase
		// (its Secret still works) while its cluster has trouble.
		ar.Status.Phase = clustersv1alpha1.RequestPending
	}
	r.setReady(ar, metav1.ConditionFalse, o.reason, o.message)
	if !o.retry {
		return ctrl.Result{}
	}
	retry := r.backoff.ForConditions(ar.Status.Conditions, r.now())
	logf.FromContext(ctx).V(1).Info("Access not ready, retrying", "reason", o.reason, "retryAfter", retry)
	return ctrl.Result{RequeueAfter: retry}
}

// setReady sets the Ready condition and records an event when its status or
// reason changes.
func (r *Reconciler) setReady(ar *clustersv1alpha1.AccessRequest, status metav1.ConditionStatus, reason Reason, msg string) {
	old := apimeta.FindStatusCondition(ar.Status.Conditions, common.ConditionTypeReady)
	apimeta.SetStatusCondition(&ar.Status.Conditions, metav1.Condition{
		Type:               common.ConditionTypeReady,
		Status:             status,
		Reason:             string(reason),
		Message:            msg,
		ObservedGeneration: ar.Generation,
	})
	if r.recorder == nil || (old != nil && old.Status == status && old.Reason == string(reason)) {
		return
	}
	eventType := corev1.EventTypeNormal
	if status != metav1.ConditionTrue && reason != ReasonClusterRequestPending {
		eventType = corev1.EventTypeWarning
	}
	r.recorder.Eventf(ar, nil, eventType, string(reason), "Grant", "%s", msg)
}

// revoke deletes everything created for the request on its target cluster
// and the kubeconfig Secret, then removes the finalizer. A request whose
// Cluster no longer exists has nothing left to revoke there.
func (r *Reconciler) revoke(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*outcome, error) {
	if !controllerutil.ContainsFinalizer(ar, Finalizer) {
		return nil, nil
	}
	log := logf.FromContext(ctx)
	key, ok := parseKey(ar.Annotations[TargetClusterAnnotation])
	if ok {
		cluster := &clustersv1alpha1.Cluster{}
		err := r.client.Get(ctx, key, cluster)
		switch {
		case apierrors.IsNotFound(err):
			log.Info("Target Cluster is gone, nothing to revoke there", "cluster", key)
		case err != nil:
			return nil, fmt.Errorf("get Cluster %s: %w", key, err)
		default:
			target, o, err := r.connect(ctx, cluster)
			if o != nil || err != nil {
				if o != nil {
					o.retry = true
				}
				return o, err
			}
			if err := deleteLabelled(ctx, target, string(ar.UID), nil); err != nil {
				o := targetError(err)
				o.phase = ""
				return o, nil
			}
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(ar), Namespace: ar.Namespace}}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(secret), secret); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("get Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	} else if err == nil && metav1.IsControlledBy(secret, ar) {
		if err := r.client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete Secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
	}
	if err := r.deleteSecretReader(ctx, ar); err != nil {
		return nil, err
	}
	before := ar.DeepCopy()
	controllerutil.RemoveFinalizer(ar, Finalizer)
	delete(ar.Annotations, TargetClusterAnnotation)
	status := ar.Status.DeepCopy()
	if err := r.client.Patch(ctx, ar, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("remove finalizer of AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	ar.Status = *status
	log.V(1).Info("Revoked access")
	return nil, nil
}

func parseKey(s string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}
