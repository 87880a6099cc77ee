package sf

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

var instanceResource = osbv1alpha1.GroupVersion.WithResource("sfserviceinstances").GroupResource()

// lookInstance reads the instance of id and evaluates its latest
// operation. An object under the same name for another id (a hash
// collision) or in a namespace the broker does not own counts as missing.
func (s *Backend) lookInstance(id string) func(context.Context, Read) (client.Object, Operation, progress, error) {
	return func(ctx context.Context, read Read) (client.Object, Operation, progress, error) {
		inst, err := s.getInstance(ctx, id, read)
		if err != nil {
			return nil, Operation{}, progress{}, err
		}
		op, p := instanceProgress(inst)
		return inst, op, p, nil
	}
}

// getInstance reads the instance of id (OwnedInstance).
func (s *Backend) getInstance(ctx context.Context, id string, read Read) (*osbv1alpha1.SFServiceInstance, error) {
	return OwnedInstance(ctx, s.store, id, read)
}

// refreshInstance returns a function that reads the instance fresh.
func (s *Backend) refreshInstance(id string) func() (client.Object, error) {
	return func() (client.Object, error) {
		// The request's context may already be done when a best-effort
		// write retries; the reads use their own short deadline.
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		return s.getInstance(ctx, id, Fresh)
	}
}

// provisionInput is a provision request, checked against itself and the
// catalog.
type provisionInput struct {
	req             *osb.ProvisionRequest
	maintenance     *osb.MaintenanceInfo
	ctxJSON, params json.RawMessage
	plan            *catalog.Plan
}

// parseProvision reads and checks the body of a provision request.
func (s *Backend) parseProvision(c *osbCall, req *osb.ProvisionRequest) (*provisionInput, error) {
	in := &provisionInput{req: req}
	switch {
	case req.ServiceID == "":
		return nil, osb.BadRequest("service_id is required.")
	case req.PlanID == "":
		return nil, osb.BadRequest("plan_id is required.")
	case req.OrganizationGUID == "":
		return nil, osb.BadRequest("organization_guid is required (OSB v2.17 still marks it REQUIRED next to context).")
	case req.SpaceGUID == "":
		return nil, osb.BadRequest("space_guid is required (OSB v2.17 still marks it REQUIRED next to context).")
	}
	var err error
	if in.maintenance, err = osb.MaintenanceField(req.MaintenanceInfo); err != nil {
		return nil, err
	}
	if in.ctxJSON, err = osb.ObjectField(req.Context, "context"); err != nil {
		return nil, err
	}
	if in.params, err = osb.ObjectField(req.Parameters, "parameters"); err != nil {
		return nil, err
	}
	if err := osb.CheckPlatform(c.x.Identity, in.ctxJSON); err != nil {
		return nil, err
	}
	if in.plan, err = s.servicePlan(req.ServiceID, req.PlanID); err != nil {
		return nil, err
	}
	return in, nil
}

// servicePlan returns the catalog's plan planID of offering serviceID.
func (s *Backend) servicePlan(serviceID, planID string) (*catalog.Plan, error) {
	snap := s.catalog.Snapshot()
	svc := snap.Service(serviceID)
	if svc == nil {
		return nil, osb.BadRequest("service_id %q is not a service offering of this broker's catalog.", osb.Truncate(serviceID, 100))
	}
	plan := snap.Plan(planID)
	if plan == nil || plan.ServiceID != svc.ID {
		return nil, osb.BadRequest("plan_id %q is not a plan of service offering %q.", osb.Truncate(planID, 100), svc.Name)
	}
	return plan, nil
}

// checkNew checks what only matters when the request creates the instance
// (anew, or again after a failure).
func (in *provisionInput) checkNew(async bool) error {
	if mi := in.maintenance; mi != nil && mi.Version != in.plan.MaintenanceVersion {
		return maintenanceConflict(in.plan)
	}
	if err := in.plan.CreateSchema.Validate(in.params); err != nil {
		return osb.BadRequest("parameters do not match the plan's schema: %v.", err)
	}
	if in.plan.Async && !async {
		return osb.AsyncRequired("service plan")
	}
	return nil
}

// outcome is what a provision that started or joined op answers.
func (in *provisionInput) outcome(c *osbCall, op Operation, inst *osbv1alpha1.SFServiceInstance, doneStatus int) outcome {
	plan := in.plan
	return outcome{
		async:      c.async,
		asyncOnly:  plan.Async,
		doneStatus: doneStatus,
		accepted:   osb.ProvisionResponse{DashboardURL: dashboardURL(plan, inst), Operation: op.String()},
		done: func(obj client.Object) (any, error) {
			return osb.ProvisionResponse{DashboardURL: dashboardURL(plan, obj.(*osbv1alpha1.SFServiceInstance))}, nil
		},
		failed: func(p progress) *osb.Error {
			return osb.NewError(http.StatusInternalServerError, "", "Provisioning failed: %s", p.description)
		},
	}
}

// Provision answers PUT /v2/service_instances/:instance_id.
func (s *Backend) Provision(ctx context.Context, x *osb.Call, req *osb.ProvisionRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, "")
	in, err := s.parseProvision(c, req)
	if err != nil {
		return 0, nil, err
	}
	t := s.instanceTarget(c.instanceID)
	return retryConflicts(func(attempt int) (int, any, error) {
		inst, err := readForCreate(attempt, func(read Read) (*osbv1alpha1.SFServiceInstance, error) {
			return s.getInstance(c.ctx, c.instanceID, read)
		})
		switch {
		case apierrors.IsNotFound(err):
			return s.provisionNew(c, t, in, nil, attempt)
		case err != nil:
			return 0, nil, err
		case deletionFinished(inst):
			// The previous instance of this id is gone; only its
			// tombstone is left, which must not block the id.
			return s.provisionNew(c, t, in, inst, attempt)
		}
		return s.provisionExisting(c, t, in, inst)
	})
}

// provisionNew creates the instance, in place of the tombstone of a
// deleted one when there is one. Its operations continue the tombstone's
// count, so that a platform still polling the deletion is told it is gone
// (410) rather than that its operation is unknown.
func (s *Backend) provisionNew(c *osbCall, t target, in *provisionInput, tombstone *osbv1alpha1.SFServiceInstance, attempt int) (int, any, error) {
	if err := in.checkNew(c.async); err != nil {
		return 0, nil, err
	}
	op := Operation{Type: OpCreate, Seq: 1}
	var old client.Object
	if tombstone != nil {
		op, old = currentOperation(tombstone).next(OpCreate), tombstone
	}
	inst := newInstance(c.instanceID, in, op, c.x)
	if err := s.createNew(c, t, inst, old, attempt); err != nil {
		return 0, nil, err
	}
	s.logDecision(c, t, "Provision accepted", "operation", op.String(), "planID", in.plan.ID, "reusedID", tombstone != nil)
	return s.finish(c.ctx, op, in.outcome(c, op, inst, http.StatusCreated), t)
}

// provisionExisting answers a provision request for an instance that
// exists: a re-sent request joins the provisioning or provisions again
// after a failure; anything else is answered from the instance's state.
func (s *Backend) provisionExisting(c *osbCall, t target, in *provisionInput, inst *osbv1alpha1.SFServiceInstance) (int, any, error) {
	if inst.DeletionTimestamp != nil {
		return 0, nil, osb.ConcurrencyError("The instance is being deleted.")
	}
	if !sameProvision(inst, in) {
		return 0, nil, osb.Conflict("An instance with this id already exists with different attributes.")
	}
	op, p := instanceProgress(inst)
	switch {
	case op.Type == OpDelete:
		return 0, nil, osb.ConcurrencyError("The instance is being deleted.")
	case op.Type == OpCreate && p.running():
		if in.plan.Async && !c.async {
			return 0, nil, osb.AsyncRequired("service plan")
		}
		return s.finish(c.ctx, op, in.outcome(c, op, inst, http.StatusOK), t)
	case op.Type == OpCreate && p.state == osb.StateFailed:
		// Provisioning failed: the identical request provisions again.
		if err := in.checkNew(c.async); err != nil {
			return 0, nil, err
		}
		next := op.next(OpCreate)
		obj, err := s.begin(c, t, inst, next, osbv1alpha1.StateInQueue, nil)
		if err != nil {
			return 0, nil, err
		}
		s.logDecision(c, t, "Provision restarted after a failure", "operation", next.String())
		return s.finish(c.ctx, next, in.outcome(c, next, obj.(*osbv1alpha1.SFServiceInstance), http.StatusCreated), t)
	case op.Type == OpUpdate && p.running():
		return 0, nil, osb.ConcurrencyError("An update of the instance is in progress.")
	}
	// Provisioned (and perhaps updated since): nothing to do.
	return http.StatusOK, osb.ProvisionResponse{DashboardURL: dashboardURL(in.plan, inst)}, nil
}

func maintenanceConflict(plan *catalog.Plan) *osb.Error {
	if plan.MaintenanceVersion == "" {
		return osb.NewError(http.StatusUnprocessableEntity, osb.CodeMaintenanceInfoConflict,
			"The service plan has no maintenance_info; fetch the catalog again.")
	}
	return osb.NewError(http.StatusUnprocessableEntity, osb.CodeMaintenanceInfoConflict,
		"The maintenance information for the requested service plan has changed (the catalog has version %q); fetch the catalog again.", plan.MaintenanceVersion)
}

// newInstance builds the SFServiceInstance that records a provision
// request, as the operation op.
func newInstance(id string, in *provisionInput, op Operation, x *osb.Call) *osbv1alpha1.SFServiceInstance {
	key := InstanceKey(id)
	req := in.req
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:        key.Name,
			Namespace:   key.Namespace,
			Finalizers:  []string{osbv1alpha1.FinalizerBroker},
			Annotations: map[string]string{},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID:       id,
			ServiceID:        req.ServiceID,
			PlanID:           req.PlanID,
			Context:          rawExtension(in.ctxJSON),
			OrganizationGUID: req.OrganizationGUID,
			SpaceGUID:        req.SpaceGUID,
			Parameters:       rawExtension(in.params),
		},
	}
	version := in.plan.MaintenanceVersion
	if in.maintenance != nil {
		version = in.maintenance.Version
	}
	if version != "" {
		inst.Annotations[AnnotationMaintenanceVersion] = version
	}
	markOperation(inst, op, osbv1alpha1.StateInQueue, x)
	return inst
}

// sameProvision reports whether a provision request asks for exactly the
// instance that is stored.
func sameProvision(inst *osbv1alpha1.SFServiceInstance, in *provisionInput) bool {
	sp, req := &inst.Spec, in.req
	if sp.ServiceID != req.ServiceID || sp.PlanID != req.PlanID ||
		sp.OrganizationGUID != req.OrganizationGUID || sp.SpaceGUID != req.SpaceGUID ||
		!osb.SameObject(rawBytes(sp.Context), in.ctxJSON) || !osb.SameObject(rawBytes(sp.Parameters), in.params) {
		return false
	}
	if mi := in.maintenance; mi != nil && mi.Version != inst.Annotations[AnnotationMaintenanceVersion] {
		return false
	}
	return true
}

// updateInput is an update request, checked against itself and the
// catalog.
type updateInput struct {
	req                       *osb.UpdateRequest
	maintenance               *osb.MaintenanceInfo
	ctxJSON, params, previous json.RawMessage
	snap                      *catalog.Snapshot
	svc                       *catalog.Service
}

// parseUpdate reads and checks the body of an update request.
func (s *Backend) parseUpdate(c *osbCall, req *osb.UpdateRequest) (*updateInput, error) {
	in := &updateInput{req: req}
	if req.ServiceID == "" {
		return nil, osb.BadRequest("service_id is required.")
	}
	var err error
	if in.maintenance, err = osb.MaintenanceField(req.MaintenanceInfo); err != nil {
		return nil, err
	}
	if in.ctxJSON, err = osb.ObjectField(req.Context, "context"); err != nil {
		return nil, err
	}
	if in.params, err = osb.ObjectField(req.Parameters, "parameters"); err != nil {
		return nil, err
	}
	if in.previous, err = osb.ObjectField(req.PreviousValues, "previous_values"); err != nil {
		return nil, err
	}
	if err := osb.CheckPlatform(c.x.Identity, in.ctxJSON); err != nil {
		return nil, err
	}
	in.snap = s.catalog.Snapshot()
	if in.svc = in.snap.Service(req.ServiceID); in.svc == nil {
		return nil, osb.BadRequest("service_id %q is not a service offering of this broker's catalog.", osb.Truncate(req.ServiceID, 100))
	}
	return in, nil
}

// updateChange is what an update asks of one stored instance.
type updateChange struct {
	target                                       *catalog.Plan
	targetID                                     string
	storedVersion                                string
	planChange, maintenanceChange, contextChange bool
}

// none reports whether the update changes nothing.
func (ch *updateChange) none(in *updateInput) bool {
	return !ch.planChange && in.params == nil && !ch.maintenanceChange && !ch.contextChange
}

// change checks the update against the stored instance and the catalog
// and returns what it changes.
func (in *updateInput) change(inst *osbv1alpha1.SFServiceInstance) (*updateChange, error) {
	ch := &updateChange{targetID: inst.Spec.PlanID, storedVersion: inst.Annotations[AnnotationMaintenanceVersion]}
	if in.req.PlanID != "" {
		ch.targetID = in.req.PlanID
	}
	ch.target = in.snap.Plan(ch.targetID)
	if ch.target == nil || ch.target.ServiceID != in.svc.ID {
		if in.req.PlanID != "" {
			return nil, osb.BadRequest("plan_id %q is not a plan of service offering %q.", osb.Truncate(in.req.PlanID, 100), in.svc.Name)
		}
		return nil, osb.Unprocessable("The instance's plan %q is no longer offered; change to another plan.", inst.Spec.PlanID)
	}
	if ch.planChange = ch.targetID != inst.Spec.PlanID; ch.planChange {
		current := in.snap.Plan(inst.Spec.PlanID)
		if current != nil && !current.PlanUpdatable {
			return nil, osb.Unprocessable("The instance's plan does not allow plan changes.")
		}
		if preds := ch.target.UpdatePredecessors; len(preds) > 0 && !slices.Contains(preds, inst.Spec.PlanID) {
			return nil, osb.Unprocessable("Instances of plan %q cannot change to plan %q.", inst.Spec.PlanID, ch.target.Name)
		}
	}
	if mi := in.maintenance; mi != nil && mi.Version != ch.target.MaintenanceVersion {
		return nil, maintenanceConflict(ch.target)
	}
	ch.maintenanceChange = in.maintenance != nil && in.maintenance.Version != ch.storedVersion
	ch.contextChange = in.ctxJSON != nil && !osb.SameObject(rawBytes(inst.Spec.Context), in.ctxJSON)
	if in.params != nil {
		if err := ch.target.UpdateSchema.Validate(osb.WithoutNulls(in.params)); err != nil {
			return nil, osb.BadRequest("parameters do not match the plan's schema: %v.", err)
		}
	}
	return ch, nil
}

// mutate writes the spec the update asks for into o.
func (in *updateInput) mutate(ch *updateChange) func(client.Object) error {
	return func(o client.Object) error {
		inst := o.(*osbv1alpha1.SFServiceInstance)
		inst.Spec.PlanID = ch.targetID
		if in.params != nil {
			merged, err := osb.MergePatch(rawBytes(inst.Spec.Parameters), in.params)
			if err != nil {
				return err
			}
			inst.Spec.Parameters = rawExtension(merged)
		}
		if in.ctxJSON != nil {
			inst.Spec.Context = rawExtension(in.ctxJSON)
		}
		if in.previous != nil {
			inst.Spec.PreviousValues = rawExtension(in.previous)
		}
		version := ch.storedVersion
		switch {
		case in.maintenance != nil:
			version = in.maintenance.Version
		case ch.planChange:
			version = ch.target.MaintenanceVersion
		}
		if version != "" {
			inst.Annotations[AnnotationMaintenanceVersion] = version
		} else {
			delete(inst.Annotations, AnnotationMaintenanceVersion)
		}
		return nil
	}
}

// updatable refuses an update of an instance whose latest operation does
// not allow one.
func updatable(op Operation, p progress) error {
	switch {
	case p.gone:
		return osb.NotFound("The service instance does not exist.")
	case op.Type == OpDelete:
		return osb.ConcurrencyError("The instance is being deleted.")
	case op.Type == OpCreate && p.running():
		return osb.ConcurrencyError("The instance is being provisioned.")
	case op.Type == OpCreate && p.state == osb.StateFailed:
		return osb.Unprocessable("The instance could not be provisioned, so it cannot be updated; deprovision it.")
	}
	return nil
}

// updateOutcome is what an update that started or joined op answers.
func updateOutcome(c *osbCall, op Operation, target *catalog.Plan, inst *osbv1alpha1.SFServiceInstance) outcome {
	return outcome{
		async:      c.async,
		asyncOnly:  target.Async,
		doneStatus: http.StatusOK,
		accepted:   osb.ProvisionResponse{DashboardURL: dashboardURL(target, inst), Operation: op.String()},
		done: func(obj client.Object) (any, error) {
			return osb.ProvisionResponse{DashboardURL: dashboardURL(target, obj.(*osbv1alpha1.SFServiceInstance))}, nil
		},
		failed: func(p progress) *osb.Error {
			e := osb.NewError(http.StatusInternalServerError, "", "The update failed: %s", p.description)
			e.InstanceUsable, e.UpdateRepeatable = p.instanceUsable, p.updateRepeatable
			return e
		},
	}
}

// Update answers PATCH /v2/service_instances/:instance_id.
func (s *Backend) Update(ctx context.Context, x *osb.Call, req *osb.UpdateRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, "")
	in, err := s.parseUpdate(c, req)
	if err != nil {
		return 0, nil, err
	}
	t := s.instanceTarget(c.instanceID)
	return retryConflicts(func(int) (int, any, error) {
		inst, err := s.getInstance(c.ctx, c.instanceID, Fresh)
		if apierrors.IsNotFound(err) {
			return 0, nil, osb.NotFound("The service instance does not exist.")
		}
		if err != nil {
			return 0, nil, err
		}
		if inst.Spec.ServiceID != in.req.ServiceID {
			return 0, nil, osb.BadRequest("service_id %q is not the service offering of the instance.", osb.Truncate(in.req.ServiceID, 100))
		}
		op, p := instanceProgress(inst)
		if err := updatable(op, p); err != nil {
			return 0, nil, err
		}
		ch, err := in.change(inst)
		if err != nil {
			return 0, nil, err
		}
		if op.Type == OpUpdate && p.running() {
			return s.joinUpdate(c, t, in, ch, inst, op)
		}
		return s.startUpdate(c, t, in, ch, inst, op)
	})
}

// joinUpdate answers an update while another runs: a re-sent request gets
// the running operation; any other update must wait for it.
func (s *Backend) joinUpdate(c *osbCall, t target, in *updateInput, ch *updateChange, inst *osbv1alpha1.SFServiceInstance, op Operation) (int, any, error) {
	want := inst.DeepCopy()
	if err := in.mutate(ch)(want); err != nil {
		return 0, nil, err
	}
	if !sameUpdate(inst, want) {
		return 0, nil, osb.ConcurrencyError("Another update of the instance is in progress.")
	}
	if ch.target.Async && !c.async {
		return 0, nil, osb.AsyncRequired("service plan")
	}
	return s.finish(c.ctx, op, updateOutcome(c, op, ch.target, inst), t)
}

// startUpdate starts the update as the operation after op, unless it
// changes nothing.
func (s *Backend) startUpdate(c *osbCall, t target, in *updateInput, ch *updateChange, inst *osbv1alpha1.SFServiceInstance, op Operation) (int, any, error) {
	if ch.none(in) {
		return http.StatusOK, osb.EmptyObject, nil
	}
	if ch.contextChange && !ch.planChange && in.params == nil && !ch.maintenanceChange && !in.svc.AllowContextUpdates {
		return 0, nil, osb.Unprocessable("The service offering does not accept updates of the context alone.")
	}
	if ch.target.Async && !c.async {
		return 0, nil, osb.AsyncRequired("service plan")
	}
	next := op.next(OpUpdate)
	obj, err := s.begin(c, t, inst, next, osbv1alpha1.StateUpdate, in.mutate(ch))
	if err != nil {
		return 0, nil, err
	}
	s.logDecision(c, t, "Update accepted", "operation", next.String(), "planID", ch.targetID)
	return s.finish(c.ctx, next, updateOutcome(c, next, ch.target, obj.(*osbv1alpha1.SFServiceInstance)), t)
}

// sameUpdate reports whether want (the running update with a re-sent
// request applied) asks for nothing new.
func sameUpdate(running, want *osbv1alpha1.SFServiceInstance) bool {
	a, b := &running.Spec, &want.Spec
	return a.PlanID == b.PlanID &&
		osb.SameObject(rawBytes(a.Parameters), rawBytes(b.Parameters)) &&
		osb.SameObject(rawBytes(a.Context), rawBytes(b.Context)) &&
		running.Annotations[AnnotationMaintenanceVersion] == want.Annotations[AnnotationMaintenanceVersion]
}

// FetchInstance answers GET /v2/service_instances/:instance_id.
func (s *Backend) FetchInstance(ctx context.Context, x *osb.Call, req *osb.FetchRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, "")
	inst, err := s.getInstance(c.ctx, c.instanceID, Fresh)
	if apierrors.IsNotFound(err) {
		return 0, nil, osb.NotFound("The service instance does not exist.")
	}
	if err != nil {
		return 0, nil, err
	}
	snap := s.catalog.Snapshot()
	if svc := snap.Service(inst.Spec.ServiceID); svc != nil && !svc.InstancesRetrievable {
		return 0, nil, osb.BadRequest("The service offering does not support fetching instances (instances_retrievable is false).")
	}
	op, p := instanceProgress(inst)
	switch {
	case p.gone:
		return 0, nil, osb.NotFound("The service instance does not exist.")
	case op.Type == OpDelete:
		return 0, nil, osb.ConcurrencyError("The instance is being deleted.")
	case op.Type == OpCreate && p.running():
		return 0, nil, osb.NotFound("The service instance is still being provisioned.")
	case op.Type == OpCreate && p.state == osb.StateFailed:
		return 0, nil, osb.NotFound("The service instance could not be provisioned.")
	case op.Type == OpUpdate && p.running():
		return 0, nil, osb.ConcurrencyError("The instance is being updated.")
	}
	return http.StatusOK, fetchedInstance(snap, inst), nil
}

// fetchedInstance is the body of a fetched instance.
func fetchedInstance(snap *catalog.Snapshot, inst *osbv1alpha1.SFServiceInstance) osb.FetchInstanceResponse {
	plan := snap.Plan(inst.Spec.PlanID)
	resp := osb.FetchInstanceResponse{
		ServiceID:    inst.Spec.ServiceID,
		PlanID:       inst.Spec.PlanID,
		DashboardURL: dashboardURL(plan, inst),
		Parameters:   rawBytes(inst.Spec.Parameters),
	}
	if v := inst.Annotations[AnnotationMaintenanceVersion]; v != "" {
		resp.MaintenanceInfo = &osb.MaintenanceInfo{Version: v}
		if plan != nil && plan.MaintenanceVersion == v {
			resp.MaintenanceInfo.Description = plan.MaintenanceDescription
		}
	}
	if m := inst.Spec.Metadata; m != nil && (len(m.Labels) > 0 || len(m.Attributes) > 0) {
		resp.Metadata = &osb.InstanceMetadata{Labels: m.Labels, Attributes: m.Attributes}
	}
	return resp
}

// Deprovision answers DELETE /v2/service_instances/:instance_id. It
// decides on the cached instance and bindings first (decisionRead,
// confirm).
func (s *Backend) Deprovision(ctx context.Context, x *osb.Call, req *osb.DeleteRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, "")
	c.serviceID = req.ServiceID
	snap := s.catalog.Snapshot()
	t := s.instanceTarget(c.instanceID)
	return retryConflicts(func(attempt int) (int, any, error) {
		read := decisionRead(attempt)
		inst, err := s.getInstance(c.ctx, c.instanceID, read)
		if apierrors.IsNotFound(err) {
			return http.StatusGone, osb.EmptyObject, nil
		}
		if err != nil {
			return 0, nil, err
		}
		if inst.Spec.ServiceID != c.serviceID {
			return 0, nil, osb.BadRequest("service_id %q is not the service offering of the instance.", osb.Truncate(c.serviceID, 100))
		}
		op, p := instanceProgress(inst)
		if p.gone {
			return http.StatusGone, osb.EmptyObject, nil
		}
		// A plan removed from the catalog can still be deprovisioned;
		// without it the broker waits as for a synchronous plan.
		plan := snap.Plan(inst.Spec.PlanID)
		asyncOnly := plan != nil && plan.Async
		if asyncOnly && !c.async {
			return 0, nil, osb.AsyncRequired("service plan")
		}
		// A platform that accepts an asynchronous answer gets 202 at
		// once, whatever the plan: a deletion ends with the provisioner's
		// clean-up (namespaces finalizing, say), which takes seconds, and
		// last_operation reports its progress.
		o := deleteOutcome(c.async, asyncOnly || c.async, func(p progress) *osb.Error {
			e := osb.NewError(http.StatusInternalServerError, "", "Deprovisioning failed: %s", p.description)
			e.InstanceUsable = p.instanceUsable
			return e
		})
		if inst.DeletionTimestamp != nil {
			return s.rejoinDeletion(c, t, inst, read, op, p, o)
		}
		if err := s.deleteBindingsOf(c, inst, read); err != nil {
			return 0, nil, confirm(read, again(err))
		}
		return s.startDeletion(c, t, inst, op, o, "Deprovision accepted")
	})
}

// deleteBindingsOf deletes the bindings of inst that the platform did not
// delete first: they go with the instance. A binding being created or
// deleted makes the deprovision wait (ConcurrencyError). The bindings are
// listed with read.
func (s *Backend) deleteBindingsOf(c *osbCall, inst *osbv1alpha1.SFServiceInstance, read Read) error {
	var bindings osbv1alpha1.SFServiceBindingList
	if err := s.store.List(c.ctx, inst.Namespace, &bindings, read); err != nil {
		return err
	}
	for i := range bindings.Items {
		b := &bindings.Items[i]
		if b.Spec.InstanceID != c.instanceID {
			continue
		}
		if _, bp := bindingProgress(b); bp.running() {
			return osb.ConcurrencyError("A binding of the instance is being created or deleted.")
		}
	}
	for i := range bindings.Items {
		b := &bindings.Items[i]
		if b.Spec.InstanceID != c.instanceID || b.DeletionTimestamp != nil {
			continue
		}
		if err := s.deleteObject(c.ctx, b); err != nil {
			return err
		}
		s.logDeletion(c, s.bindingTarget(c.instanceID, b.Spec.ID), "Binding deleted with its instance", currentOperation(b).next(OpDelete))
	}
	return nil
}
