package kcpprovider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

var _ reconcile.Reconciler = &Reconciler{}

// Reconciler is the kcp ClusterProvider's controller. It serves the
// Clusters whose ClusterProfile names its provider with a kcp workspace
// each (see the package comment).
type Reconciler struct {
	platform      client.Client
	reader        client.Reader
	kcp           *rest.Config
	providerName  string
	name          string
	tokenLifetime time.Duration
	workspaceWait time.Duration
	backoff       [2]time.Duration
	kcpTimeout    time.Duration
	workers       int
	now           func() time.Time

	recorder   events.EventRecorder
	workspaces dynamic.NamespaceableResourceInterface
	parentPath string
	caData     []byte
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithControllerName names the controller (default ControllerName); the
// name labels its metrics and events and must be unique in a process.
func WithControllerName(name string) Option {
	return func(r *Reconciler) { r.name = name }
}

// WithTokenLifetime sets how long a workspace admin token lasts (default
// DefaultTokenLifetime); it is renewed after RenewFraction of it.
func WithTokenLifetime(d time.Duration) Option {
	return func(r *Reconciler) { r.tokenLifetime = d }
}

// WithRetryBackoff sets the first and the longest wait before a failed
// Cluster is tried again (default DefaultBackoff).
func WithRetryBackoff(first, longest time.Duration) Option {
	return func(r *Reconciler) { r.backoff = [2]time.Duration{first, longest} }
}

// WithWorkspaceWait sets how long a Cluster waits before its Workspace is
// looked at again while it becomes Ready or goes (default
// DefaultWorkspaceWait).
func WithWorkspaceWait(d time.Duration) Option {
	return func(r *Reconciler) { r.workspaceWait = d }
}

// WithAPIReader sets the uncached reader of Secrets (default the manager's
// API reader), so that the provider caches no Secrets of the platform.
func WithAPIReader(reader client.Reader) Option {
	return func(r *Reconciler) { r.reader = reader }
}

// New returns the controller. platform is a client of the platform cluster;
// kcp is an admin config of the kcp workspace under which the Clusters'
// workspaces are created (normally root: server .../clusters/root);
// providerName is the ClusterProvider's name, which the ClusterProfiles of
// its Clusters name.
func New(platform client.Client, kcp *rest.Config, providerName string, opts ...Option) *Reconciler {
	r := &Reconciler{
		platform:      platform,
		kcp:           rest.CopyConfig(kcp),
		providerName:  providerName,
		name:          ControllerName,
		tokenLifetime: DefaultTokenLifetime,
		workspaceWait: DefaultWorkspaceWait,
		backoff:       DefaultBackoff,
		kcpTimeout:    DefaultKCPTimeout,
		workers:       4,
		now:           time.Now,
	}
	for _, opt := range opts {
		opt(r)
	}
	if r.kcp.Timeout == 0 {
		r.kcp.Timeout = r.kcpTimeout
	}
	if r.kcp.QPS == 0 && r.kcp.RateLimiter == nil {
		// No client-side limit, as in every Marketplane binary
		// (docs/architecture.md#client-limits): kcp's API Priority and
		// Fairness protects it. client-go's default of 5 requests/s let
		// 500 new workspaces wait for kubeconfigs long after kcp had them
		// Ready.
		r.kcp.QPS, r.kcp.Burst = -1, 0
	}
	return r
}

// SetupWithManager registers the controller with mgr, a manager of the
// platform cluster. Besides Clusters it watches ClusterProfiles, so that a
// profile created after its Clusters serves them at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.connect(); err != nil {
		return err
	}
	r.recorder = mgr.GetEventRecorder(r.name)
	if r.reader == nil {
		r.reader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		For(&clustersv1alpha1.Cluster{}, builder.WithPredicates(metadataChanged())).
		Watches(&clustersv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(r.clustersForProfile)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.workers,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](r.backoff[0], r.backoff[1]),
		}).
		Complete(r)
}

// connect builds the kcp client and reads what the kubeconfigs it writes
// need from the admin config: the CA and the parent workspace's path.
func (r *Reconciler) connect() error {
	dyn, err := dynamic.NewForConfig(r.kcp)
	if err != nil {
		return fmt.Errorf("kcp client: %w", err)
	}
	r.workspaces = dyn.Resource(WorkspaceGVR)
	if r.parentPath, err = workspacePath(r.kcp.Host); err != nil {
		return err
	}
	r.caData = r.kcp.CAData
	if len(r.caData) == 0 && r.kcp.CAFile != "" {
		if r.caData, err = os.ReadFile(r.kcp.CAFile); err != nil {
			return fmt.Errorf("read kcp CA: %w", err)
		}
	}
	return nil
}

// workspacePath returns the logical path of the workspace a kcp server URL
// names (https://host/clusters/root:org → root:org), root when it names
// none.
func workspacePath(host string) (string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("kcp server %q: %w", host, err)
	}
	path, ok := strings.CutPrefix(strings.TrimSuffix(u.Path, "/"), "/clusters/")
	if !ok || path == "" {
		return "root", nil
	}
	return path, nil
}

// metadataChanged passes Cluster changes the provider acts on: spec,
// labels, annotations, finalizers and deletion, but not the status the
// Cluster controller writes.
func metadataChanged() predicate.Predicate {
	return predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers()) ||
				!e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
		}},
	)
}

// clustersForProfile maps a ClusterProfile to the Clusters of that profile.
func (r *Reconciler) clustersForProfile(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &clustersv1alpha1.ClusterList{}
	if err := r.platform.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "List Clusters for ClusterProfile", "profile", obj.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.Profile == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile serves one Cluster: it creates or renews what the Cluster
// needs, or removes it when the Cluster is being deleted. Failures are
// recorded as Warning events and retried with backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &clustersv1alpha1.Cluster{}
	if err := r.platform.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ours, err := r.serves(ctx, cluster)
	if err != nil || !ours {
		return ctrl.Result{}, err
	}
	var res ctrl.Result
	if cluster.DeletionTimestamp.IsZero() {
		res, err = r.ensure(ctx, cluster)
	} else {
		res, err = r.finalize(ctx, cluster)
	}
	if err != nil && !apierrors.IsConflict(err) {
		reason := ReasonKCPError
		if errors.Is(err, errWorkspaceConflict) {
			reason = ReasonWorkspaceConflict
		}
		r.recorder.Eventf(cluster, nil, corev1.EventTypeWarning, string(reason), "Reconcile", "%s", err.Error())
	}
	return res, err
}

// serves reports whether the Cluster is this provider's: its finalizer is
// on it, or its ClusterProfile names the provider.
func (r *Reconciler) serves(ctx context.Context, cluster *clustersv1alpha1.Cluster) (bool, error) {
	if controllerutil.ContainsFinalizer(cluster, Finalizer) {
		return true, nil
	}
	profile := &clustersv1alpha1.ClusterProfile{}
	if err := r.platform.Get(ctx, client.ObjectKey{Name: cluster.Spec.Profile}, profile); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get ClusterProfile %s: %w", cluster.Spec.Profile, err)
	}
	return profile.Spec.ProviderRef.Name == r.providerName, nil
}
