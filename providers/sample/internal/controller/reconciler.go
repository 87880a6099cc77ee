package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/marketplane/marketplane/pkg/spruntime"

	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

// waitInterval is how soon the reconciler looks again while it waits for
// something in a cluster it does not watch: the CRD to be served or to be
// gone, the server Deployment to be Available.
const waitInterval = time.Second

// Reconciler is the domain logic of the sample provider, driven by the
// runtime's spruntime.APIReconciler: Observe, CreateOrUpdate,
// UserResources and Delete for each Sample.
type Reconciler struct {
	providerName string
	// pullSecrets copies the ProviderConfig's spec.imagePullSecrets next
	// to the servers.
	pullSecrets spruntime.PullSecrets
}

var (
	_ spruntime.Reconciler[*apiv1alpha1.Sample, *apiv1alpha1.ProviderConfig]          = &Reconciler{}
	_ spruntime.Observer[*apiv1alpha1.Sample, *apiv1alpha1.ProviderConfig]            = &Reconciler{}
	_ spruntime.UserResourceChecker[*apiv1alpha1.Sample, *apiv1alpha1.ProviderConfig] = &Reconciler{}

	// The runtime calls ProviderConfig.Validate only if the type has it,
	// so a wrong signature would go unnoticed without this check. (The
	// type parameters above already check spruntime.API and Config.)
	_ spruntime.ConfigValidator = &apiv1alpha1.ProviderConfig{}
)

// NewReconciler returns the domain logic of the provider named
// providerName (its --provider-name). platform reads Secrets in the
// provider's namespace on the platform cluster (POD_NAMESPACE), where the
// ProviderConfig's image pull secrets are: an uncached reader, such as
// the platform cluster's GetAPIReader.
func NewReconciler(providerName string, platform client.Reader, namespace string) *Reconciler {
	return &Reconciler{
		providerName: providerName,
		pullSecrets:  spruntime.PullSecrets{Source: platform, SourceNamespace: namespace, Provider: providerName},
	}
}

// pullSecretTarget is where obj's copies of the image pull secrets are in
// the workload cluster c: in ServerNamespace, next to its server, named
// after it and labelled with obj's UID, so that each Sample's copies come
// and go with it and an orphaned Sample's are never adopted.
func (r *Reconciler) pullSecretTarget(obj *apiv1alpha1.Sample, c client.Client) spruntime.PullSecretTarget {
	return spruntime.PullSecretTarget{
		Client:    c,
		Namespace: ServerNamespace,
		Owner:     string(obj.UID),
		Prefix:    ServerName(r.providerName, obj) + "-",
	}
}

// Observe implements spruntime.Observer: it reports whether the domain
// service exists in the tenant's clusters as obj and cfg ask for it, and
// marks obj Ready when it does. The runtime skips CreateOrUpdate when it
// does, and reports a difference that no change of obj or cfg explains as
// drift.
func (r *Reconciler) Observe(ctx context.Context, obj *apiv1alpha1.Sample, cfg *apiv1alpha1.ProviderConfig, clusters spruntime.ClusterContext) (spruntime.Observation, error) {
	v, err := version(obj, cfg)
	if err != nil {
		return spruntime.Observation{}, err
	}
	want := desiredCRD(r.providerName, v)
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := clusters.MCPCluster.Client().Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		if apierrors.IsNotFound(err) {
			return spruntime.Observation{Drift: fmt.Sprintf("CRD %s is missing in the MCP cluster", want.Name)}, nil
		}
		return spruntime.Observation{}, fmt.Errorf("get CRD %s in the MCP cluster: %w", want.Name, err)
	}
	if !got.DeletionTimestamp.IsZero() {
		return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("CRD %s in the MCP cluster is being deleted", want.Name)}, nil
	}
	if diff := crdDiff(want, got); diff != "" {
		return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("CRD %s in the MCP cluster: %s", want.Name, diff)}, nil
	}
	if !established(got) {
		return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("CRD %s in the MCP cluster is not established", want.Name)}, nil
	}
	ns := &corev1.Namespace{}
	nsName := WorkloadNamespace(r.providerName, obj)
	if err := clusters.WorkloadCluster.Client().Get(ctx, client.ObjectKey{Name: nsName}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("namespace %s is missing in the workload cluster", nsName)}, nil
		}
		return spruntime.Observation{}, fmt.Errorf("get namespace %s in the workload cluster: %w", nsName, err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("namespace %s in the workload cluster is being deleted", ns.Name)}, nil
	}
	if !ownedBy(ns, r.providerName, obj) {
		return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("namespace %s in the workload cluster belongs to another object", ns.Name)}, nil
	}
	if drift, err := r.observeServer(ctx, obj, cfg, clusters.WorkloadCluster.Client()); err != nil || drift != "" {
		return spruntime.Observation{Exists: true, Drift: drift}, err
	}
	// Up to date: the runtime skips CreateOrUpdate and keeps Ready as it
	// was last set, which may be CreateOrUpdate's "waiting for the CRD".
	// What Observe found is the truth now, so it says so.
	spruntime.StatusReady(obj)
	return spruntime.Observation{Exists: true, UpToDate: true}, nil
}

// CreateOrUpdate implements spruntime.Reconciler: it installs (or repairs)
// the DomainServiceAPI in the tenant's MCP cluster, the object's namespace in
// the workload cluster and, when cfg sets spec.workload, the object's
// server Deployment there. obj is Ready once the CRD is served and the
// server, if any, is Available.
func (r *Reconciler) CreateOrUpdate(ctx context.Context, obj *apiv1alpha1.Sample, cfg *apiv1alpha1.ProviderConfig, clusters spruntime.ClusterContext) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	v, err := version(obj, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := desiredCRD(r.providerName, v)
	spruntime.StatusProgressing(obj, ReasonInstalling, "Installing the CRD "+want.Name+" in the MCP cluster")

	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: want.Name}}
	op, err := controllerutil.CreateOrUpdate(ctx, clusters.MCPCluster.Client(), crd, func() error {
		if !crd.DeletionTimestamp.IsZero() {
			// Someone deleted it; it can be created again once it is gone.
			return fmt.Errorf("CRD %s is being deleted; waiting until it is gone", crd.Name)
		}
		if crd.ResourceVersion != "" && !managedBy(crd, r.providerName) {
			// Another provider's, or the tenant's own: taking it over
			// would change, and Delete would delete, what is not ours.
			return crdConflict(crd.Name)
		}
		applyCRD(crd, want)
		return nil
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("apply CRD %s in the MCP cluster: %w", want.Name, err)
	}
	log.V(1).Info("Applied the DomainServiceAPI", "crd", want.Name, "version", v, "operation", op)

	if err := r.ensureNamespace(ctx, obj, clusters.WorkloadCluster.Client()); err != nil {
		return ctrl.Result{}, err
	}

	server, err := r.applyServer(ctx, obj, cfg, clusters.WorkloadCluster.Client())
	if err != nil {
		return ctrl.Result{}, err
	}

	if !established(crd) {
		spruntime.StatusProgressing(obj, ReasonWaitingForCRD, "Waiting for the MCP cluster to serve the CRD "+want.Name)
		return ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	if server != nil {
		if ok, msg := serverAvailable(server); !ok {
			spruntime.StatusProgressing(obj, ReasonWorkloadNotReady, msg)
			return ctrl.Result{RequeueAfter: waitInterval}, nil
		}
	}
	spruntime.StatusReady(obj)
	return ctrl.Result{}, nil
}

// UserResources implements spruntime.UserResourceChecker: the tenant's
// SampleObject objects in the MCP cluster. While there are any, the runtime
// does not call Delete, since deleting the CRD would delete them too.
func (r *Reconciler) UserResources(ctx context.Context, _ *apiv1alpha1.Sample, _ *apiv1alpha1.ProviderConfig, clusters spruntime.ClusterContext) ([]string, error) {
	c := clusters.MCPCluster.Client()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: DomainCRDName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get CRD %s in the MCP cluster: %w", DomainCRDName, err)
	}
	if !crd.DeletionTimestamp.IsZero() || !managedBy(crd, r.providerName) {
		// Delete has begun, and the API server removes the remaining
		// objects with the CRD; or the CRD is not this provider's, and
		// Delete leaves it and its objects alone.
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(DomainGroupVersion.WithKind(DomainKind + "List"))
	if err := c.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) && !established(crd) {
			// The CRD was never served: nobody can have objects of it.
			return nil, nil
		}
		// Never guess "none" while the CRD exists: deleting it would
		// delete the tenant's objects.
		return nil, fmt.Errorf("list %s in the MCP cluster: %w", DomainPlural, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, item := range list.Items {
		names = append(names, fmt.Sprintf("%s %s/%s", DomainKind, item.GetNamespace(), item.GetName()))
	}
	return names, nil
}

// Delete implements spruntime.Reconciler: it removes the DomainServiceAPI
// from the MCP cluster, and the object's server Deployment and namespace from the
// workload cluster, and reports done (a zero Result) once the CRD is gone.
// It deletes only what this provider manages and, in the workload cluster,
// what carries the object's UID: anything else of the same name is
// left alone and counts as gone.
func (r *Reconciler) Delete(ctx context.Context, obj *apiv1alpha1.Sample, _ *apiv1alpha1.ProviderConfig, clusters spruntime.ClusterContext) (ctrl.Result, error) {
	spruntime.StatusTerminating(obj)
	log := logf.FromContext(ctx)
	c := clusters.MCPCluster.Client()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKey{Name: DomainCRDName}, crd)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("get CRD %s in the MCP cluster: %w", DomainCRDName, err)
	}
	mine := err == nil && managedBy(crd, r.providerName)
	if err == nil && !mine {
		log.V(1).Info("Leaving a CRD this provider does not manage alone", "crd", DomainCRDName)
	}
	if mine && crd.DeletionTimestamp.IsZero() {
		// The precondition keeps a CRD that replaced the one read from
		// being deleted in its place.
		uid := crd.UID
		if err := c.Delete(ctx, crd, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("delete CRD %s in the MCP cluster: %w", DomainCRDName, err)
		}
	}
	// Whether or not the ProviderConfig still sets spec.workload: a server
	// started before it was unset goes too. Its pods go with it (the
	// cluster's garbage collector), so that is not waited for.
	wl := clusters.WorkloadCluster.Client()
	if err := r.deleteOwned(ctx, wl, obj, &appsv1.Deployment{}, client.ObjectKey{Namespace: ServerNamespace, Name: ServerName(r.providerName, obj)}); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.pullSecrets.Remove(ctx, r.pullSecretTarget(obj, wl)); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove the server's image pull secrets from the workload cluster: %w", err)
	}
	// The namespace's contents go with it; the cluster finishes that
	// without the provider, so its deletion is not waited for.
	if err := r.deleteOwned(ctx, wl, obj, &corev1.Namespace{}, client.ObjectKey{Name: WorkloadNamespace(r.providerName, obj)}); err != nil {
		return ctrl.Result{}, err
	}
	if !mine {
		return ctrl.Result{}, nil
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); !apierrors.IsNotFound(err) {
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("get CRD %s in the MCP cluster: %w", DomainCRDName, err)
		}
		log.V(1).Info("Waiting for the CRD to be gone", "crd", DomainCRDName)
		return ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	return ctrl.Result{}, nil
}

// observeServer says how obj's server Deployment in the workload cluster c
// differs from what cfg asks for: missing, changed, not (or no longer)
// Available, or there although cfg.Spec.Workload is unset. "" means it is as
// wanted.
func (r *Reconciler) observeServer(ctx context.Context, obj *apiv1alpha1.Sample, cfg *apiv1alpha1.ProviderConfig, c client.Client) (string, error) {
	target := r.pullSecretTarget(obj, c)
	var pullSecrets []corev1.LocalObjectReference
	if cfg.Spec.Workload != nil {
		pullSecrets = cfg.Spec.ImagePullSecrets
	}
	if diff, err := r.pullSecrets.Diff(ctx, target, pullSecrets); err != nil || diff != "" {
		return diff, err
	}
	got := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: ServerNamespace, Name: ServerName(r.providerName, obj)}
	if err := c.Get(ctx, key, got); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get Deployment %s in the workload cluster: %w", key, err)
		}
		if cfg.Spec.Workload == nil {
			return "", nil
		}
		return fmt.Sprintf("Deployment %s is missing in the workload cluster", key), nil
	}
	switch {
	case cfg.Spec.Workload == nil:
		return fmt.Sprintf("Deployment %s in the workload cluster is there, but the ProviderConfig sets no spec.workload", key), nil
	case !got.DeletionTimestamp.IsZero():
		return fmt.Sprintf("Deployment %s in the workload cluster is being deleted", key), nil
	}
	if diff := serverDiff(desiredServer(r.providerName, obj, cfg.Spec.Workload, pullSecretRefs(target, cfg.Spec.ImagePullSecrets)), got); diff != "" {
		return fmt.Sprintf("Deployment %s in the workload cluster: %s", key, diff), nil
	}
	if ok, msg := serverAvailable(got); !ok {
		return msg, nil
	}
	return "", nil
}

// applyServer creates or updates obj's server Deployment in the workload
// cluster c as cfg.Spec.Workload asks, and returns it; without
// spec.workload it deletes one left from before and returns nil.
func (r *Reconciler) applyServer(ctx context.Context, obj *apiv1alpha1.Sample, cfg *apiv1alpha1.ProviderConfig, c client.Client) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ServerNamespace, Name: ServerName(r.providerName, obj)}}
	target := r.pullSecretTarget(obj, c)
	if cfg.Spec.Workload == nil {
		if err := r.deleteOwned(ctx, c, obj, d, client.ObjectKeyFromObject(d)); err != nil {
			return nil, err
		}
		return nil, r.pullSecrets.Remove(ctx, target)
	}
	// The copies first: the server's pods pull with them as they start.
	refs, err := r.pullSecrets.Sync(ctx, target, cfg.Spec.ImagePullSecrets)
	if err != nil {
		return nil, fmt.Errorf("image pull secrets of the server: %w", err)
	}
	want := desiredServer(r.providerName, obj, cfg.Spec.Workload, refs)
	op, err := controllerutil.CreateOrUpdate(ctx, c, d, func() error {
		if !d.DeletionTimestamp.IsZero() {
			return fmt.Errorf("the Deployment %s/%s is being deleted; waiting until it is gone", d.Namespace, d.Name)
		}
		if d.ResourceVersion != "" && !ownedBy(d, r.providerName, obj) {
			return workloadConflict(fmt.Sprintf("Deployment %s/%s", d.Namespace, d.Name))
		}
		applyServer(d, want)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply Deployment %s/%s in the workload cluster: %w", d.Namespace, d.Name, err)
	}
	logf.FromContext(ctx).V(1).Info("Applied the server", "deployment", d.Namespace+"/"+d.Name, "image", cfg.Spec.Workload.Image, "operation", op)
	return d, nil
}

// ensureNamespace creates obj's namespace in the workload cluster c,
// labelled as obj's. An existing namespace must be obj's: one that is not
// (an orphaned object's of the same name, another provider's) is never
// taken over, and the provider may not relabel namespaces on the shared
// cluster anyway (WorkloadPermissions).
func (r *Reconciler) ensureNamespace(ctx context.Context, obj *apiv1alpha1.Sample, c client.Client) error {
	name := WorkloadNamespace(r.providerName, obj)
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      ownerLabels(r.providerName, obj),
			Annotations: map[string]string{OwnerAnnotation: obj.Namespace + "/" + obj.Name},
		}}
		// One created since the read makes this fail; the retry reads it.
		if err := c.Create(ctx, ns); err != nil {
			return fmt.Errorf("create namespace %s in the workload cluster: %w", name, err)
		}
		logf.FromContext(ctx).V(1).Info("Created the workload namespace", "namespace", name)
		return nil
	case err != nil:
		return fmt.Errorf("get namespace %s in the workload cluster: %w", name, err)
	case !ns.DeletionTimestamp.IsZero():
		return fmt.Errorf("namespace %s is being deleted; waiting until it is gone", name)
	case !ownedBy(ns, r.providerName, obj):
		return workloadConflict("namespace " + name)
	}
	return nil
}

// deleteOwned deletes the object at key in the workload cluster c, read
// into o, when it is obj's, and leaves anything else alone.
func (r *Reconciler) deleteOwned(ctx context.Context, c client.Client, obj *apiv1alpha1.Sample, o client.Object, key client.ObjectKey) error {
	kind := fmt.Sprintf("%T", o)
	if err := c.Get(ctx, key, o); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get %s %s in the workload cluster: %w", kind, key, err)
	}
	if !ownedBy(o, r.providerName, obj) {
		logf.FromContext(ctx).V(1).Info("Leaving an object of another owner alone", "kind", kind, "name", key)
		return nil
	}
	if !o.GetDeletionTimestamp().IsZero() {
		return nil
	}
	// The precondition keeps an object that replaced the one read from
	// being deleted in its place.
	uid := o.GetUID()
	if err := c.Delete(ctx, o, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s %s in the workload cluster: %w", kind, key, err)
	}
	return nil
}
