package sisters

import (
	"context"
	"errors"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
)

// ConditionProvisionerReady is the condition the Reconciler keeps on a
// sister's SFCluster on the master: whether the sister's provisioner is
// installed and available.
const ConditionProvisionerReady = "ProvisionerReady"

// Reasons of the ProvisionerReady condition.
const (
	// ReasonAvailable: the Deployment has an available replica.
	ReasonAvailable = "Available"
	// ReasonInstalling: installed, no replica available yet.
	ReasonInstalling = "Installing"
	// ReasonNotConfigured: the ProviderConfig has no
	// spec.sisterProvisioner.image; nothing is installed.
	ReasonNotConfigured = "NotConfigured"
	// ReasonClusterUnreachable: the sister does not answer; retried.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonConflict: an object the provisioner needs exists on the
	// sister and is not this master's; nothing is changed.
	ReasonConflict = "ProvisionerConflict"
	// ReasonInstallFailed: the sister or the master refused a request.
	ReasonInstallFailed = "InstallFailed"
	// ReasonOffboarding: the provisioner waits for the replicas to go,
	// then is removed.
	ReasonOffboarding = "Offboarding"
)

// Finalizer keeps a sister's SFCluster until its provisioner is removed.
const Finalizer = "interoperator.marketplane.io/sister-provisioner"

// FieldOwner is the server-side apply field manager on the sisters.
const FieldOwner = "marketplane-interoperator-sisters"

// DefaultControllerName is the controller's name without a prefix.
const DefaultControllerName = "sfcluster-provisioner"

// Defaults of how often a sister is looked at without an event.
const (
	DefaultReadyInterval   = time.Minute
	DefaultPendingInterval = 5 * time.Second
)

// Reconciler installs, upgrades and removes the provisioners of the
// sisters of one inter-operator.
type Reconciler struct {
	providerName string
	environment  string
	platform     cluster.Cluster
	registry     *clusters.Registry
	crds         []*apiextensionsv1.CustomResourceDefinition
	clusterRules []rbacv1.PolicyRule
	catalogRules []rbacv1.PolicyRule

	name    string
	options controller.Options
	ready   time.Duration
	pending time.Duration
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithControllerName names the controller (DefaultControllerName).
func WithControllerName(name string) Option { return func(r *Reconciler) { r.name = name } }

// WithControllerOptions sets the controller's options.
func WithControllerOptions(o controller.Options) Option { return func(r *Reconciler) { r.options = o } }

// WithIntervals sets how often an available provisioner, and one that is
// not, is looked at without an event.
func WithIntervals(ready, pending time.Duration) Option {
	return func(r *Reconciler) {
		if ready > 0 {
			r.ready = ready
		}
		if pending > 0 {
			r.pending = pending
		}
	}
}

// Permissions are the RBAC rules of the sister's inter-operator: Cluster
// cluster-wide (what run needs on its onboarding and platform cluster),
// Catalog in the catalog namespace (the kubeconfig Secret is added by
// name).
type Permissions struct {
	Cluster []rbacv1.PolicyRule
	Catalog []rbacv1.PolicyRule
}

// New returns the Reconciler of the inter-operator providerName running in
// environment: it reads SFClusters, the ProviderConfig, kubeconfig and
// pull Secrets on platform, reaches the sisters through registry, installs
// crds when missing and grants perms.
func New(providerName, environment string, platform cluster.Cluster, registry *clusters.Registry, crds []*apiextensionsv1.CustomResourceDefinition, perms Permissions, opts ...Option) *Reconciler {
	r := &Reconciler{
		providerName: providerName, environment: environment, platform: platform, registry: registry, crds: crds,
		clusterRules: perms.Cluster, catalogRules: perms.Catalog,
		name: DefaultControllerName, ready: DefaultReadyInterval, pending: DefaultPendingInterval,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetupWithManager registers the controller with mgr, to which the
// platform cluster must have been added. It watches the SFClusters and
// the ProviderConfig.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil || r.platform == nil || r.registry == nil {
		return errors.New("setup sister provisioner controller: manager, platform cluster and registry are required")
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		WithOptions(r.options).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &resourcev1alpha1.SFCluster{},
			&handler.TypedEnqueueRequestForObject[*resourcev1alpha1.SFCluster]{},
			predicate.Or[*resourcev1alpha1.SFCluster](predicate.TypedGenerationChangedPredicate[*resourcev1alpha1.SFCluster]{},
				predicate.TypedFuncs[*resourcev1alpha1.SFCluster]{UpdateFunc: func(e event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]) bool {
					// Deletion, and another writer dropping the condition.
					o, n := e.ObjectOld, e.ObjectNew
					return (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
						(apimeta.FindStatusCondition(o.Status.Conditions, ConditionProvisionerReady) != nil) != (apimeta.FindStatusCondition(n.Status.Conditions, ConditionProvisionerReady) != nil)
				}}))).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &interoperatorv1alpha1.ProviderConfig{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, c *interoperatorv1alpha1.ProviderConfig) []reconcile.Request {
				return r.clustersIn(ctx, c.CatalogNamespace())
			}),
			predicate.NewTypedPredicateFuncs(func(c *interoperatorv1alpha1.ProviderConfig) bool { return c.Name == r.providerName }))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup sister provisioner controller: %w", err)
	}
	return nil
}

// clustersIn returns requests for every SFCluster of namespace.
func (r *Reconciler) clustersIn(ctx context.Context, namespace string) []reconcile.Request {
	list := &resourcev1alpha1.SFClusterList{}
	if err := r.platform.GetClient().List(ctx, list, client.InNamespace(namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "Cannot list the SFClusters to look at", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile installs or removes the provisioner of one SFCluster's sister
// and writes its ProvisionerReady condition.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.platform.GetClient()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if req.Namespace != cfg.CatalogNamespace() || cfg.UID == "" {
		return ctrl.Result{}, nil
	}
	sfc := &resourcev1alpha1.SFCluster{}
	if err := c.Get(ctx, req.NamespacedName, sfc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	replicated := sfc.Spec.ProvisioningMode == resourcev1alpha1.ProvisioningReplicate
	configured := cfg.Spec.SisterProvisioner != nil && cfg.Spec.SisterProvisioner.Image != ""
	if sfc.DeletionTimestamp != nil || !replicated || !configured {
		if controllerutil.ContainsFinalizer(sfc, Finalizer) {
			return r.offboard(ctx, cfg, sfc)
		}
		switch {
		case sfc.DeletionTimestamp != nil:
			return ctrl.Result{}, nil
		case !replicated:
			return ctrl.Result{}, r.removeCondition(ctx, sfc)
		}
		return ctrl.Result{}, r.setCondition(ctx, sfc, metav1.ConditionFalse, ReasonNotConfigured,
			"the ProviderConfig sets no spec.sisterProvisioner.image: no provisioner is installed on the sister; install one by hand or set it")
	}
	if err := r.patchFinalizer(ctx, sfc, controllerutil.AddFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	return r.install(ctx, cfg, sfc)
}

// fail records err in the condition: the sister's silence as
// ClusterUnreachable, a foreign object as ProvisionerConflict (looked at
// again later, not retried at once), anything else as InstallFailed;
// errors are returned for the controller's backoff.
func (r *Reconciler) fail(ctx context.Context, sfc *resourcev1alpha1.SFCluster, doing string, err error) (ctrl.Result, error) {
	reason := ReasonInstallFailed
	var conflict *conflictError
	switch {
	case clusters.Unreachable(err):
		reason = ReasonClusterUnreachable
	case errors.As(err, &conflict):
		reason = ReasonConflict
	}
	if kerr, ok := clusters.AsError(err); ok {
		reason = kerr.Reason
	}
	msg := fmt.Sprintf("%s: %v", doing, err)
	if werr := r.setCondition(ctx, sfc, metav1.ConditionFalse, reason, msg); werr != nil {
		return ctrl.Result{}, werr
	}
	if reason == ReasonConflict {
		logf.FromContext(ctx).Info("The sister's provisioner is not this master's", "sfcluster", sfc.Name, "reason", msg)
		return ctrl.Result{RequeueAfter: r.ready}, nil
	}
	return ctrl.Result{}, fmt.Errorf("SFCluster %s: %s", sfc.Name, msg)
}

// setCondition patches the ProvisionerReady condition of sfc alone, with
// an optimistic lock, when it changed.
func (r *Reconciler) setCondition(ctx context.Context, sfc *resourcev1alpha1.SFCluster, status metav1.ConditionStatus, reason, msg string) error {
	before := sfc.DeepCopy()
	if !apimeta.SetStatusCondition(&sfc.Status.Conditions, metav1.Condition{
		Type: ConditionProvisionerReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: sfc.Generation,
	}) {
		return nil
	}
	return r.patchStatus(ctx, before, sfc)
}

func (r *Reconciler) removeCondition(ctx context.Context, sfc *resourcev1alpha1.SFCluster) error {
	before := sfc.DeepCopy()
	if !apimeta.RemoveStatusCondition(&sfc.Status.Conditions, ConditionProvisionerReady) {
		return nil
	}
	return r.patchStatus(ctx, before, sfc)
}

func (r *Reconciler) patchStatus(ctx context.Context, before, sfc *resourcev1alpha1.SFCluster) error {
	err := r.platform.GetClient().Status().Patch(ctx, sfc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch the %s condition of SFCluster %s: %w", ConditionProvisionerReady, sfc.Name, err)
	}
	return nil
}

// patchFinalizer adds or removes the Finalizer with a patch that fails on
// conflict, so that other finalizers are never lost.
func (r *Reconciler) patchFinalizer(ctx context.Context, sfc *resourcev1alpha1.SFCluster, change func(client.Object, string) bool) error {
	before := sfc.DeepCopy()
	if !change(sfc, Finalizer) {
		return nil
	}
	if err := r.platform.GetClient().Patch(ctx, sfc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the finalizers of SFCluster %s: %w", sfc.Name, err)
	}
	return nil
}
