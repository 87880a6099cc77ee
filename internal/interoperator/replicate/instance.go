package replicate

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Instance implements provisioner.Replicator: it copies the service and
// plan, the namespace and the instance to the sister; once the sister's
// inter-operator has looked at the current spec of the replica, it copies
// the replica's status into inst.
func (r *Replicator) Instance(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext, svc *osbv1alpha1.SFService, plan *osbv1alpha1.SFPlan, starting bool) (ctrl.Result, error) {
	name := cc.WorkloadCluster.Name()
	fail := func(err error) (ctrl.Result, error) {
		return ctrl.Result{}, unreachable(inst, name, false, err, &inst.Status.Description)
	}
	c, err := r.sister(ctx, cfg.CatalogNamespace(), cc)
	if err != nil {
		return fail(err)
	}
	if err := r.copyCatalog(ctx, c, cfg.CatalogNamespace(), svc, plan); err != nil {
		return fail(err)
	}
	if !starting && inst.Status.State.IsTerminal() {
		return ctrl.Result{}, nil
	}
	if err := ensureNamespace(ctx, c, inst.Namespace); err != nil {
		return fail(err)
	}
	replica := &osbv1alpha1.SFServiceInstance{}
	err = c.Get(ctx, client.ObjectKeyFromObject(inst), replica)
	if apierrors.IsNotFound(err) {
		// Also while in progress: a sister that lost its replica gets it
		// again, the original's spec is what counts.
		replica = instanceReplica(inst, nil)
		if err := c.Create(ctx, replica); err != nil && !apierrors.IsAlreadyExists(err) {
			return fail(fmt.Errorf("create the replica: %w", err))
		}
		logf.FromContext(ctx).V(1).Info("Replicated the instance", "sfcluster", name)
		return r.replicating(inst, name), nil
	}
	if err != nil {
		return fail(fmt.Errorf("get the replica: %w", err))
	}
	if replica.DeletionTimestamp != nil {
		// An earlier instance of the same name is still being deleted.
		inst.Status.State = osbv1alpha1.StateInProgress
		inst.Status.Description = fmt.Sprintf("Waiting for an earlier replica on SFCluster %s to be deleted", name)
		spruntime.StatusProgressing(inst, ReasonReplicating, inst.Status.Description)
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	if want := instanceReplica(inst, replica); !apiequality.Semantic.DeepEqual(want.Spec, replica.Spec) || !maps.Equal(want.Labels, replica.Labels) {
		if err := c.Update(ctx, want); err != nil {
			return fail(fmt.Errorf("update the replica: %w", err))
		}
		return r.replicating(inst, name), nil
	}
	if starting {
		if processed(replica.Status.ObservedGeneration, replica.Generation, replica.Status.State) && replica.Status.State.IsTerminal() {
			// A new operation on an unchanged spec (the broker's
			// update, or a retry after a failure): the state starts it
			// on the sister.
			replica.Status.State = startState(inst.Status.State)
			if err := c.Status().Update(ctx, replica); err != nil {
				return fail(fmt.Errorf("restart the operation of the replica: %w", err))
			}
		}
		return r.replicating(inst, name), nil
	}
	if !processed(replica.Status.ObservedGeneration, replica.Generation, replica.Status.State) {
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	copyInstanceStatus(inst, replica)
	return r.settle(inst, &replica.Status.Conditions, inst.Status.State, cmp.Or(inst.Status.Error, inst.Status.Description)), nil
}

// DeleteInstance implements provisioner.Replicator: it deletes the
// replica, waits until the sister's inter-operator has deprovisioned it and
// it is gone, and deletes the namespace it created once no replica is left
// in it.
func (r *Replicator) DeleteInstance(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	name := cc.WorkloadCluster.Name()
	fail := func(err error) (ctrl.Result, error) {
		return ctrl.Result{}, unreachable(inst, name, true, err, &inst.Status.Description)
	}
	c, err := r.sister(ctx, cfg.CatalogNamespace(), cc)
	if err != nil {
		return fail(err)
	}
	replica := &osbv1alpha1.SFServiceInstance{}
	gone, err := deleteReplica(ctx, c, client.ObjectKeyFromObject(inst), replica)
	if err != nil {
		return fail(err)
	}
	if !gone {
		inst.Status.State = osbv1alpha1.StateInProgress
		inst.Status.Description = fmt.Sprintf("Waiting for SFCluster %s to deprovision the replica", name)
		if replica.Status.Description != "" {
			inst.Status.Description += ": " + replica.Status.Description
		}
		spruntime.StatusTerminatingWithReason(inst, ReasonDeletingReplica, inst.Status.Description)
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	if err := cleanupNamespace(ctx, c, inst.Namespace); err != nil {
		return fail(err)
	}
	inst.Status.Resources = nil
	inst.Status.State = osbv1alpha1.StateSucceeded
	inst.Status.Description = "The instance is deprovisioned"
	inst.Status.Error = ""
	logf.FromContext(ctx).V(1).Info("Deprovisioned the replica", "sfcluster", name)
	return ctrl.Result{}, nil
}

// replicating marks an original whose operation the sister's
// inter-operator is to do now.
func (r *Replicator) replicating(obj spruntime.API, cluster string) ctrl.Result {
	msg := fmt.Sprintf("Replicated to SFCluster %s; waiting for its inter-operator", cluster)
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		o.Status.State = osbv1alpha1.StateInProgress
		o.Status.Error = ""
		o.Status.Description = msg
	case *osbv1alpha1.SFServiceBinding:
		o.Status.State = osbv1alpha1.StateInProgress
		o.Status.Error = ""
	}
	spruntime.StatusProgressing(obj, ReasonReplicating, msg)
	return ctrl.Result{RequeueAfter: r.poll}
}

// settle sets the conditions of an original whose replica's status was
// copied: Ready for succeeded, Failed with the replica's reason for
// failed, in progress otherwise.
func (r *Replicator) settle(obj spruntime.API, replicaConditions *[]metav1.Condition, state osbv1alpha1.State, message string) ctrl.Result {
	switch state {
	case osbv1alpha1.StateSucceeded:
		spruntime.StatusReady(obj)
		return ctrl.Result{}
	case osbv1alpha1.StateFailed:
		reason := string(provisioner.ReasonOperationFailed)
		if c := apimeta.FindStatusCondition(*replicaConditions, spruntime.ConditionReady); c != nil && c.Status == metav1.ConditionFalse && c.Reason != "" {
			reason = c.Reason
		}
		spruntime.StatusFailed(obj, reason, cmp.Or(message, "the operation failed on the sister cluster"))
		return ctrl.Result{}
	}
	spruntime.StatusProgressing(obj, string(provisioner.ReasonInProgress), cmp.Or(message, "The sister cluster's inter-operator is working on it"))
	return ctrl.Result{RequeueAfter: r.poll}
}

// instanceReplica returns the replica of inst: existing (or a new object)
// with the original's labels, the replica label and the original's spec on
// the sister's own cluster.
func instanceReplica(inst, existing *osbv1alpha1.SFServiceInstance) *osbv1alpha1.SFServiceInstance {
	replica := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: inst.Name}}
	if existing != nil {
		replica = existing.DeepCopy()
	}
	replica.Labels = replicaLabels(inst.Labels)
	inst.Spec.DeepCopyInto(&replica.Spec)
	replica.Spec.ClusterID = SisterClusterID
	return replica
}

// copyInstanceStatus copies what the broker and the bindings read from the
// replica into the original.
func copyInstanceStatus(inst, replica *osbv1alpha1.SFServiceInstance) {
	inst.Status.State = replica.Status.State
	inst.Status.Error = replica.Status.Error
	inst.Status.Description = replica.Status.Description
	inst.Status.DashboardURL = replica.Status.DashboardURL
	inst.Status.InstanceUsable = replica.Status.InstanceUsable
	inst.Status.UpdateRepeatable = replica.Status.UpdateRepeatable
	inst.Status.Resources = replica.Status.Resources
	inst.Status.AppliedSpec = nil
	if replica.Status.AppliedSpec != nil {
		inst.Status.AppliedSpec = replica.Status.AppliedSpec.DeepCopy()
		inst.Status.AppliedSpec.ClusterID = inst.Spec.ClusterID
	}
}

// replicaLabels returns the original's labels and the replica label.
func replicaLabels(original map[string]string) map[string]string {
	out := maps.Clone(original)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelReplica] = "true"
	return out
}

// processed reports whether the sister's inter-operator has looked at the
// current spec of a replica and started or finished its operation.
func processed(observed, generation int64, state osbv1alpha1.State) bool {
	if observed != generation {
		return false
	}
	switch state {
	case "", osbv1alpha1.StateInQueue, osbv1alpha1.StateUpdate, osbv1alpha1.StateDelete:
		return false
	}
	return true
}

// startState is the state that starts the original's operation on the
// replica: update for an update, in_queue otherwise.
func startState(s osbv1alpha1.State) osbv1alpha1.State {
	if s == osbv1alpha1.StateUpdate {
		return s
	}
	return osbv1alpha1.StateInQueue
}

// ensureNamespace creates the namespace name on the sister, labelled as the
// replicator's, unless it exists.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case err == nil:
		if ns.DeletionTimestamp != nil {
			return fmt.Errorf("the namespace %s is being deleted on the sister cluster; waiting", name)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelReplica: "true"}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// cleanupNamespace deletes the namespace name on the sister when the
// replicator created it and no replica is left in it.
func cleanupNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.Labels[LabelReplica] != "true" || ns.DeletionTimestamp != nil {
		return nil
	}
	for _, list := range []client.ObjectList{&osbv1alpha1.SFServiceInstanceList{}, &osbv1alpha1.SFServiceBindingList{}} {
		if err := c.List(ctx, list, client.InNamespace(name), client.Limit(1)); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("list the replicas in namespace %s: %w", name, err)
		}
		if apimeta.LenList(list) > 0 {
			return nil
		}
	}
	if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	logf.FromContext(ctx).V(1).Info("Deleted the replicas' namespace on the sister cluster", "namespace", name)
	return nil
}

// copyCatalog copies the service and plan of an instance into the
// namespace catalog on the sister (created when missing), where the
// sister's inter-operator finds them.
func (r *Replicator) copyCatalog(ctx context.Context, c client.Client, catalog string, svc *osbv1alpha1.SFService, plan *osbv1alpha1.SFPlan) error {
	if err := c.Get(ctx, client.ObjectKey{Name: catalog}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: catalog}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the catalog namespace %s: %w", catalog, err)
		}
	} else if err != nil {
		return fmt.Errorf("get the catalog namespace %s: %w", catalog, err)
	}
	gotSvc := &osbv1alpha1.SFService{}
	if err := copySpec(ctx, c, gotSvc, catalog, svc.Name, svc.Labels, func() bool {
		same := apiequality.Semantic.DeepEqual(gotSvc.Spec, svc.Spec)
		svc.Spec.DeepCopyInto(&gotSvc.Spec)
		return same
	}); err != nil {
		return fmt.Errorf("copy SFService %s: %w", svc.Name, err)
	}
	gotPlan := &osbv1alpha1.SFPlan{}
	want := sisterPlanSpec(plan)
	if err := copySpec(ctx, c, gotPlan, catalog, plan.Name, plan.Labels, func() bool {
		same := apiequality.Semantic.DeepEqual(gotPlan.Spec, *want)
		want.DeepCopyInto(&gotPlan.Spec)
		return same
	}); err != nil {
		return fmt.Errorf("copy SFPlan %s: %w", plan.Name, err)
	}
	return nil
}

// sisterPlanSpec returns the spec of plan as the sister gets it: without
// its clusterSelector template. The master's scheduler applied the
// selector to its own SFClusters, among them the sister; on the sister a
// replica is pinned to the sister's own SFCluster "1", whose labels are
// not the master's, and the sister's inter-operator checks a pin against
// the plan's clusterSelector. Service Fabrik's sisters never select
// either: they skip instances with a clusterId.
func sisterPlanSpec(plan *osbv1alpha1.SFPlan) *osbv1alpha1.SFPlanSpec {
	spec := plan.Spec.DeepCopy()
	spec.Templates = slices.DeleteFunc(spec.Templates, func(t osbv1alpha1.TemplateSpec) bool {
		return t.Action == osbv1alpha1.ActionClusterSelector
	})
	return spec
}

// copySpec creates or updates obj, namespace/name on the sister, with
// labels and the spec that setSpec copies into it (it reports whether the
// spec was the same already).
func copySpec(ctx context.Context, c client.Client, obj client.Object, namespace, name string, labels map[string]string, setSpec func() bool) error {
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		obj.SetNamespace(namespace)
		obj.SetName(name)
		obj.SetLabels(maps.Clone(labels))
		obj.SetResourceVersion("")
		setSpec()
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	sameLabels := maps.Equal(obj.GetLabels(), labels)
	if setSpec() && sameLabels {
		return nil
	}
	obj.SetLabels(maps.Clone(labels))
	return c.Update(ctx, obj)
}
