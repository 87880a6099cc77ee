package provisioner

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/sourcewatch"
	"github.com/marketplane/marketplane/internal/render"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// InstanceReconciler provisions, updates and deprovisions
// SFServiceInstances. The provider runtime calls it; see the package
// documentation for what it does.
type InstanceReconciler struct {
	engine *Engine
	client client.Client
	// finalizer is the runtime's finalizer, which persist adds with the
	// instance's first write (spruntime.WithFinalizerByReconciler).
	finalizer string
}

var _ spruntime.Reconciler[*osbv1alpha1.SFServiceInstance, *interoperatorv1alpha1.ProviderConfig] = &InstanceReconciler{}

// NewInstanceReconciler returns the instance reconciler. onboarding is the
// client of the onboarding cluster, where it persists scheduling decisions
// (spec.clusterId) and plan hashes.
func NewInstanceReconciler(engine *Engine, onboarding client.Client) *InstanceReconciler {
	return &InstanceReconciler{engine: engine, client: onboarding, finalizer: spruntime.FinalizerName(osbv1alpha1.GroupVersion.Group)}
}

// CreateOrUpdate implements spruntime.Reconciler: it starts an operation
// when the broker asked for one, the spec changed or an auto-updating plan
// changed; it looks at the status of an operation in progress; and it
// leaves a finished one alone.
func (r *InstanceReconciler) CreateOrUpdate(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	// An instance on a cluster in provisioning mode replicate is rendered
	// by that cluster's own inter-operator (replicated.go).
	if replicated, err := r.engine.replicated(ctx, cfg, cc); err != nil || replicated {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.replicate(ctx, inst, cfg, cc)
	}
	state := inst.Status.State
	starting := opStarting(state) || inst.Status.ObservedGeneration != inst.Generation
	if !starting && state != osbv1alpha1.StateInProgress {
		if !state.IsTerminal() || !r.planChanged(ctx, inst, cfg) {
			return ctrl.Result{}, stillFailed(inst, state)
		}
		starting = true
	}
	if inst.Spec.ServiceID == "" || inst.Spec.PlanID == "" {
		// Service Fabrik's CRD, and ours, accept an instance without spec
		// (docs/api.md); it names no plan, so there is nothing to render.
		// It fails for good rather than wait for a plan with no id.
		failInstance(inst, msgMissingServiceOrPlan)
		r.engine.tracker.done(inst.UID)
		return ctrl.Result{}, spruntime.InvalidUserInput(string(ReasonMissingServiceOrPlan), "%s", msgMissingServiceOrPlan)
	}

	svc, plan, err := r.engine.catalogEntries(ctx, cfg, inst.Spec.ServiceID, inst.Spec.PlanID)
	if err != nil {
		return ctrl.Result{}, waitForCatalog(r.engine, inst, err)
	}
	t, err := r.engine.target(ctx, cfg, cc)
	if err != nil {
		return ctrl.Result{}, clusterError(err, false)
	}
	if starting {
		return r.provision(ctx, inst, cfg, t, svc, plan)
	}
	vals, err := values(svc, plan, inst, nil, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.report(ctx, inst, cfg, t, plan, vals)
}

// planChanged reports whether the instance's plan updates its instances
// automatically and its spec changed since it was applied to inst.
func (r *InstanceReconciler) planChanged(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig) bool {
	plan, err := catalog.Plan(ctx, r.engine.platform.GetClient(), cfg.CatalogNamespace(), inst.Spec.PlanID)
	if err != nil || plan == nil || !plan.Spec.AutoUpdateInstances {
		return false
	}
	return inst.Annotations[osbv1alpha1.AnnotationPlanHash] != catalog.SpecHash(plan)
}

// provision renders and applies the provision template, removes what the
// previous render had and this one has not, and reports the status.
func (r *InstanceReconciler) provision(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, svc *osbv1alpha1.SFService, plan *osbv1alpha1.SFPlan) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	// Until the resources are applied the state names the operation, so
	// that a retry after an error starts it again.
	if inst.Status.AppliedSpec != nil {
		inst.Status.State = osbv1alpha1.StateUpdate
	} else {
		inst.Status.State = osbv1alpha1.StateInQueue
	}
	inst.Status.Error = ""
	inst.Status.InstanceID = idOf(inst)
	fail := func(reason Reason, message string) { failInstance(inst, message) }

	if err := r.persist(ctx, inst, t.Name(), plan); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	// After persist, so that a failed instance is scheduled like any other
	// and its deprovision reports succeeded.
	if o := checkParameters("instance", inst.Spec.Parameters); !o.ok() {
		return ctrl.Result{}, r.engine.settle(inst, cfg, o, fail)
	}
	vals, err := values(svc, plan, inst, nil, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	tmpl, ok := plan.Template(osbv1alpha1.ActionProvision)
	if !ok {
		return ctrl.Result{}, r.engine.settle(inst, cfg, failed(ReasonTemplateFailed, "the plan %s has no provision template", plan.Name), fail)
	}
	objs, o := r.engine.renderObjects(ctx, cfg, plan, tmpl, vals, t, placement{namespace: inst.Namespace, applied: inst.Status.Resources})
	if !o.ok() {
		return ctrl.Result{}, r.engine.settle(inst, cfg, o, fail)
	}
	refs, applied, o := r.engine.applyObjects(ctx, cfg, t, objs, inst.Namespace, r.engine.fieldOwner)
	if !o.ok() {
		inst.Status.Resources = union(inst.Status.Resources, applied)
		return ctrl.Result{}, r.engine.settle(inst, cfg, o, fail)
	}
	if stale := minus(inst.Status.Resources, refs); len(stale) > 0 {
		log.V(1).Info("Deleting resources the render no longer has", "count", len(stale))
		if _, err := t.Applier.Delete(ctx, stale, &objs.policy.Owner); err != nil {
			inst.Status.Resources = union(refs, stale)
			return ctrl.Result{}, r.engine.settle(inst, cfg, r.engine.requestFailed(ctx, cfg, t, err), fail)
		}
	}
	inst.Status.Resources = refs
	inst.Status.AppliedSpec = inst.Spec.DeepCopy()
	log.V(1).Info("Applied the provision template", "resources", len(refs), "cluster", t.Name())
	return r.report(ctx, inst, cfg, t, plan, vals)
}

// conflictRetry is how soon a reconcile whose patch conflicted is retried.
const conflictRetry = 100 * time.Millisecond

// persist records on the instance, in one patch, the runtime's finalizer
// (when it is missing: the runtime leaves it to this first write, see
// spruntime.WithFinalizerByReconciler), the cluster it is scheduled on
// (when spec.clusterId is empty) and the hash of its plan (for plans with
// autoUpdateInstances). It runs before anything is created for the
// instance, so that the finalizer guards all of it. A patch that adds the
// finalizer replaces the list, so it is locked by resourceVersion: a
// concurrent write makes it conflict, and the reconcile is retried on a
// fresh object. A clusterId written meanwhile by someone else is never
// overwritten: the API server refuses to change it once set. Once the
// cluster is recorded, the scheduler's Scheduled condition turns True; the
// patch leaves the rest of inst's status in memory as it is.
func (r *InstanceReconciler) persist(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cluster string, plan *osbv1alpha1.SFPlan) error {
	hash := ""
	if plan.Spec.AutoUpdateInstances {
		hash = catalog.SpecHash(plan)
	}
	needFinalizer := !controllerutil.ContainsFinalizer(inst, r.finalizer)
	needCluster := inst.Spec.ClusterID == ""
	needHash := hash != "" && inst.Annotations[osbv1alpha1.AnnotationPlanHash] != hash
	if !needFinalizer && !needCluster && !needHash {
		return nil
	}
	base := inst.DeepCopy()
	patched := inst.DeepCopy()
	var opts []client.MergeFromOption
	if needFinalizer {
		controllerutil.AddFinalizer(patched, r.finalizer)
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	if needCluster {
		patched.Spec.ClusterID = cluster
	}
	if needHash {
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		patched.Annotations[osbv1alpha1.AnnotationPlanHash] = hash
	}
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(base, opts...)); err != nil {
		return fmt.Errorf("record finalizer, cluster %s and plan hash: %w", cluster, err)
	}
	inst.Finalizers = patched.Finalizers
	inst.Spec.ClusterID = patched.Spec.ClusterID
	inst.Annotations = patched.Annotations
	inst.Generation = patched.Generation
	inst.ResourceVersion = patched.ResourceVersion
	if needCluster {
		scheduled(inst)
	}
	return nil
}

// scheduled turns the Unknown Scheduled condition that the scheduler set
// (InstanceAccess.schedule) True, now that its decision is recorded in
// spec.clusterId.
func scheduled(inst *osbv1alpha1.SFServiceInstance) {
	c := apimeta.FindStatusCondition(inst.Status.Conditions, ConditionScheduled)
	if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != ReasonScheduling {
		return
	}
	setScheduled(inst, metav1.ConditionTrue, ReasonScheduled, strings.TrimPrefix(c.Message, recordingPrefix))
}

// report evaluates the sources and status templates and sets the state.
func (r *InstanceReconciler) report(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, plan *osbv1alpha1.SFPlan, vals map[string]any) (ctrl.Result, error) {
	st, o := r.engine.evaluate(ctx, cfg, plan, vals, t, placement{namespace: inst.Namespace, applied: inst.Status.Resources}, render.OperationProvision,
		sourcewatch.Owner{UID: inst.UID, Key: client.ObjectKeyFromObject(inst)})
	if !o.ok() {
		return ctrl.Result{}, r.engine.settle(inst, cfg, o, func(_ Reason, message string) { failInstance(inst, message) })
	}
	inst.Status.Description = st.Description
	inst.Status.Error = st.Error
	inst.Status.DashboardURL = st.DashboardURL
	inst.Status.InstanceUsable = st.InstanceUsable
	inst.Status.UpdateRepeatable = st.UpdateRepeatable
	switch st.State {
	case osbv1alpha1.StateSucceeded:
		inst.Status.State = osbv1alpha1.StateSucceeded
		r.engine.tracker.done(inst.UID)
		spruntime.StatusReady(inst)
		logf.FromContext(ctx).V(1).Info("Operation succeeded")
		return ctrl.Result{}, nil
	case osbv1alpha1.StateFailed:
		inst.Status.State = osbv1alpha1.StateFailed
		r.engine.tracker.done(inst.UID)
		spruntime.StatusFailed(inst, string(ReasonOperationFailed), cmp.Or(st.Error, st.Description, "the status template reports that the operation failed"))
		return ctrl.Result{}, nil
	}
	inst.Status.State = osbv1alpha1.StateInProgress
	spruntime.StatusProgressing(inst, string(ReasonInProgress), cmp.Or(st.Description, "Waiting for the status template to report the outcome"))
	return ctrl.Result{RequeueAfter: r.engine.progressWait(inst.UID)}, nil
}

// Delete implements spruntime.Reconciler: it deletes every recorded
// resource and reports done once they are gone.
func (r *InstanceReconciler) Delete(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	if replicated, err := r.engine.replicated(ctx, cfg, cc); err != nil || replicated {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.engine.replicator.DeleteInstance(ctx, inst, cfg, cc)
	}
	if len(inst.Status.Resources) > 0 {
		t, err := r.engine.target(ctx, cfg, cc)
		if err != nil {
			return ctrl.Result{}, err
		}
		owner := instanceOwner(inst)
		remaining, err := t.Applier.Delete(ctx, inst.Status.Resources, &owner)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("deprovision: %w", err)
		}
		if len(remaining) > 0 {
			inst.Status.State = osbv1alpha1.StateInProgress
			inst.Status.Description = "Waiting for the instance's resources to be deleted"
			spruntime.StatusTerminatingWithReason(inst, string(ReasonDeleting), inst.Status.Description)
			return ctrl.Result{RequeueAfter: r.engine.tracker.poll(inst.UID, r.engine.minWait, r.engine.maxWait)}, nil
		}
		if err := r.releaseNamespace(ctx, t, inst); err != nil {
			return ctrl.Result{}, err
		}
	}
	inst.Status.Resources = nil
	inst.Status.State = osbv1alpha1.StateSucceeded
	inst.Status.Description = "The instance is deprovisioned"
	inst.Status.Error = ""
	r.engine.tracker.done(inst.UID)
	logf.FromContext(ctx).V(1).Info("Deprovisioned")
	return ctrl.Result{}, nil
}

// releaseNamespace deletes, on the target, the instance's default
// namespace when the provisioner created it and no other instance of the
// same onboarding namespace on the same cluster, which would share it, is
// left.
func (r *InstanceReconciler) releaseNamespace(ctx context.Context, t *clusters.Target, inst *osbv1alpha1.SFServiceInstance) error {
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := r.client.List(ctx, list, client.InNamespace(inst.Namespace)); err != nil {
		return fmt.Errorf("list the instances sharing namespace %s: %w", inst.Namespace, err)
	}
	for i := range list.Items {
		if other := &list.Items[i]; other.UID != inst.UID && other.Spec.ClusterID == inst.Spec.ClusterID {
			return nil
		}
	}
	if err := t.Applier.DeleteCreatedNamespace(ctx, inst.Namespace); err != nil {
		return fmt.Errorf("deprovision: %w", err)
	}
	return nil
}

// stillFailed returns, for an object whose operation failed for invalid
// input (state failed, Synced=False with the input's reason), that input
// error again: the runtime resets such a Ready condition to Reconciling
// when the object is reconciled once more (for example after its clusterId
// was recorded), while the failure stands until a new operation.
func stillFailed(obj spruntime.API, state osbv1alpha1.State) error {
	synced := apimeta.FindStatusCondition(*obj.GetConditions(), spruntime.ConditionSynced)
	if state != osbv1alpha1.StateFailed || synced == nil || synced.Status != metav1.ConditionFalse || synced.Reason == spruntime.ReasonReconcileError {
		return nil
	}
	return spruntime.InvalidUserInput(synced.Reason, "%s", synced.Message)
}

// failInstance ends the operation of inst in failed with message.
func failInstance(inst *osbv1alpha1.SFServiceInstance, message string) {
	inst.Status.State = osbv1alpha1.StateFailed
	inst.Status.Error = message
	inst.Status.Description = message
}
