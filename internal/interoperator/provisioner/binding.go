package provisioner

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/sourcewatch"
	"github.com/marketplane/marketplane/internal/render"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// BindingReconciler binds and unbinds SFServiceBindings. The provider
// runtime calls it; see the package documentation for what it does.
type BindingReconciler struct {
	engine      *Engine
	client      client.Client
	waitForInst time.Duration
}

var _ spruntime.Reconciler[*osbv1alpha1.SFServiceBinding, *interoperatorv1alpha1.ProviderConfig] = &BindingReconciler{}

// NewBindingReconciler returns the binding reconciler. onboarding is the
// client of the onboarding cluster, where the instances are read and the
// bind response Secrets written.
func NewBindingReconciler(engine *Engine, onboarding client.Client) *BindingReconciler {
	return &BindingReconciler{engine: engine, client: onboarding, waitForInst: 5 * time.Second}
}

// BindingSecretName is the name of the Secret that holds a binding's bind
// response.
func BindingSecretName(b *osbv1alpha1.SFServiceBinding) string {
	return BindingSecretPrefix + b.Name
}

// bindFieldOwner is the server-side apply field manager of a binding's
// resources: one per binding, so that a bind template may add fields to an
// object that the instance or another binding owns, and its unbind
// template may take them away again.
func bindFieldOwner(b *osbv1alpha1.SFServiceBinding) string {
	sum := sha256.Sum256([]byte(b.Namespace + "/" + b.Name))
	return apply.DefaultFieldOwner + "-bind-" + hex.EncodeToString(sum[:8])
}

// CreateOrUpdate implements spruntime.Reconciler: it binds when the broker
// asked for a binding (or the spec changed), looks at the status of a bind
// in progress, and leaves a finished one alone.
func (r *BindingReconciler) CreateOrUpdate(ctx context.Context, b *osbv1alpha1.SFServiceBinding, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	state := b.Status.State
	starting := opStarting(state) || b.Status.ObservedGeneration != b.Generation
	if !starting && state != osbv1alpha1.StateInProgress {
		return ctrl.Result{}, stillFailed(b, state)
	}
	inst, err := instanceOf(ctx, r.client, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if inst == nil {
		return ctrl.Result{}, spruntime.InvalidUserInput(string(ReasonInstanceNotFound), "the SFServiceInstance %s does not exist in namespace %s", b.Spec.InstanceID, b.Namespace)
	}
	switch inst.Status.State {
	case osbv1alpha1.StateSucceeded:
	case osbv1alpha1.StateFailed:
		b.Status.State = osbv1alpha1.StateFailed
		b.Status.Error = fmt.Sprintf("the instance %s failed and cannot be bound", inst.Name)
		return ctrl.Result{}, spruntime.InvalidUserInput(string(ReasonInstanceFailed), "%s", b.Status.Error)
	default:
		if inst.Status.AppliedSpec == nil {
			spruntime.StatusProgressing(b, string(ReasonInstanceNotReady), fmt.Sprintf("Waiting for the instance %s to be provisioned", inst.Name))
			return ctrl.Result{RequeueAfter: r.waitForInst}, nil
		}
		// An instance being updated can be bound with what it has.
	}
	// A binding of an instance on a cluster in provisioning mode
	// replicate is rendered by that cluster's own inter-operator.
	if replicated, err := r.engine.replicated(ctx, cfg, cc); err != nil || replicated {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.engine.replicator.Binding(ctx, b, inst, cfg, cc, starting)
	}
	svc, plan, err := r.engine.catalogEntries(ctx, cfg, inst.Spec.ServiceID, inst.Spec.PlanID)
	if err != nil {
		if uerr, ok := spruntime.AsInvalidUserInput(err); ok && uerr.Reason == string(ReasonPlanInvalid) {
			failBinding(b, uerr.Message)
		}
		return ctrl.Result{}, err
	}
	t, err := r.engine.target(ctx, cfg, cc)
	if err != nil {
		return ctrl.Result{}, clusterError(err, false)
	}
	vals, err := values(svc, plan, inst, b, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	if starting {
		return r.bind(ctx, b, inst, cfg, t, plan, vals)
	}
	return r.report(ctx, b, inst, cfg, t, plan, vals)
}

// bind renders and applies the bind template and reports the status.
func (r *BindingReconciler) bind(ctx context.Context, b *osbv1alpha1.SFServiceBinding, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, plan *osbv1alpha1.SFPlan, vals map[string]any) (ctrl.Result, error) {
	b.Status.State = osbv1alpha1.StateInQueue
	b.Status.Error = ""
	fail := func(_ Reason, message string) { failBinding(b, message) }
	if o := checkParameters("binding", b.Spec.Parameters); !o.ok() {
		return ctrl.Result{}, r.engine.settle(b, cfg, o, fail)
	}
	if tmpl, ok := plan.Template(osbv1alpha1.ActionBind); ok {
		objs, o := r.engine.renderObjects(ctx, cfg, plan, tmpl, vals, t, bindingPlacement(b, inst))
		if !o.ok() {
			return ctrl.Result{}, r.engine.settle(b, cfg, o, fail)
		}
		refs, applied, o := r.engine.applyObjects(ctx, cfg, t, objs, inst.Namespace, bindFieldOwner(b))
		if !o.ok() {
			b.Status.Resources = union(b.Status.Resources, applied)
			return ctrl.Result{}, r.engine.settle(b, cfg, o, fail)
		}
		b.Status.Resources = union(b.Status.Resources, refs)
		logf.FromContext(ctx).V(1).Info("Applied the bind template", "resources", len(refs), "cluster", t.Name())
	}
	b.Status.AppliedSpec = b.Spec.DeepCopy()
	return r.report(ctx, b, inst, cfg, t, plan, vals)
}

// report evaluates the sources and status templates of a bind, and writes
// the bind response Secret once it has succeeded.
func (r *BindingReconciler) report(ctx context.Context, b *osbv1alpha1.SFServiceBinding, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, plan *osbv1alpha1.SFPlan, vals map[string]any) (ctrl.Result, error) {
	st, o := r.engine.evaluate(ctx, cfg, plan, vals, t, bindingPlacement(b, inst), render.OperationBind,
		sourcewatch.Owner{UID: b.UID, Key: client.ObjectKeyFromObject(b), Binding: true})
	if !o.ok() {
		return ctrl.Result{}, r.engine.settle(b, cfg, o, func(_ Reason, message string) { failBinding(b, message) })
	}
	b.Status.Error = st.Error
	switch st.State {
	case osbv1alpha1.StateSucceeded:
		response := st.Response
		if len(response) == 0 {
			response = []byte("{}")
		}
		if err := r.writeResponse(ctx, b, response); err != nil {
			return ctrl.Result{}, err
		}
		b.Status.State = osbv1alpha1.StateSucceeded
		b.Status.Response = &osbv1alpha1.BindingResponse{SecretRef: BindingSecretName(b)}
		r.engine.tracker.done(b.UID)
		spruntime.StatusReady(b)
		logf.FromContext(ctx).V(1).Info("Bound", "secret", BindingSecretName(b))
		return ctrl.Result{}, nil
	case osbv1alpha1.StateFailed:
		b.Status.State = osbv1alpha1.StateFailed
		r.engine.tracker.done(b.UID)
		spruntime.StatusFailed(b, string(ReasonOperationFailed), cmp.Or(st.Error, "the status template reports that the bind failed"))
		return ctrl.Result{}, nil
	}
	b.Status.State = osbv1alpha1.StateInProgress
	spruntime.StatusProgressing(b, string(ReasonInProgress), "Waiting for the status template to report the bind response")
	return ctrl.Result{RequeueAfter: r.engine.progressWait(b.UID)}, nil
}

// writeResponse writes the bind response into the binding's Secret, owned
// by the binding, with server-side apply.
func (r *BindingReconciler) writeResponse(ctx context.Context, b *osbv1alpha1.SFServiceBinding, response []byte) error {
	gvk := osbv1alpha1.GroupVersion.WithKind("SFServiceBinding")
	secret := corev1ac.Secret(BindingSecretName(b), b.Namespace).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{osbv1alpha1.BindingSecretResponseKey: response}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(gvk.GroupVersion().String()).
			WithKind(gvk.Kind).
			WithName(b.Name).
			WithUID(b.UID).
			WithController(true).
			WithBlockOwnerDeletion(true))
	if err := r.client.Apply(ctx, secret, client.FieldOwner(apply.DefaultFieldOwner), client.ForceOwnership); err != nil {
		// The error names the Secret, never its data.
		return fmt.Errorf("write the bind response Secret %s/%s: %w", b.Namespace, BindingSecretName(b), err)
	}
	return nil
}

// Delete implements spruntime.Reconciler: it applies the unbind template
// when the plan has one, deletes the bind resources (with an unbind
// template, those the instance does not have too), then deletes the bind
// response Secret.
func (r *BindingReconciler) Delete(ctx context.Context, b *osbv1alpha1.SFServiceBinding, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	if replicated, err := r.engine.replicated(ctx, cfg, cc); err != nil || replicated {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.engine.replicator.DeleteBinding(ctx, b, cfg, cc)
	}
	t, err := r.engine.target(ctx, cfg, cc)
	if err != nil {
		return ctrl.Result{}, err
	}
	b.Status.Error = ""
	unbound, inst, err := r.unbindTemplate(ctx, b, cfg, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	resources := b.Status.Resources
	if unbound {
		// The unbind template takes back what the bind template added to
		// the instance's objects. What only the binding rendered (its
		// service accounts, tokens, role bindings) goes as without one:
		// a binding's credentials must not outlive it, whatever the
		// unbind template does (issue #10).
		resources = minus(resources, inst.Status.Resources)
	}
	if len(resources) > 0 {
		owner := bindingOwner(b, inst)
		remaining, err := t.Applier.Delete(ctx, resources, &owner)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("unbind: %w", err)
		}
		if len(remaining) > 0 {
			b.Status.State = osbv1alpha1.StateInProgress
			spruntime.StatusTerminatingWithReason(b, string(ReasonDeleting), "Waiting for the binding's resources to be deleted")
			return ctrl.Result{RequeueAfter: r.engine.tracker.poll(b.UID, r.engine.minWait, r.engine.maxWait)}, nil
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: BindingSecretName(b)}}
	if err := r.client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("delete the bind response Secret %s/%s: %w", b.Namespace, secret.Name, err)
	}
	b.Status.Resources = nil
	b.Status.Response = nil
	b.Status.State = osbv1alpha1.StateSucceeded
	r.engine.tracker.done(b.UID)
	logf.FromContext(ctx).V(1).Info("Unbound")
	return ctrl.Result{}, nil
}

// unbindTemplate applies the plan's unbind template, when it has one, and
// reports whether it did, with the instance. Errors of the template itself
// are not retried: the binding is released and the error recorded, so that
// a broken plan cannot keep bindings from going away; the bind resources
// the instance also has stay.
func (r *BindingReconciler) unbindTemplate(ctx context.Context, b *osbv1alpha1.SFServiceBinding, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target) (bool, *osbv1alpha1.SFServiceInstance, error) {
	inst, err := instanceOf(ctx, r.client, b)
	if err != nil || inst == nil {
		return false, nil, err
	}
	svc, plan, err := r.engine.catalogEntries(ctx, cfg, inst.Spec.ServiceID, inst.Spec.PlanID)
	if err != nil {
		if _, ok := spruntime.AsInvalidUserInput(err); ok {
			// Without its plan a binding is unbound by deleting its
			// resources.
			return false, nil, nil
		}
		return false, nil, err
	}
	tmpl, ok := plan.Template(osbv1alpha1.ActionUnbind)
	if !ok {
		return false, nil, nil
	}
	vals, err := values(svc, plan, inst, b, t)
	if err != nil {
		return false, nil, err
	}
	objs, o := r.engine.renderObjects(ctx, cfg, plan, tmpl, vals, t, bindingPlacement(b, inst))
	if o.ok() {
		_, _, o = r.engine.applyObjects(ctx, cfg, t, objs, inst.Namespace, bindFieldOwner(b))
	}
	switch {
	case o.err != nil:
		return false, nil, o.err
	case o.permanent != nil:
		logf.FromContext(ctx).Info("The unbind template failed; releasing the binding anyway", "reason", o.permanent.reason)
		b.Status.Error = o.permanent.message
	}
	return true, inst, nil
}

// bindingPlacement is where the operations of b, a binding of inst, read
// their sources: in inst's namespace, next to the objects inst and b
// applied.
func bindingPlacement(b *osbv1alpha1.SFServiceBinding, inst *osbv1alpha1.SFServiceInstance) placement {
	return placement{namespace: inst.Namespace, applied: union(inst.Status.Resources, b.Status.Resources)}
}

// failBinding ends the operation of b in failed with message.
func failBinding(b *osbv1alpha1.SFServiceBinding, message string) {
	b.Status.State = osbv1alpha1.StateFailed
	b.Status.Error = message
}
