package replicate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	fail := func(err error) (ctrl.Result, error) { return ctrl.Result{}, instanceFailed(inst, name, starting, err) }
	m, err := masterOf(cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	c, err := r.sister(ctx, cfg.CatalogNamespace(), m, cc)
	if err != nil {
		return fail(err)
	}
	if err := r.copyCatalog(ctx, c, m, name, cfg.CatalogNamespace(), svc, plan); err != nil {
		return fail(err)
	}
	if !starting && inst.Status.State.IsTerminal() {
		return ctrl.Result{}, nil
	}
	if err := m.ensureNamespace(ctx, c, name, inst.Namespace); err != nil {
		return fail(err)
	}
	replica := &osbv1alpha1.SFServiceInstance{}
	err = c.Get(ctx, client.ObjectKeyFromObject(inst), replica)
	if apierrors.IsNotFound(err) {
		// Also while in progress: a sister that lost its replica gets it
		// again, the original's spec is what counts.
		replica = m.instanceReplica(inst, nil)
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
	if replicaOf(replica.Labels, inst.UID) == foreign {
		// Another master's replica, an earlier instance's, or the
		// sister's own instance: never updated, read or deleted. The
		// message names only what the tenant named itself.
		return fail(conflict("SFServiceInstance %s/%s exists on SFCluster %s and is not this instance's replica (it belongs to another master, an earlier instance or the cluster itself); "+
			"a replica is never taken over: delete this instance and use another name", inst.Namespace, inst.Name, name))
	}
	if want := m.instanceReplica(inst, replica); !apiequality.Semantic.DeepEqual(want.Spec, replica.Spec) || !maps.Equal(want.Labels, replica.Labels) {
		if err := c.Update(ctx, want); err != nil {
			return fail(fmt.Errorf("update the replica: %w", err))
		}
		return r.replicating(inst, name), nil
	}
	if starting {
		if err := restartReplica(ctx, c, inst, replica); err != nil {
			return fail(err)
		}
		return r.replicating(inst, name), nil
	}
	if !processed(replica.Status.ObservedGeneration, replica.Generation, replica.Status.State) {
		return ctrl.Result{RequeueAfter: r.poll}, nil
	}
	copyInstanceStatus(inst, replica)
	return r.settle(inst, &replica.Status.Conditions, inst.Status.State, cmp.Or(inst.Status.Error, inst.Status.Description)), nil
}

// instanceFailed records err on inst, replicated to the SFCluster name,
// and returns it: a conflict ends an operation that runs (one that has
// ended keeps its state, and Ready says what is wrong); anything else
// says the sister could not be reached.
func instanceFailed(inst *osbv1alpha1.SFServiceInstance, name string, starting bool, err error) error {
	if uerr, ok := spruntime.AsInvalidUserInput(err); ok {
		if starting || !inst.Status.State.IsTerminal() {
			inst.Status.State = osbv1alpha1.StateFailed
			inst.Status.Error = uerr.Message
			inst.Status.Description = uerr.Message
		}
		return err
	}
	return unreachable(inst, name, false, err, &inst.Status.Description)
}

// restartReplica starts a new operation of inst on an unchanged spec (the
// broker's update, or a retry after a failure) on the sister: the state
// starts it once the replica's last one has ended.
func restartReplica(ctx context.Context, c client.Client, inst, replica *osbv1alpha1.SFServiceInstance) error {
	if !processed(replica.Status.ObservedGeneration, replica.Generation, replica.Status.State) || !replica.Status.State.IsTerminal() {
		return nil
	}
	replica.Status.State = startState(inst.Status.State)
	if err := c.Status().Update(ctx, replica); err != nil {
		return fmt.Errorf("restart the operation of the replica: %w", err)
	}
	return nil
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
	m, err := masterOf(cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	c, err := r.sister(ctx, cfg.CatalogNamespace(), m, cc)
	if err != nil {
		return fail(err)
	}
	replica := &osbv1alpha1.SFServiceInstance{}
	gone, err := m.deleteReplica(ctx, c, client.ObjectKeyFromObject(inst), inst.UID, replica)
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
	if err := m.cleanupNamespace(ctx, c, inst.Namespace); err != nil {
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
// with the original's labels, the labels that say whose replica it is, and
// the original's spec on the sister's own cluster.
func (m master) instanceReplica(inst, existing *osbv1alpha1.SFServiceInstance) *osbv1alpha1.SFServiceInstance {
	replica := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: inst.Name}}
	if existing != nil {
		replica = existing.DeepCopy()
	}
	replica.Labels = m.replicaLabels(inst.Labels, inst.UID)
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

// ensureNamespace creates the namespace name on the sister, labelled as
// this master's, unless it exists. An existing namespace must be this
// master's: one an earlier replicator created is claimed (labelled), any
// other is a conflict. A sister's own tenants, or another master's, may
// have a namespace of the same name, and a replica there would be theirs
// to read and change.
func (m master) ensureNamespace(ctx context.Context, c client.Client, cluster, name string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelReplica: "true", LabelMaster: string(m)}}}
		if err := c.Create(ctx, ns); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Created since the read: look at whose it is next time.
				return fmt.Errorf("namespace %s appeared on the sister cluster while it was created; retrying", name)
			}
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	switch m.namespaceOf(ns.Labels) {
	case foreign:
		return conflict("the namespace %s on SFCluster %s was not created by this inter-operator for its replicas (it belongs to another master or to the cluster itself); "+
			"replicas are never put into it", name, cluster)
	case legacy:
		// Optimistic: a namespace relabelled since the read is looked at
		// again.
		patch := client.MergeFromWithOptions(ns.DeepCopy(), client.MergeFromWithOptimisticLock{})
		ns.Labels[LabelMaster] = string(m)
		if err := c.Patch(ctx, ns, patch); err != nil {
			return fmt.Errorf("label namespace %s as this inter-operator's: %w", name, err)
		}
		logf.FromContext(ctx).Info("Claimed a namespace an earlier version created for replicas", "namespace", name)
	}
	if ns.DeletionTimestamp != nil {
		return fmt.Errorf("the namespace %s is being deleted on the sister cluster; waiting", name)
	}
	return nil
}

// cleanupNamespace deletes the namespace name on the sister when this
// master (or an earlier replicator) created it and no replica is left in
// it.
func (m master) cleanupNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if m.namespaceOf(ns.Labels) == foreign || ns.DeletionTimestamp != nil {
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
	uid := ns.UID
	if err := c.Delete(ctx, ns, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	logf.FromContext(ctx).V(1).Info("Deleted the replicas' namespace on the sister cluster", "namespace", name)
	return nil
}

// copyCatalog copies the service and plan of an instance into the
// namespace catalog on the sister (created when missing), where the
// sister's inter-operator finds them. It never overwrites an entry another
// master copied or the sister's own, nor adds one whose id such an entry
// has (the sister's inter-operator would render this master's instances
// with the oldest entry of an id). The catalog mirror (catalog.go) keeps
// the whole catalog there; this copy makes sure that the replica never
// comes before its plan.
func (r *Replicator) copyCatalog(ctx context.Context, c client.Client, m master, cluster, catalog string, svc *osbv1alpha1.SFService, plan *osbv1alpha1.SFPlan) error {
	if err := ensureCatalogNamespace(ctx, c, catalog); err != nil {
		return err
	}
	if err := m.copySpec(ctx, c, serviceCopy(cluster, catalog, svc)); err != nil {
		return err
	}
	return m.copySpec(ctx, c, planCopy(cluster, catalog, plan))
}

// ensureCatalogNamespace creates the namespace catalog on the sister when
// it is missing.
func ensureCatalogNamespace(ctx context.Context, c client.Client, catalog string) error {
	if err := c.Get(ctx, client.ObjectKey{Name: catalog}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		// Shared by every master of the sister, whose inter-operator
		// reads one catalog namespace: the entries say whose they are.
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: catalog}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the catalog namespace %s: %w", catalog, err)
		}
	} else if err != nil {
		return fmt.Errorf("get the catalog namespace %s: %w", catalog, err)
	}
	return nil
}

// serviceCopy returns the copy of svc into the namespace catalog on the
// sister cluster.
func serviceCopy(cluster, catalog string, svc *osbv1alpha1.SFService) catalogCopy {
	got := &osbv1alpha1.SFService{}
	return catalogCopy{
		obj: got, list: &osbv1alpha1.SFServiceList{}, kind: "SFService", cluster: cluster, namespace: catalog, name: svc.Name, id: svc.Spec.ID,
		labels: svc.Labels, uid: svc.UID,
		idOf: func(o client.Object) string { return o.(*osbv1alpha1.SFService).Spec.ID },
		setSpec: func() bool {
			same := apiequality.Semantic.DeepEqual(got.Spec, svc.Spec)
			svc.Spec.DeepCopyInto(&got.Spec)
			return same
		},
	}
}

// planCopy returns the copy of plan into the namespace catalog on the
// sister cluster.
func planCopy(cluster, catalog string, plan *osbv1alpha1.SFPlan) catalogCopy {
	got := &osbv1alpha1.SFPlan{}
	return catalogCopy{
		obj: got, list: &osbv1alpha1.SFPlanList{}, kind: "SFPlan", cluster: cluster, namespace: catalog, name: plan.Name, id: plan.Spec.ID,
		labels: plan.Labels, uid: plan.UID,
		idOf: func(o client.Object) string { return o.(*osbv1alpha1.SFPlan).Spec.ID },
		setSpec: func() bool {
			want := sisterPlanSpec(plan)
			same := apiequality.Semantic.DeepEqual(got.Spec, *want)
			want.DeepCopyInto(&got.Spec)
			return same
		},
	}
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

// catalogCopy is one catalog entry copySpec copies.
type catalogCopy struct {
	// obj receives the entry on the sister; list lists its kind.
	obj  client.Object
	list client.ObjectList
	// kind, cluster, namespace and name say which entry, for messages.
	kind, cluster, namespace, name string
	// id is the entry's OSB id, idOf reads it from an entry; labels are
	// the master's entry's labels, uid its UID.
	id     string
	idOf   func(client.Object) string
	labels map[string]string
	uid    types.UID
	// setSpec copies the master's spec into obj and reports whether it
	// was the same already.
	setSpec func() bool
}

// copySpec creates or updates an entry on the sister with the master's
// labels and spec. An existing entry another master copied is a conflict;
// one without a master label (the sister's own, or an earlier
// replicator's copy) is claimed only while its spec is the same as the
// master's, when taking it changes nothing the sister renders.
func (m master) copySpec(ctx context.Context, c client.Client, e catalogCopy) error {
	err := c.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: e.name}, e.obj)
	if apierrors.IsNotFound(err) {
		return m.writeCopy(ctx, c, e, false)
	}
	if err != nil {
		return fmt.Errorf("copy %s %s: %w", e.kind, e.name, err)
	}
	return m.writeCopy(ctx, c, e, true)
}

// errCopyBeingDeleted says that the copy of an entry is being deleted on
// the sister; it is copied again once it is gone.
var errCopyBeingDeleted = errors.New("being deleted on the sister cluster; copied again once it is gone")

// writeCopy writes the entry e to the sister: it creates it when found is
// false, else e.obj holds the entry on the sister, which it updates when it
// differs and may be written (copySpec).
func (m master) writeCopy(ctx context.Context, c client.Client, e catalogCopy, found bool) error {
	obj := e.obj
	if !found {
		if err := m.checkID(ctx, c, e); err != nil {
			return err
		}
		obj.SetNamespace(e.namespace)
		obj.SetName(e.name)
		obj.SetLabels(m.catalogLabels(e.labels))
		obj.SetResourceVersion("")
		obj.SetUID("")
		e.setSpec()
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("copy %s %s: %w", e.kind, e.name, err)
		}
		return nil
	}
	if e.uid != "" && obj.GetUID() == e.uid {
		// The sister is the master's own platform cluster: the entry is
		// the master's, not a copy.
		return nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s %s in namespace %s on SFCluster %s is %w", e.kind, e.name, e.namespace, e.cluster, errCopyBeingDeleted)
	}
	whose := m.catalogEntryOf(obj.GetLabels())
	same := e.setSpec()
	switch {
	case whose == foreign:
		return conflict("%s %s in namespace %s on SFCluster %s was copied there by another master; it is never overwritten: give the entry another name", e.kind, e.name, e.namespace, e.cluster)
	case whose == legacy && !same:
		return conflict("%s %s in namespace %s on SFCluster %s was not copied there by this inter-operator and differs from its own; it is never overwritten: "+
			"give the entry another name, or label it %s=<UID of this inter-operator's ProviderConfig> if it is this one's copy", e.kind, e.name, e.namespace, e.cluster, LabelMaster)
	}
	want := m.catalogLabels(e.labels)
	if same && maps.Equal(obj.GetLabels(), want) {
		return nil
	}
	if err := m.checkID(ctx, c, e); err != nil {
		return err
	}
	obj.SetLabels(want)
	if err := c.Update(ctx, obj); err != nil {
		return fmt.Errorf("copy %s %s: %w", e.kind, e.name, err)
	}
	return nil
}

// checkID refuses to write the entry when another entry of its kind on
// the sister, not this master's, has its id.
func (m master) checkID(ctx context.Context, c client.Client, e catalogCopy) error {
	if err := c.List(ctx, e.list, client.InNamespace(e.namespace)); err != nil {
		return fmt.Errorf("list the %ss in namespace %s: %w", e.kind, e.namespace, err)
	}
	return apimeta.EachListItem(e.list, func(o runtime.Object) error {
		other, ok := o.(client.Object)
		if !ok || other.GetName() == e.name || other.GetDeletionTimestamp() != nil || e.idOf(other) != e.id || m.catalogEntryOf(other.GetLabels()) == mine {
			return nil
		}
		return conflict("another %s in namespace %s on SFCluster %s, not copied there by this inter-operator, has the id %q of %s %s; "+
			"the cluster's inter-operator could render with it, so %s is not copied", e.kind, e.namespace, e.cluster, e.id, e.kind, e.name, e.name)
	})
}
