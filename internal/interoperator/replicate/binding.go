package replicate

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Binding implements provisioner.Replicator: it copies the binding to the
// sister; once the sister's inter-operator has bound it, it copies the
// bind response Secret into the binding's namespace on the onboarding
// cluster, where the broker reads it, and the status into b.
func (r *Replicator) Binding(ctx context.Context, b *osbv1alpha1.SFServiceBinding, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext, starting bool) (ctrl.Result, error) {
	name := cc.WorkloadCluster.Name()
	fail := func(err error) (ctrl.Result, error) { return ctrl.Result{}, bindingFailed(b, name, err) }
	m, err := masterOf(cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	c, err := r.sister(ctx, cfg.CatalogNamespace(), m, cc)
	if err != nil {
		return fail(err)
	}
	if err := m.ensureNamespace(ctx, c, name, b.Namespace); err != nil {
		return fail(err)
	}
	replica := &osbv1alpha1.SFServiceBinding{}
	err = c.Get(ctx, client.ObjectKeyFromObject(b), replica)
	if apierrors.IsNotFound(err) {
		replica = m.bindingReplica(b, nil)
		if err := c.Create(ctx, replica); err != nil && !apierrors.IsAlreadyExists(err) {
			return fail(fmt.Errorf("create the replica: %w", err))
		}
		logf.FromContext(ctx).V(1).Info("Replicated the binding", "sfcluster", name, "instance", inst.Name)
		return r.replicating(b, name), nil
	}
	if err != nil {
		return fail(fmt.Errorf("get the replica: %w", err))
	}
	if replica.DeletionTimestamp != nil {
		b.Status.State = osbv1alpha1.StateInProgress
		spruntime.StatusProgressing(b, ReasonReplicating, fmt.Sprintf("Waiting for an earlier replica on SFCluster %s to be deleted", name))
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	if replicaOf(replica.Labels, b.UID) == foreign {
		return fail(conflict("SFServiceBinding %s/%s exists on SFCluster %s and is not this binding's replica (it belongs to another master, an earlier binding or the cluster itself); "+
			"a replica is never taken over: delete this binding and use another name", b.Namespace, b.Name, name))
	}
	if want := m.bindingReplica(b, replica); !apiequality.Semantic.DeepEqual(want.Spec, replica.Spec) || !maps.Equal(want.Labels, replica.Labels) {
		if err := c.Update(ctx, want); err != nil {
			return fail(fmt.Errorf("update the replica: %w", err))
		}
		return r.replicating(b, name), nil
	}
	if starting {
		if err := restartBindingReplica(ctx, c, replica); err != nil {
			return fail(err)
		}
		return r.replicating(b, name), nil
	}
	if !processed(replica.Status.ObservedGeneration, replica.Generation, replica.Status.State) {
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	if err := r.copyBindingResult(ctx, c, b, replica); err != nil {
		return fail(err)
	}
	return r.settle(b, &replica.Status.Conditions, b.Status.State, b.Status.Error), nil
}

// bindingFailed records err on b, replicated to the SFCluster name, and
// returns it: a conflict fails the operation; anything else says the
// sister could not be reached.
func bindingFailed(b *osbv1alpha1.SFServiceBinding, name string, err error) error {
	if uerr, ok := spruntime.AsInvalidUserInput(err); ok {
		b.Status.State = osbv1alpha1.StateFailed
		b.Status.Error = uerr.Message
		return err
	}
	return unreachable(b, name, false, err, nil)
}

// restartBindingReplica starts a new operation on an unchanged spec (a
// retry after a failure) on the sister: the state starts it once the
// replica's last one has ended.
func restartBindingReplica(ctx context.Context, c client.Client, replica *osbv1alpha1.SFServiceBinding) error {
	if !processed(replica.Status.ObservedGeneration, replica.Generation, replica.Status.State) || !replica.Status.State.IsTerminal() {
		return nil
	}
	replica.Status.State = osbv1alpha1.StateInQueue
	if err := c.Status().Update(ctx, replica); err != nil {
		return fmt.Errorf("restart the operation of the replica: %w", err)
	}
	return nil
}

// copyBindingResult copies the processed replica's status into b and,
// once it is bound, its bind response Secret to the onboarding cluster.
func (r *Replicator) copyBindingResult(ctx context.Context, c client.Client, b, replica *osbv1alpha1.SFServiceBinding) error {
	if replica.Status.State == osbv1alpha1.StateSucceeded {
		if err := r.copySecret(ctx, c, b, replica); err != nil {
			return err
		}
		b.Status.Response = &osbv1alpha1.BindingResponse{SecretRef: provisioner.BindingSecretName(b)}
	}
	b.Status.State = replica.Status.State
	b.Status.Error = replica.Status.Error
	b.Status.Resources = replica.Status.Resources
	b.Status.AppliedSpec = nil
	if replica.Status.AppliedSpec != nil {
		b.Status.AppliedSpec = replica.Status.AppliedSpec.DeepCopy()
	}
	return nil
}

// DeleteBinding implements provisioner.Replicator: it deletes the replica,
// waits until the sister's inter-operator has unbound it and it is gone,
// then deletes the bind response Secret on the onboarding cluster and the
// sister's namespace once no replica is left in it.
func (r *Replicator) DeleteBinding(ctx context.Context, b *osbv1alpha1.SFServiceBinding, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	name := cc.WorkloadCluster.Name()
	fail := func(err error) (ctrl.Result, error) {
		return ctrl.Result{}, unreachable(b, name, true, err, nil)
	}
	m, err := masterOf(cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	c, err := r.sister(ctx, cfg.CatalogNamespace(), m, cc)
	if err != nil {
		return fail(err)
	}
	replica := &osbv1alpha1.SFServiceBinding{}
	gone, err := m.deleteReplica(ctx, c, client.ObjectKeyFromObject(b), b.UID, replica)
	if err != nil {
		return fail(err)
	}
	if !gone {
		b.Status.State = osbv1alpha1.StateInProgress
		spruntime.StatusTerminatingWithReason(b, ReasonDeletingReplica, fmt.Sprintf("Waiting for SFCluster %s to unbind the replica", name))
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: provisioner.BindingSecretName(b)}}
	if err := r.onboarding.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("delete the bind response Secret %s/%s: %w", b.Namespace, secret.Name, err)
	}
	if err := m.cleanupNamespace(ctx, c, b.Namespace); err != nil {
		return fail(err)
	}
	b.Status.Resources = nil
	b.Status.Response = nil
	b.Status.State = osbv1alpha1.StateSucceeded
	logf.FromContext(ctx).V(1).Info("Unbound the replica", "sfcluster", name)
	return ctrl.Result{}, nil
}

// copySecret copies the replica's bind response Secret from the sister
// into the binding's Secret on the onboarding cluster, owned by the
// binding, as the central provisioner writes it. A Secret that another
// object controls is not the replica's response and is not copied.
func (r *Replicator) copySecret(ctx context.Context, c client.Client, b, replica *osbv1alpha1.SFServiceBinding) error {
	name := provisioner.BindingSecretName(replica)
	if replica.Status.Response != nil && replica.Status.Response.SecretRef != "" {
		name = replica.Status.Response.SecretRef
	}
	from := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: replica.Namespace, Name: name}, from); err != nil {
		return fmt.Errorf("get the bind response Secret %s/%s on the sister cluster: %w", replica.Namespace, name, err)
	}
	if controlledByOther(from, replica.UID) {
		return conflict("the bind response Secret %s/%s on the sister cluster belongs to another object than the binding's replica; it is not copied", replica.Namespace, name)
	}
	gvk := osbv1alpha1.GroupVersion.WithKind("SFServiceBinding")
	to := corev1ac.Secret(provisioner.BindingSecretName(b), b.Namespace).
		WithType(corev1.SecretTypeOpaque).
		WithData(from.Data).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(gvk.GroupVersion().String()).
			WithKind(gvk.Kind).
			WithName(b.Name).
			WithUID(b.UID).
			WithController(true).
			WithBlockOwnerDeletion(true))
	if err := r.onboarding.Apply(ctx, to, client.FieldOwner(apply.DefaultFieldOwner), client.ForceOwnership); err != nil {
		// The error names the Secret, never its data.
		return fmt.Errorf("write the bind response Secret %s/%s: %w", b.Namespace, provisioner.BindingSecretName(b), err)
	}
	return nil
}

// bindingReplica returns the replica of b: existing (or a new object) with
// the original's labels, the labels that say whose replica it is, and the
// original's spec.
func (m master) bindingReplica(b, existing *osbv1alpha1.SFServiceBinding) *osbv1alpha1.SFServiceBinding {
	replica := &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name}}
	if existing != nil {
		replica = existing.DeepCopy()
	}
	replica.Labels = m.replicaLabels(b.Labels, b.UID)
	b.Spec.DeepCopyInto(&replica.Spec)
	return replica
}
