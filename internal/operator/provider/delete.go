package provider

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// removalStep is one step of the clean-up: what it removes, in words, and
// the objects.
type removalStep struct {
	what    string
	objects func(context.Context) ([]client.Object, error)
	// onboarding, when set, says that the objects live on the onboarding
	// cluster, not the platform cluster; a nil client from it (the
	// cluster is not known) skips the step.
	onboarding OnboardingClient
}

// removalSteps lists, in the order of docs/operator.md, everything the
// reconciler created for a provider (the Deployer removes its own part
// before). Each step waits for its objects to be gone before the next
// starts, so that, for example, RBAC outlives no workload and the
// namespace goes last.
func (r *Reconciler[T]) removalSteps(w *deploy.Workload, n names) []removalStep {
	fixed := func(objs ...client.Object) func(context.Context) ([]client.Object, error) {
		return func(context.Context) ([]client.Object, error) { return objs, nil }
	}
	ns := w.Namespace
	var steps []removalStep
	if r.opts.tenantRoles != nil && r.kind.Resources != nil {
		// First, so that tenants lose the kinds before the provider that
		// serves them goes.
		steps = append(steps, removalStep{what: "tenant roles on the onboarding cluster", objects: fixed(tenantRoleObjects(n)...), onboarding: r.opts.tenantRoles})
	}
	return append(steps, []removalStep{
		{what: "image pull secret copies", objects: func(ctx context.Context) ([]client.Object, error) { return r.pullSecretCopies(ctx, w) }},
		{what: "role bindings", objects: fixed(
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n.Init}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n.Run}})},
		{what: "roles", objects: fixed(
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n.Init}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n.Run}})},
		{what: "cluster role bindings", objects: fixed(
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.InitClusterRole}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.RunClusterRole}})},
		{what: "cluster roles", objects: fixed(
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.InitClusterRole}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.RunClusterRole}})},
		{what: "service accounts", objects: fixed(
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.InitServiceAccount}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.RunServiceAccount}})},
		{what: "namespace", objects: fixed(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})},
	}...)
}

// reconcileDelete removes everything created for obj, step by step, and
// drops the finalizer once all of it is gone. removed reports that the
// finalizer was dropped, after which the object may no longer exist.
func (r *Reconciler[T]) reconcileDelete(ctx context.Context, obj T, n names) (res ctrl.Result, removed bool, err error) {
	log := logf.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(obj, providerv1alpha1.Finalizer) {
		return ctrl.Result{}, true, nil
	}
	st := r.kind.Status(obj)
	gen := obj.GetGeneration()
	st.ObservedGeneration = gen
	setPhase(st, true)
	setConditionf(st, gen, providerv1alpha1.ConditionReady, metav1.ConditionFalse, providerv1alpha1.ReasonUninstalling, "the provider is being uninstalled")

	w := r.baseWorkload(obj, n)
	done, err := r.deployer.Remove(ctx, w)
	if err != nil {
		setConditionf(st, gen, providerv1alpha1.ConditionUninstalled, metav1.ConditionFalse, providerv1alpha1.ReasonUninstallFailed, "removing the provider's workloads failed: %v", err)
		return ctrl.Result{}, false, fmt.Errorf("remove workloads of %s %s: %w", r.kind.Name, obj.GetName(), err)
	}
	if !done {
		setConditionf(st, gen, providerv1alpha1.ConditionUninstalled, metav1.ConditionFalse, providerv1alpha1.ReasonUninstalling, "waiting for the provider's workloads to be removed")
		return ctrl.Result{RequeueAfter: r.opts.waitInterval}, false, nil
	}
	for _, step := range r.removalSteps(w, n) {
		c, reader := r.client, r.opts.reader
		if step.onboarding != nil {
			oc, err := step.onboarding(ctx)
			if err != nil {
				setConditionf(st, gen, providerv1alpha1.ConditionUninstalled, metav1.ConditionFalse, providerv1alpha1.ReasonUninstallFailed, "removing the %s failed: %v", step.what, err)
				return ctrl.Result{}, false, fmt.Errorf("remove %s of %s %s: onboarding cluster: %w", step.what, r.kind.Name, obj.GetName(), err)
			}
			if oc == nil {
				log.V(1).Info("Onboarding cluster not known; nothing to remove there", "what", step.what)
				continue
			}
			c, reader = oc, oc
		}
		objs, err := step.objects(ctx)
		if err != nil {
			setConditionf(st, gen, providerv1alpha1.ConditionUninstalled, metav1.ConditionFalse, providerv1alpha1.ReasonUninstallFailed, "removing the %s failed: %v", step.what, err)
			return ctrl.Result{}, false, err
		}
		left, err := deleteAllIn(ctx, c, reader, objs)
		if err != nil {
			setConditionf(st, gen, providerv1alpha1.ConditionUninstalled, metav1.ConditionFalse, providerv1alpha1.ReasonUninstallFailed, "removing the %s failed: %v", step.what, err)
			return ctrl.Result{}, false, fmt.Errorf("remove %s of %s %s: %w", step.what, r.kind.Name, obj.GetName(), err)
		}
		if len(left) > 0 {
			log.V(1).Info("Waiting for removal", "what", step.what, "left", left)
			setConditionf(st, gen, providerv1alpha1.ConditionUninstalled, metav1.ConditionFalse, providerv1alpha1.ReasonUninstalling, "waiting for the %s to be removed: %s", step.what, strings.Join(left, ", "))
			return ctrl.Result{RequeueAfter: r.opts.waitInterval}, false, nil
		}
	}

	base := obj.DeepCopyObject().(T)
	controllerutil.RemoveFinalizer(obj, providerv1alpha1.Finalizer)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, true, nil
		}
		return ctrl.Result{}, false, fmt.Errorf("remove finalizer from %s %s: %w", r.kind.Name, obj.GetName(), err)
	}
	log.V(1).Info("Uninstalled provider; finalizer removed")
	return ctrl.Result{}, true, nil
}

// deleteAllIn deletes, with c, the objects that still exist and returns the
// names of those still there afterwards, as reader sees them (for example
// a namespace whose content is being removed). Objects someone else
// created under the same name are left alone.
func deleteAllIn(ctx context.Context, c client.Client, reader client.Reader, objs []client.Object) (left []string, err error) {
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		if err := reader.Get(ctx, key, o); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get %s: %w", key, err)
		}
		if o.GetLabels()[providerv1alpha1.ManagedByLabel] != ManagedByValue {
			continue
		}
		if o.GetDeletionTimestamp() == nil {
			err := c.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(o.GetUID())})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("delete %s: %w", key, err)
			}
			if err := reader.Get(ctx, key, o); apierrors.IsNotFound(err) {
				continue
			}
		}
		left = append(left, key.String())
	}
	return left, nil
}
