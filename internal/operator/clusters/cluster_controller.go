package clusters

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
)

var _ reconcile.Reconciler = &ClusterReconciler{}

// ClusterReconciler keeps the status of Clusters current: it reads each
// Cluster's admin kubeconfig, calls the API server and reports Ready,
// phase, status.endpoints and the Kubernetes version (label
// clusters.openmcp.cloud/k8sversion). It is the static cluster provider's
// controller and also watches every Cluster another provider registers with
// a kubeconfig Secret.
type ClusterReconciler struct {
	client        client.Client
	name          string
	prober        Prober
	readyInterval time.Duration
	backoff       Backoff
	now           func() time.Time
	recorder      events.EventRecorder
}

// ClusterOption configures a ClusterReconciler.
type ClusterOption func(*ClusterReconciler)

// WithClusterControllerName names the controller (default
// ClusterControllerName); the name labels its metrics and events.
func WithClusterControllerName(name string) ClusterOption {
	return func(r *ClusterReconciler) { r.name = name }
}

// WithProber replaces the reachability check (default VersionProber).
func WithProber(p Prober) ClusterOption {
	return func(r *ClusterReconciler) { r.prober = p }
}

// WithReadyInterval sets how often a Ready cluster is checked again
// (default DefaultReadyInterval).
func WithReadyInterval(d time.Duration) ClusterOption {
	return func(r *ClusterReconciler) { r.readyInterval = d }
}

// WithRetryBackoff sets how a cluster that is not ready is retried (default
// DefaultBackoff).
func WithRetryBackoff(b Backoff) ClusterOption {
	return func(r *ClusterReconciler) { r.backoff = b }
}

// NewClusterReconciler returns a Cluster controller that reads Clusters and
// their kubeconfig Secrets through c, a client of the platform cluster.
func NewClusterReconciler(c client.Client, opts ...ClusterOption) *ClusterReconciler {
	r := &ClusterReconciler{
		client:        c,
		name:          ClusterControllerName,
		prober:        VersionProber{},
		readyInterval: DefaultReadyInterval,
		backoff:       DefaultBackoff,
		now:           time.Now,
	}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// SetupWithManager registers the controller with mgr. Besides Clusters it
// watches Secrets, so that creating or fixing a kubeconfig Secret checks the
// Clusters that name it at once.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.recorder = mgr.GetEventRecorder(r.name)
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		// Status writes (our own) do not need a reconcile; spec, annotation
		// (the Secret's name) and deletion changes do.
		For(&clustersv1alpha1.Cluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersForSecret)).
		Complete(r)
}

// clustersForSecret maps a Secret to the Clusters in its namespace that name
// it as their kubeconfig Secret.
func (r *ClusterReconciler) clustersForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &clustersv1alpha1.ClusterList{}
	if err := r.client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		logf.FromContext(ctx).Error(err, "List Clusters for Secret", "secret", client.ObjectKeyFromObject(obj))
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Annotations[KubeconfigSecretAnnotation] == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile checks one Cluster.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	log := logf.FromContext(ctx)
	cluster := &clustersv1alpha1.Cluster{}
	if err := r.client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := cluster.DeepCopy()
	defer func() {
		err = errors.Join(err, r.persist(ctx, orig, cluster))
	}()
	cluster.Status.ObservedGeneration = cluster.Generation

	if !cluster.DeletionTimestamp.IsZero() {
		// Requests still hold the cluster (their finalizers); there is
		// nothing to check any more.
		cluster.Status.Phase = common.StatusPhaseTerminating
		r.setReady(cluster, metav1.ConditionFalse, ReasonDeleting, "the Cluster is being deleted")
		return ctrl.Result{}, nil
	}

	cfg, err := AdminConfig(ctx, r.client, cluster)
	if err != nil {
		reason, user := ReasonFor(err)
		if !user {
			return ctrl.Result{}, err
		}
		r.setNotReady(cluster, reason, err.Error())
		retry := r.backoff.ForConditions(cluster.Status.Conditions, r.now())
		log.V(1).Info("Cluster kubeconfig unusable", "reason", reason, "retryAfter", retry)
		return ctrl.Result{RequeueAfter: retry}, nil
	}

	info, err := r.prober.Probe(ctx, cfg)
	if err != nil {
		r.setNotReady(cluster, ReasonUnreachable, fmt.Sprintf("GET %s/version: %v", cfg.Host, err))
		retry := r.backoff.ForConditions(cluster.Status.Conditions, r.now())
		log.V(1).Info("Cluster unreachable", "host", cfg.Host, "error", err.Error(), "retryAfter", retry)
		return ctrl.Result{RequeueAfter: retry}, nil
	}

	setEndpoint(cluster, clustersv1alpha1.EndpointAPIServerExternal, cfg.Host)
	cluster.Status.APIServer = cfg.Host //nolint:staticcheck // still filled for readers of the deprecated field
	if v := versionLabelValue(info.GitVersion); v != "" {
		if cluster.Labels == nil {
			cluster.Labels = map[string]string{}
		}
		cluster.Labels[clustersv1alpha1.K8sVersionLabel] = v
	}
	cluster.Status.Phase = common.StatusPhaseReady
	r.setReady(cluster, metav1.ConditionTrue, ReasonReachable,
		fmt.Sprintf("the API server answered with Kubernetes %s", info.GitVersion))
	return ctrl.Result{RequeueAfter: r.readyInterval}, nil
}

func (r *ClusterReconciler) setNotReady(cluster *clustersv1alpha1.Cluster, reason Reason, msg string) {
	cluster.Status.Phase = common.StatusPhaseProgressing
	r.setReady(cluster, metav1.ConditionFalse, reason, msg)
}

// setReady sets the Ready condition and records an event when its status or
// reason changes.
func (r *ClusterReconciler) setReady(cluster *clustersv1alpha1.Cluster, status metav1.ConditionStatus, reason Reason, msg string) {
	old := apimeta.FindStatusCondition(cluster.Status.Conditions, common.ConditionTypeReady)
	apimeta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{
		Type:               common.ConditionTypeReady,
		Status:             status,
		Reason:             string(reason),
		Message:            msg,
		ObservedGeneration: cluster.Generation,
	})
	if old != nil && old.Status == status && old.Reason == string(reason) {
		return
	}
	eventType := corev1.EventTypeNormal
	if status != metav1.ConditionTrue {
		eventType = corev1.EventTypeWarning
	}
	if r.recorder != nil {
		r.recorder.Eventf(cluster, nil, eventType, string(reason), "Check", "%s", msg)
	}
}

// persist writes the version label and the status, each only when changed.
func (r *ClusterReconciler) persist(ctx context.Context, orig, cluster *clustersv1alpha1.Cluster) error {
	var errs []error
	if !equality.Semantic.DeepEqual(orig.Labels, cluster.Labels) {
		// Patch a copy: the response would overwrite the status computed
		// in cluster before it is written.
		if err := r.client.Patch(ctx, cluster.DeepCopy(), client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("label Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err))
		}
	}
	if !equality.Semantic.DeepEqual(orig.Status, cluster.Status) {
		if err := r.client.Status().Patch(ctx, cluster, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("update status of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err))
		}
	}
	return errors.Join(errs...)
}

// setEndpoint sets the endpoint name to url, keeping the other endpoints.
func setEndpoint(cluster *clustersv1alpha1.Cluster, name, url string) {
	for i := range cluster.Status.Endpoints {
		if cluster.Status.Endpoints[i].Name == name {
			cluster.Status.Endpoints[i].URL = url
			return
		}
	}
	cluster.Status.Endpoints = append(cluster.Status.Endpoints, clustersv1alpha1.Endpoint{Name: name, URL: url})
}
