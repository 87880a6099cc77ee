package sisters

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// conflictError is an object on the sister that is not this master's.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// install brings the sister's provisioner up to date and reports its
// availability.
func (r *Reconciler) install(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, sfc *resourcev1alpha1.SFCluster) (ctrl.Result, error) {
	s, err := r.spec(ctx, cfg, sfc)
	if err != nil {
		return r.fail(ctx, sfc, "read the master's configuration of the sister", err)
	}
	target, err := r.registry.Target(ctx, sfc.Namespace, sfc.Name)
	if err != nil {
		return r.fail(ctx, sfc, "reach the sister", err)
	}
	c := target.Client()
	// The ProviderConfig names the provisioner: another master's means the
	// sister runs that master's; nothing here is touched.
	if err := s.check(ctx, c, &interoperatorv1alpha1.ProviderConfig{}, client.ObjectKey{Name: ProviderName}); err != nil {
		return r.fail(ctx, sfc, "install the provisioner", err)
	}
	if err := r.installCRDs(ctx, c); err != nil {
		return r.fail(ctx, sfc, "install the CRDs", err)
	}
	if err := s.ensureNamespaces(ctx, c); err != nil {
		return r.fail(ctx, sfc, "create the namespaces", err)
	}
	for _, obj := range s.objects() {
		if err := s.apply(ctx, c, obj); err != nil {
			return r.fail(ctx, sfc, "install the provisioner", err)
		}
	}
	if err := s.prunePullSecrets(ctx, c); err != nil {
		return r.fail(ctx, sfc, "remove old pull Secrets", err)
	}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: Name}, dep); err != nil {
		return r.fail(ctx, sfc, "read the provisioner's Deployment", err)
	}
	current := dep.Status.ObservedGeneration >= dep.Generation
	if current && dep.Status.AvailableReplicas > 0 {
		msg := fmt.Sprintf("the provisioner %s/%s runs %s with %d of %d replicas available", s.namespace, Name, s.cfg.Spec.SisterProvisioner.Image, dep.Status.AvailableReplicas, s.replicas())
		return ctrl.Result{RequeueAfter: r.ready}, r.setCondition(ctx, sfc, metav1.ConditionTrue, ReasonAvailable, msg)
	}
	msg := fmt.Sprintf("the provisioner %s/%s is installed (image %s); waiting for an available replica", s.namespace, Name, s.cfg.Spec.SisterProvisioner.Image)
	if !current {
		msg = fmt.Sprintf("the provisioner %s/%s is installed (image %s); waiting for the Deployment to roll out", s.namespace, Name, s.cfg.Spec.SisterProvisioner.Image)
	}
	return ctrl.Result{RequeueAfter: r.pending}, r.setCondition(ctx, sfc, metav1.ConditionFalse, ReasonInstalling, msg)
}

// spec reads what the sister gets from the master: the kubeconfig of the
// SFCluster and the pull Secrets, both in the catalog namespace.
func (r *Reconciler) spec(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, sfc *resourcev1alpha1.SFCluster) (spec, error) {
	reader := r.platform.GetAPIReader()
	s := spec{
		master: string(cfg.UID), environment: r.environment, catalog: sfc.Namespace,
		namespace: cfg.Spec.SisterProvisioner.SisterNamespace(), cfg: cfg,
		clusterRules: r.clusterRules, catalogRules: r.catalogRules,
	}
	if s.namespace == s.catalog {
		return s, &conflictError{msg: fmt.Sprintf("spec.sisterProvisioner.namespace %s is the catalog namespace, which the sister shares with other masters; name another", s.namespace)}
	}
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: sfc.Namespace, Name: sfc.Spec.SecretRef}, secret); err != nil {
		return s, fmt.Errorf("get the kubeconfig Secret %s: %w", sfc.Spec.SecretRef, err)
	}
	s.kubeconfig = secret.Data[resourcev1alpha1.KubeconfigSecretKey]
	for _, name := range cfg.Spec.SisterProvisioner.ImagePullSecrets {
		p := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: sfc.Namespace, Name: name}, p); err != nil {
			return s, fmt.Errorf("get the image pull Secret %s: %w", name, err)
		}
		s.pullSecrets = append(s.pullSecrets, p)
	}
	return s, nil
}

// installCRDs installs the CRDs the sister lacks; those it has are left
// alone, as the replicator does: the sister may run a newer version.
func (r *Reconciler) installCRDs(ctx context.Context, c client.Client) error {
	n, err := crdinstall.ApplyMissing(ctx, c, FieldOwner, 0, r.crds...)
	if err != nil {
		return fmt.Errorf("install the CRDs: %w", err)
	}
	if n > 0 {
		logf.FromContext(ctx).Info("Installed the CRDs on a sister cluster", "count", n)
	}
	return nil
}

// ensureNamespaces creates the provisioner's namespace, labelled as this
// master's (an existing one must be), and the catalog namespace, which
// the replicator and other masters share, unlabelled when missing.
func (s spec) ensureNamespaces(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: s.meta("", s.namespace)}
	if err := s.apply(ctx, c, ns); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKey{Name: s.catalog}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.catalog}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the catalog namespace %s: %w", s.catalog, err)
		}
	} else if err != nil {
		return fmt.Errorf("get the catalog namespace %s: %w", s.catalog, err)
	}
	return nil
}

// check fails with a conflictError when an object exists at key that is
// not this master's.
func (s spec) check(ctx context.Context, c client.Client, obj client.Object, key client.ObjectKey) error {
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	if !s.mine(obj) {
		owner := obj.GetLabels()[replicate.LabelMaster]
		if owner == "" {
			owner = "none: it was not installed by an inter-operator"
		}
		return &conflictError{msg: fmt.Sprintf("%s %s exists on the sister and is not this inter-operator's (master %s); it is left alone",
			kindOf(c, obj), key, owner)}
	}
	return nil
}

func (s spec) mine(obj client.Object) bool {
	l := obj.GetLabels()
	return l[LabelProvisioner] == "true" && l[replicate.LabelMaster] == s.master
}

// apply server-side applies obj unless an object of its name exists that
// is not this master's.
func (s spec) apply(ctx context.Context, c client.Client, obj client.Object) error {
	existing, err := c.Scheme().New(gvkOf(c, obj))
	if err != nil {
		return fmt.Errorf("apply %T: %w", obj, err)
	}
	if err := s.check(ctx, c, existing.(client.Object), client.ObjectKeyFromObject(obj)); err != nil {
		return err
	}
	gvk := gvkOf(c, obj)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		// The error names the object, never a Secret's data.
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// prunePullSecrets deletes this master's pull Secrets the configuration
// no longer names.
func (s spec) prunePullSecrets(ctx context.Context, c client.Client) error {
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels(s.labels())); err != nil {
		return fmt.Errorf("list the pull Secrets: %w", err)
	}
	for i := range list.Items {
		sec := &list.Items[i]
		if slices.ContainsFunc(s.pullSecrets, func(p *corev1.Secret) bool { return p.Name == sec.Name }) {
			continue
		}
		if err := c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the pull Secret %s: %w", sec.Name, err)
		}
	}
	return nil
}

// offboard removes the provisioner once no replica of this master is left
// on the sister, then the finalizer.
func (r *Reconciler) offboard(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, sfc *resourcev1alpha1.SFCluster) (ctrl.Result, error) {
	target, err := r.registry.Target(ctx, sfc.Namespace, sfc.Name)
	if err != nil {
		return r.fail(ctx, sfc, "reach the sister to remove its provisioner", err)
	}
	c := target.Client()
	s := spec{master: string(cfg.UID), catalog: sfc.Namespace, namespace: cfg.Spec.SisterProvisioner.SisterNamespace(), cfg: cfg}
	if cfg.Spec.SisterProvisioner == nil {
		// The namespace of what was installed is in its labels.
		s.namespace = r.installedNamespace(ctx, c, s)
	}
	n, err := s.replicasLeft(ctx, c)
	if err != nil {
		return r.fail(ctx, sfc, "count the replicas on the sister", err)
	}
	if n > 0 {
		msg := fmt.Sprintf("the provisioner is removed once the %d replicas of this inter-operator's instances and bindings are gone from the sister", n)
		return ctrl.Result{RequeueAfter: r.pending}, r.setCondition(ctx, sfc, metav1.ConditionFalse, ReasonOffboarding, msg)
	}
	gone, err := s.remove(ctx, c)
	if err != nil {
		return r.fail(ctx, sfc, "remove the provisioner", err)
	}
	if !gone {
		return ctrl.Result{RequeueAfter: r.pending}, r.setCondition(ctx, sfc, metav1.ConditionFalse, ReasonOffboarding, "removing the provisioner from the sister")
	}
	logf.FromContext(ctx).Info("Removed the provisioner from a sister", "sfcluster", sfc.Name)
	if sfc.DeletionTimestamp == nil {
		if err := r.removeCondition(ctx, sfc); err != nil {
			return ctrl.Result{}, err
		}
		if sfc.Spec.ProvisioningMode == resourcev1alpha1.ProvisioningReplicate {
			if err := r.setCondition(ctx, sfc, metav1.ConditionFalse, ReasonNotConfigured,
				"the ProviderConfig sets no spec.sisterProvisioner.image: no provisioner is installed on the sister; install one by hand or set it"); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, r.patchFinalizer(ctx, sfc, controllerutil.RemoveFinalizer)
}

// installedNamespace returns the namespace of this master's provisioner
// Deployment's ServiceAccount binding, or the default.
func (r *Reconciler) installedNamespace(ctx context.Context, c client.Client, s spec) string {
	crb := &rbacv1.ClusterRoleBinding{}
	if err := c.Get(ctx, client.ObjectKey{Name: Name}, crb); err == nil && s.mine(crb) && len(crb.Subjects) == 1 {
		return crb.Subjects[0].Namespace
	}
	return interoperatorv1alpha1.DefaultSisterProvisionerNamespace
}

// replicasLeft counts this master's replicas on the sister.
func (s spec) replicasLeft(ctx context.Context, c client.Client) (int, error) {
	n := 0
	for _, list := range []client.ObjectList{&osbv1alpha1.SFServiceInstanceList{}, &osbv1alpha1.SFServiceBindingList{}} {
		if err := c.List(ctx, list, client.MatchingLabels{replicate.LabelMaster: s.master}); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return 0, fmt.Errorf("list the replicas: %w", err)
		}
		n += apimeta.LenList(list)
	}
	return n, nil
}

// remove deletes what this master installed and reports whether it is
// gone. The SFCluster "1" goes first, while the provisioner runs to
// release it (its inter-operator's finalizer); the provisioner's namespace
// last. Objects of others are left alone.
func (s spec) remove(ctx context.Context, c client.Client) (bool, error) {
	if gone, err := s.releaseClusterOne(ctx, c); err != nil || !gone {
		return false, err
	}
	for _, obj := range s.installed() {
		key := client.ObjectKeyFromObject(obj)
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				continue
			}
			return false, fmt.Errorf("get %s %s on the sister: %w", kindOf(c, obj), key, err)
		}
		if !s.mine(obj) {
			continue
		}
		if err := deleteObject(ctx, c, obj); err != nil {
			return false, err
		}
	}
	// Pull Secrets go with the namespace.
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: s.namespace}, ns); err == nil && s.mine(ns) && ns.DeletionTimestamp == nil {
		if err := deleteObject(ctx, c, ns); err != nil {
			return false, err
		}
	} else if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get namespace %s on the sister: %w", s.namespace, err)
	}
	return true, nil
}

// releaseClusterOne deletes this master's SFCluster "1" on the sister and
// reports whether it is gone (or not this master's). While the
// provisioner runs, its inter-operator releases it; with no provisioner
// left (and so no replica of this master on the sister) this removes the
// finalizer itself.
func (s spec) releaseClusterOne(ctx context.Context, c client.Client) (bool, error) {
	one := &resourcev1alpha1.SFCluster{}
	key := client.ObjectKey{Namespace: s.catalog, Name: resourcev1alpha1.PrimaryClusterID}
	err := c.Get(ctx, key, one)
	switch {
	case err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err):
		return false, fmt.Errorf("get the SFCluster %s on the sister: %w", key, err)
	case err != nil || !s.mine(one):
		return true, nil
	case one.DeletionTimestamp == nil:
		return false, deleteObject(ctx, c, one)
	case s.provisionerAvailable(ctx, c):
		// Its inter-operator removes its finalizer.
		return false, nil
	}
	before := one.DeepCopy()
	if controllerutil.RemoveFinalizer(one, resourcev1alpha1.SFClusterFinalizer) {
		if err := c.Patch(ctx, one, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("release the SFCluster %s on the sister: %w", key, err)
		}
	}
	return false, nil
}

// installed returns empty objects at the keys of what install creates,
// the namespace and pull Secrets aside, Deployment first.
func (s spec) installed() []client.Object {
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: Name}},
		&interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: ProviderName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.catalog, Name: KubeconfigSecretName}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: s.catalog, Name: Name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: s.catalog, Name: Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: Name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: Name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: Name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: Name}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: Name}},
	}
}

// provisionerAvailable reports whether this master's Deployment on the
// sister has an available replica.
func (s spec) provisionerAvailable(ctx context.Context, c client.Client) bool {
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: Name}, dep); err != nil {
		return false
	}
	return s.mine(dep) && dep.DeletionTimestamp == nil && dep.Status.AvailableReplicas > 0
}

// deleteObject deletes obj, by UID, so that an object that replaced it is
// never deleted in its place.
func deleteObject(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s %s on the sister: %w", kindOf(c, obj), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

func gvkOf(c client.Client, obj client.Object) schema.GroupVersionKind {
	gvk, _ := apiutil.GVKForObject(obj, c.Scheme())
	return gvk
}

func kindOf(c client.Client, obj client.Object) string {
	if k := gvkOf(c, obj).Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}
