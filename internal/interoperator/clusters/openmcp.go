package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// Labels by which the SFClusters and AccessRequests registered for an
// openMCP Cluster name it. Objects without them are never touched by the
// WorkloadClusterReconciler.
const (
	LabelWorkloadClusterNamespace = "interoperator.marketplane.io/workload-cluster-namespace"
	LabelWorkloadClusterName      = "interoperator.marketplane.io/workload-cluster-name"
)

// DefaultWorkloadControllerName names the WorkloadClusterReconciler.
const DefaultWorkloadControllerName = "openmcp-workload-clusters"

// WorkloadClusterReconciler registers the openMCP Clusters of purpose
// workload that the ProviderConfig's spec.workloadClusters selects as
// SFClusters: per Cluster an AccessRequest in the catalog namespace (the
// provider operator grants it and writes the kubeconfig Secret
// "<name>.kubeconfig" next to it) and, once it is granted, an SFCluster of
// the Cluster's name that names that Secret. Both carry the labels
// LabelWorkloadClusterNamespace and LabelWorkloadClusterName.
//
// When the Cluster goes, is being deleted, or stops matching, the SFCluster
// is deleted, which offboards it (the StatusReconciler's finalizer waits
// for its instances and removes its components); the AccessRequest is
// deleted only once the SFCluster is gone, so that the instances keep
// their access until then.
type WorkloadClusterReconciler struct {
	providerName string
	platform     cluster.Cluster
	name         string
	options      controller.Options
	recorder     events.EventRecorder
}

var _ reconcile.Reconciler = &WorkloadClusterReconciler{}

// NewWorkloadClusterReconciler returns the reconciler of the inter-operator
// named providerName, whose ProviderConfig, Clusters, AccessRequests and
// SFClusters are on platform. name names the controller (empty:
// DefaultWorkloadControllerName).
func NewWorkloadClusterReconciler(providerName string, platform cluster.Cluster, name string, opts controller.Options) *WorkloadClusterReconciler {
	if name == "" {
		name = DefaultWorkloadControllerName
	}
	return &WorkloadClusterReconciler{providerName: providerName, platform: platform, name: name, options: opts}
}

// SetupWithManager registers the controller with mgr, to which the
// platform cluster must have been added. It watches Clusters,
// AccessRequests and SFClusters on the platform cluster.
func (r *WorkloadClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil || r.platform == nil {
		return errors.New("setup workload cluster controller: manager and platform cluster are required")
	}
	r.recorder = r.platform.GetEventRecorder(r.name)
	byLabels := func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[LabelWorkloadClusterNamespace] == "" || l[LabelWorkloadClusterName] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[LabelWorkloadClusterNamespace], Name: l[LabelWorkloadClusterName]}}}
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		WithOptions(r.options).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &clustersv1alpha1.Cluster{},
			&handler.TypedEnqueueRequestForObject[*clustersv1alpha1.Cluster]{})).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &clustersv1alpha1.AccessRequest{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, ar *clustersv1alpha1.AccessRequest) []reconcile.Request {
				return byLabels(ctx, ar)
			}))).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &resourcev1alpha1.SFCluster{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, c *resourcev1alpha1.SFCluster) []reconcile.Request {
				return byLabels(ctx, c)
			}))).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &interoperatorv1alpha1.ProviderConfig{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, c *interoperatorv1alpha1.ProviderConfig) []reconcile.Request {
				if c.Name != r.providerName || c.Spec.WorkloadClusters == nil {
					return nil
				}
				return r.clustersOf(ctx, c.Spec.WorkloadClusters.Namespace)
			}))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup workload cluster controller: %w", err)
	}
	return nil
}

// clustersOf returns requests for every Cluster of namespace.
func (r *WorkloadClusterReconciler) clustersOf(ctx context.Context, namespace string) []reconcile.Request {
	list := &clustersv1alpha1.ClusterList{}
	if err := r.platform.GetClient().List(ctx, list, client.InNamespace(namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "Cannot list the Clusters to register", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile registers or offboards the SFCluster of one Cluster.
func (r *WorkloadClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.platform.GetClient()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	wc := cfg.Spec.WorkloadClusters
	if wc == nil || req.Namespace != wc.Namespace {
		// Not (or no longer) configured: SFClusters registered earlier
		// stay as they are, to be managed by hand.
		return ctrl.Result{}, nil
	}
	catalogNS := cfg.CatalogNamespace()
	wanted, err := r.wanted(ctx, wc, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	key := client.ObjectKey{Namespace: catalogNS, Name: req.Name}
	if !wanted {
		return ctrl.Result{}, r.unregister(ctx, req.NamespacedName, key)
	}
	ar, err := r.ensureAccessRequest(ctx, wc, req.NamespacedName, key)
	if err != nil || ar == nil || ar.Status.SecretRef == nil || !ar.Status.IsGranted() {
		// The AccessRequest watch brings the grant.
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.ensureSFCluster(ctx, req.NamespacedName, key, ar.Status.SecretRef.Name)
}

// wanted reports whether the Cluster exists, is not being deleted, serves
// the purpose workload and matches the label selector.
func (r *WorkloadClusterReconciler) wanted(ctx context.Context, wc *interoperatorv1alpha1.WorkloadClusters, key types.NamespacedName) (bool, error) {
	cl := &clustersv1alpha1.Cluster{}
	if err := r.platform.GetClient().Get(ctx, key, cl); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	if cl.DeletionTimestamp != nil || !slices.Contains(cl.Spec.Purposes, clustersv1alpha1.PurposeWorkload) {
		return false, nil
	}
	if wc.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(wc.LabelSelector)
		if err != nil {
			logf.FromContext(ctx).Error(err, "Invalid spec.workloadClusters.labelSelector; registering no Cluster")
			return false, nil
		}
		if !sel.Matches(labels.Set(cl.Labels)) {
			return false, nil
		}
	}
	return true, nil
}

// owned reports whether obj was registered for the Cluster key.
func owned(obj client.Object, key types.NamespacedName) bool {
	l := obj.GetLabels()
	return l[LabelWorkloadClusterNamespace] == key.Namespace && l[LabelWorkloadClusterName] == key.Name
}

func ownerLabels(key types.NamespacedName) map[string]string {
	return map[string]string{LabelWorkloadClusterNamespace: key.Namespace, LabelWorkloadClusterName: key.Name}
}

// ensureAccessRequest creates the AccessRequest for the Cluster, or brings
// its permissions up to date, and returns it; nil when an AccessRequest of
// that name exists that is not the Cluster's.
func (r *WorkloadClusterReconciler) ensureAccessRequest(ctx context.Context, wc *interoperatorv1alpha1.WorkloadClusters, cluster, key types.NamespacedName) (*clustersv1alpha1.AccessRequest, error) {
	c := r.platform.GetClient()
	rules := wc.Permissions
	if len(rules) == 0 {
		// The API server requires permissions; an object stored before
		// that rule gets no access rather than a guessed one.
		return nil, errors.New("spec.workloadClusters.permissions of the ProviderConfig is empty: the inter-operator requests no access to workload clusters without it")
	}
	token := &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: rules}}}
	ar := &clustersv1alpha1.AccessRequest{}
	err := c.Get(ctx, key, ar)
	switch {
	case apierrors.IsNotFound(err):
		ar = &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: ownerLabels(cluster)},
			Spec: clustersv1alpha1.AccessRequestSpec{
				ClusterRef: &common.ObjectReference{Namespace: cluster.Namespace, Name: cluster.Name},
				Token:      token,
			},
		}
		if err := c.Create(ctx, ar); err != nil {
			return nil, fmt.Errorf("create AccessRequest %s: %w", key, err)
		}
		r.recorder.Eventf(ar, nil, corev1.EventTypeNormal, "AccessRequested", "Register", "access to the workload Cluster %s requested", cluster)
		return ar, nil
	case err != nil:
		return nil, fmt.Errorf("get AccessRequest %s: %w", key, err)
	case !owned(ar, cluster):
		logf.FromContext(ctx).Info("An AccessRequest of the Cluster's name exists that is not the inter-operator's; the Cluster is not registered", "accessRequest", key)
		return nil, nil
	case !equality.Semantic.DeepEqual(ar.Spec.Token, token):
		before := ar.DeepCopy()
		ar.Spec.Token = token
		if err := c.Patch(ctx, ar, client.MergeFrom(before)); err != nil {
			return nil, fmt.Errorf("update the permissions of AccessRequest %s: %w", key, err)
		}
	}
	return ar, nil
}

// ensureSFCluster creates the SFCluster for the Cluster, or points it at
// the AccessRequest's Secret.
func (r *WorkloadClusterReconciler) ensureSFCluster(ctx context.Context, cluster, key types.NamespacedName, secret string) error {
	c := r.platform.GetClient()
	sfc := &resourcev1alpha1.SFCluster{}
	err := c.Get(ctx, key, sfc)
	switch {
	case apierrors.IsNotFound(err):
		sfc = &resourcev1alpha1.SFCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: ownerLabels(cluster)},
			Spec:       resourcev1alpha1.SFClusterSpec{SecretRef: secret},
		}
		if err := c.Create(ctx, sfc); err != nil {
			return fmt.Errorf("create SFCluster %s: %w", key, err)
		}
		r.recorder.Eventf(sfc, nil, corev1.EventTypeNormal, "Registered", "Register", "registered for the workload Cluster %s", cluster)
		logf.FromContext(ctx).Info("SFCluster registered for an openMCP workload Cluster", "sfcluster", key, "cluster", cluster)
		return nil
	case err != nil:
		return fmt.Errorf("get SFCluster %s: %w", key, err)
	case !owned(sfc, cluster):
		logf.FromContext(ctx).Info("An SFCluster of the Cluster's name exists that is not the inter-operator's; it is left alone", "sfcluster", key)
		return nil
	case sfc.DeletionTimestamp == nil && sfc.Spec.SecretRef != secret:
		before := sfc.DeepCopy()
		sfc.Spec.SecretRef = secret
		if err := c.Patch(ctx, sfc, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("update the secretRef of SFCluster %s: %w", key, err)
		}
	}
	return nil
}

// unregister deletes the SFCluster of a Cluster that went, and, once the
// SFCluster is gone (its offboarding may wait for instances), the
// AccessRequest.
func (r *WorkloadClusterReconciler) unregister(ctx context.Context, cluster, key types.NamespacedName) error {
	c := r.platform.GetClient()
	sfc := &resourcev1alpha1.SFCluster{}
	err := c.Get(ctx, key, sfc)
	switch {
	case err == nil && owned(sfc, cluster):
		if sfc.DeletionTimestamp == nil {
			if err := c.Delete(ctx, sfc); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete SFCluster %s: %w", key, err)
			}
			r.recorder.Eventf(sfc, nil, corev1.EventTypeNormal, "Offboarding", "Unregister", "the workload Cluster %s is gone or no longer selected", cluster)
		}
		// The SFCluster watch comes back when it is gone.
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get SFCluster %s: %w", key, err)
	}
	ar := &clustersv1alpha1.AccessRequest{}
	if err := c.Get(ctx, key, ar); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get AccessRequest %s: %w", key, err)
	}
	if !owned(ar, cluster) || ar.DeletionTimestamp != nil {
		return nil
	}
	if err := c.Delete(ctx, ar); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete AccessRequest %s: %w", key, err)
	}
	logf.FromContext(ctx).Info("Access to an offboarded workload Cluster released", "accessRequest", key)
	return nil
}
