package broker

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
)

var instanceResource = osbv1alpha1.GroupVersion.WithResource("sfserviceinstances").GroupResource()

// lookInstance reads the instance of id and evaluates its latest
// operation. An object under the same name for another id (a hash
// collision) counts as missing.
func (s *Server) lookInstance(id string) func(context.Context, Read) (client.Object, Operation, progress, error) {
	return func(ctx context.Context, read Read) (client.Object, Operation, progress, error) {
		inst, err := s.getInstance(ctx, id, read)
		if err != nil {
			return nil, Operation{}, progress{}, err
		}
		op, p := instanceProgress(inst)
		return inst, op, p, nil
	}
}

// getInstance reads the instance of id.
func (s *Server) getInstance(ctx context.Context, id string, read Read) (*osbv1alpha1.SFServiceInstance, error) {
	key := InstanceKey(id)
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := s.store.Get(ctx, key, inst, read); err != nil {
		return nil, err
	}
	if inst.Spec.InstanceID != id {
		return nil, apierrors.NewNotFound(instanceResource, key.Name)
	}
	return inst, nil
}

// refreshInstance returns a function that reads the instance fresh.
func (s *Server) refreshInstance(id string) func() (client.Object, error) {
	return func() (client.Object, error) {
		// The request's context may already be done when a best-effort
		// write retries; the reads use their own short deadline.
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		return s.getInstance(ctx, id, Fresh)
	}
}

// provision answers PUT /v2/service_instances/:instance_id.
func (s *Server) provision(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	id, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	q, err := parseQuery(r)
	if err != nil {
		return 0, nil, err
	}
	async, err := q.acceptsIncomplete()
	if err != nil {
		return 0, nil, err
	}
	var req provisionRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	switch {
	case req.ServiceID == "":
		return 0, nil, badRequest("service_id is required.")
	case req.PlanID == "":
		return 0, nil, badRequest("plan_id is required.")
	case req.OrganizationGUID == "":
		return 0, nil, badRequest("organization_guid is required (OSB v2.17 still marks it REQUIRED next to context).")
	case req.SpaceGUID == "":
		return 0, nil, badRequest("space_guid is required (OSB v2.17 still marks it REQUIRED next to context).")
	case req.MaintenanceInfo != nil && req.MaintenanceInfo.Version == "":
		return 0, nil, badRequest("maintenance_info.version is required when maintenance_info is sent.")
	}
	ctxJSON, err := objectField(req.Context, "context")
	if err != nil {
		return 0, nil, err
	}
	params, err := objectField(req.Parameters, "parameters")
	if err != nil {
		return 0, nil, err
	}
	if err := checkPlatform(x.identity, ctxJSON); err != nil {
		return 0, nil, err
	}
	snap := s.catalog.Snapshot()
	svc := snap.Service(req.ServiceID)
	if svc == nil {
		return 0, nil, badRequest("service_id %q is not a service offering of this broker's catalog.", truncate(req.ServiceID, 100))
	}
	plan := snap.Plan(req.PlanID)
	if plan == nil || plan.ServiceID != svc.ID {
		return 0, nil, badRequest("plan_id %q is not a plan of service offering %q.", truncate(req.PlanID, 100), svc.Name)
	}
	checkNew := func() error {
		if mi := req.MaintenanceInfo; mi != nil && mi.Version != plan.MaintenanceVersion {
			return maintenanceConflict(plan)
		}
		if err := plan.CreateSchema.Validate(params); err != nil {
			return badRequest("parameters do not match the plan's schema: %v.", err)
		}
		if plan.Async && !async {
			return asyncRequired("service plan")
		}
		return nil
	}
	o := func(op Operation, inst *osbv1alpha1.SFServiceInstance, doneStatus int) outcome {
		return outcome{
			async:      async,
			asyncOnly:  plan.Async,
			doneStatus: doneStatus,
			accepted:   provisionResponse{DashboardURL: dashboardURL(plan, inst), Operation: op.String()},
			done: func(obj client.Object) (any, error) {
				return provisionResponse{DashboardURL: dashboardURL(plan, obj.(*osbv1alpha1.SFServiceInstance))}, nil
			},
			failed: func(p progress) *Error {
				return newError(http.StatusInternalServerError, "", "Provisioning failed: %s", p.description)
			},
		}
	}

	for attempt := 0; attempt < maxAttempts; attempt++ {
		inst, err := s.getInstance(ctx, id, Fresh)
		if apierrors.IsNotFound(err) {
			if err := checkNew(); err != nil {
				return 0, nil, err
			}
			inst = newInstance(id, &req, ctxJSON, params, plan, x)
			if err := s.store.Create(ctx, inst); err != nil {
				if apierrors.IsAlreadyExists(err) {
					if attempt > 0 {
						return 0, nil, conflict("An instance with this id already exists under another id's name.")
					}
					continue
				}
				return 0, nil, err
			}
			s.setInitialState(ctx, inst, func(o client.Object) bool {
				st := &o.(*osbv1alpha1.SFServiceInstance).Status
				if st.State != "" {
					return false
				}
				st.State = osbv1alpha1.StateInQueue
				return true
			}, s.refreshInstance(id))
			op := Operation{Type: OpCreate, Seq: 1}
			s.log.V(1).Info("Provision accepted", "instanceID", id, "operation", op.String(), "planID", plan.ID, "requestIdentity", x.requestID)
			return s.finish(ctx, op, o(op, inst, http.StatusCreated), s.lookInstance(id))
		}
		if err != nil {
			return 0, nil, err
		}
		if inst.DeletionTimestamp != nil {
			return 0, nil, concurrencyError("The instance is being deleted.")
		}
		if !sameProvision(inst, &req, ctxJSON, params) {
			return 0, nil, conflict("An instance with this id already exists with different attributes.")
		}
		op, p := instanceProgress(inst)
		switch {
		case op.Type == OpDelete:
			return 0, nil, concurrencyError("The instance is being deleted.")
		case op.Type == OpCreate && p.running():
			if plan.Async && !async {
				return 0, nil, asyncRequired("service plan")
			}
			return s.finish(ctx, op, o(op, inst, http.StatusOK), s.lookInstance(id))
		case op.Type == OpCreate && p.state == stateFailed:
			// Provisioning failed: the identical request provisions again.
			if err := checkNew(); err != nil {
				return 0, nil, err
			}
			next := op.next(OpCreate)
			obj, err := s.startOperation(ctx, inst, next, osbv1alpha1.StateInQueue, x,
				func(o client.Object) {
					resetInstanceStatus(&o.(*osbv1alpha1.SFServiceInstance).Status, osbv1alpha1.StateInQueue)
				},
				nil, s.refreshInstance(id))
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				return 0, nil, err
			}
			s.log.V(1).Info("Provision restarted after a failure", "instanceID", id, "operation", next.String(), "requestIdentity", x.requestID)
			return s.finish(ctx, next, o(next, obj.(*osbv1alpha1.SFServiceInstance), http.StatusCreated), s.lookInstance(id))
		case op.Type == OpUpdate && p.running():
			return 0, nil, concurrencyError("An update of the instance is in progress.")
		default:
			// Provisioned (and perhaps updated since): nothing to do.
			return http.StatusOK, provisionResponse{DashboardURL: dashboardURL(plan, inst)}, nil
		}
	}
	return 0, nil, errTooManyConflicts()
}

// setInitialState writes the state of a just-created object unless the
// provisioner already wrote one. A failure is only logged: an empty state
// means the same as in_queue to the broker and the provisioner.
func (s *Server) setInitialState(ctx context.Context, obj client.Object, set func(client.Object) bool, refresh func() (client.Object, error)) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if !set(obj) {
			return
		}
		err := s.store.UpdateStatus(ctx, obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			s.log.Error(err, "Cannot record the initial state; the provisioner treats an empty state the same", "object", client.ObjectKeyFromObject(obj))
			return
		}
		if obj, err = refresh(); err != nil {
			return
		}
	}
}

func maintenanceConflict(plan *catalog.Plan) *Error {
	if plan.MaintenanceVersion == "" {
		return newError(http.StatusUnprocessableEntity, CodeMaintenanceInfoConflict,
			"The service plan has no maintenance_info; fetch the catalog again.")
	}
	return newError(http.StatusUnprocessableEntity, CodeMaintenanceInfoConflict,
		"The maintenance information for the requested service plan has changed (the catalog has version %q); fetch the catalog again.", plan.MaintenanceVersion)
}

// newInstance builds the SFServiceInstance that records a provision
// request.
func newInstance(id string, req *provisionRequest, ctxJSON, params json.RawMessage, plan *catalog.Plan, x *exchange) *osbv1alpha1.SFServiceInstance {
	key := InstanceKey(id)
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
			Context:          rawExtension(ctxJSON),
			OrganizationGUID: req.OrganizationGUID,
			SpaceGUID:        req.SpaceGUID,
			Parameters:       rawExtension(params),
		},
	}
	version := plan.MaintenanceVersion
	if req.MaintenanceInfo != nil {
		version = req.MaintenanceInfo.Version
	}
	if version != "" {
		inst.Annotations[AnnotationMaintenanceVersion] = version
	}
	markOperation(inst, Operation{Type: OpCreate, Seq: 1}, osbv1alpha1.StateInQueue, x)
	return inst
}

// sameProvision reports whether a provision request asks for exactly the
// instance that is stored.
func sameProvision(inst *osbv1alpha1.SFServiceInstance, req *provisionRequest, ctxJSON, params json.RawMessage) bool {
	sp := &inst.Spec
	if sp.ServiceID != req.ServiceID || sp.PlanID != req.PlanID ||
		sp.OrganizationGUID != req.OrganizationGUID || sp.SpaceGUID != req.SpaceGUID ||
		!sameObject(rawBytes(sp.Context), ctxJSON) || !sameObject(rawBytes(sp.Parameters), params) {
		return false
	}
	if mi := req.MaintenanceInfo; mi != nil && mi.Version != inst.Annotations[AnnotationMaintenanceVersion] {
		return false
	}
	return true
}

// update answers PATCH /v2/service_instances/:instance_id.
func (s *Server) update(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	id, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	q, err := parseQuery(r)
	if err != nil {
		return 0, nil, err
	}
	async, err := q.acceptsIncomplete()
	if err != nil {
		return 0, nil, err
	}
	var req updateRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.ServiceID == "" {
		return 0, nil, badRequest("service_id is required.")
	}
	if req.MaintenanceInfo != nil && req.MaintenanceInfo.Version == "" {
		return 0, nil, badRequest("maintenance_info.version is required when maintenance_info is sent.")
	}
	ctxJSON, err := objectField(req.Context, "context")
	if err != nil {
		return 0, nil, err
	}
	params, err := objectField(req.Parameters, "parameters")
	if err != nil {
		return 0, nil, err
	}
	previous, err := objectField(req.PreviousValues, "previous_values")
	if err != nil {
		return 0, nil, err
	}
	if err := checkPlatform(x.identity, ctxJSON); err != nil {
		return 0, nil, err
	}
	snap := s.catalog.Snapshot()
	svc := snap.Service(req.ServiceID)
	if svc == nil {
		return 0, nil, badRequest("service_id %q is not a service offering of this broker's catalog.", truncate(req.ServiceID, 100))
	}

	for attempt := 0; attempt < maxAttempts; attempt++ {
		inst, err := s.getInstance(ctx, id, Fresh)
		if apierrors.IsNotFound(err) {
			return 0, nil, notFound("The service instance does not exist.")
		}
		if err != nil {
			return 0, nil, err
		}
		if inst.Spec.ServiceID != req.ServiceID {
			return 0, nil, badRequest("service_id %q is not the service offering of the instance.", truncate(req.ServiceID, 100))
		}
		op, p := instanceProgress(inst)
		switch {
		case p.gone:
			return 0, nil, notFound("The service instance does not exist.")
		case op.Type == OpDelete:
			return 0, nil, concurrencyError("The instance is being deleted.")
		case op.Type == OpCreate && p.running():
			return 0, nil, concurrencyError("The instance is being provisioned.")
		case op.Type == OpCreate && p.state == stateFailed:
			return 0, nil, unprocessable("The instance could not be provisioned, so it cannot be updated; deprovision it.")
		}
		targetID := inst.Spec.PlanID
		if req.PlanID != "" {
			targetID = req.PlanID
		}
		target := snap.Plan(targetID)
		if target == nil || target.ServiceID != svc.ID {
			if req.PlanID != "" {
				return 0, nil, badRequest("plan_id %q is not a plan of service offering %q.", truncate(req.PlanID, 100), svc.Name)
			}
			return 0, nil, unprocessable("The instance's plan %q is no longer offered; change to another plan.", inst.Spec.PlanID)
		}
		planChange := targetID != inst.Spec.PlanID
		if planChange {
			current := snap.Plan(inst.Spec.PlanID)
			if current != nil && !current.PlanUpdatable {
				return 0, nil, unprocessable("The instance's plan does not allow plan changes.")
			}
			if len(target.UpdatePredecessors) > 0 && !slices.Contains(target.UpdatePredecessors, inst.Spec.PlanID) {
				return 0, nil, unprocessable("Instances of plan %q cannot change to plan %q.", inst.Spec.PlanID, target.Name)
			}
		}
		storedVersion := inst.Annotations[AnnotationMaintenanceVersion]
		if mi := req.MaintenanceInfo; mi != nil && mi.Version != target.MaintenanceVersion {
			return 0, nil, maintenanceConflict(target)
		}
		maintenanceChange := req.MaintenanceInfo != nil && req.MaintenanceInfo.Version != storedVersion
		contextChange := ctxJSON != nil && !sameObject(rawBytes(inst.Spec.Context), ctxJSON)
		if params != nil {
			if err := target.UpdateSchema.Validate(withoutNulls(params)); err != nil {
				return 0, nil, badRequest("parameters do not match the plan's schema: %v.", err)
			}
		}
		// The spec the update asks for.
		mutate := func(o client.Object) error {
			in := o.(*osbv1alpha1.SFServiceInstance)
			in.Spec.PlanID = targetID
			if params != nil {
				merged, err := mergePatch(rawBytes(in.Spec.Parameters), params)
				if err != nil {
					return err
				}
				in.Spec.Parameters = rawExtension(merged)
			}
			if ctxJSON != nil {
				in.Spec.Context = rawExtension(ctxJSON)
			}
			if previous != nil {
				in.Spec.PreviousValues = rawExtension(previous)
			}
			version := storedVersion
			switch {
			case req.MaintenanceInfo != nil:
				version = req.MaintenanceInfo.Version
			case planChange:
				version = target.MaintenanceVersion
			}
			if version != "" {
				in.Annotations[AnnotationMaintenanceVersion] = version
			} else {
				delete(in.Annotations, AnnotationMaintenanceVersion)
			}
			return nil
		}
		o := outcome{
			async:      async,
			asyncOnly:  target.Async,
			doneStatus: http.StatusOK,
			done: func(obj client.Object) (any, error) {
				return provisionResponse{DashboardURL: dashboardURL(target, obj.(*osbv1alpha1.SFServiceInstance))}, nil
			},
			failed: func(p progress) *Error {
				e := newError(http.StatusInternalServerError, "", "The update failed: %s", p.description)
				e.InstanceUsable, e.UpdateRepeatable = p.instanceUsable, p.updateRepeatable
				return e
			},
		}
		if op.Type == OpUpdate && p.running() {
			// A re-sent update gets the operation that is running; any
			// other update must wait for it.
			want := inst.DeepCopy()
			if err := mutate(want); err != nil {
				return 0, nil, err
			}
			if !sameUpdate(inst, want) {
				return 0, nil, concurrencyError("Another update of the instance is in progress.")
			}
			if target.Async && !async {
				return 0, nil, asyncRequired("service plan")
			}
			o.accepted = provisionResponse{DashboardURL: dashboardURL(target, inst), Operation: op.String()}
			return s.finish(ctx, op, o, s.lookInstance(id))
		}
		if !planChange && params == nil && !maintenanceChange && !contextChange {
			return http.StatusOK, emptyObject, nil
		}
		if contextChange && !planChange && params == nil && !maintenanceChange && !svc.AllowContextUpdates {
			return 0, nil, unprocessable("The service offering does not accept updates of the context alone.")
		}
		if target.Async && !async {
			return 0, nil, asyncRequired("service plan")
		}
		next := op.next(OpUpdate)
		obj, err := s.startOperation(ctx, inst, next, osbv1alpha1.StateUpdate, x,
			func(o client.Object) {
				resetInstanceStatus(&o.(*osbv1alpha1.SFServiceInstance).Status, osbv1alpha1.StateUpdate)
			},
			mutate, s.refreshInstance(id))
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		s.log.V(1).Info("Update accepted", "instanceID", id, "operation", next.String(), "planID", targetID, "requestIdentity", x.requestID)
		o.accepted = provisionResponse{DashboardURL: dashboardURL(target, obj.(*osbv1alpha1.SFServiceInstance)), Operation: next.String()}
		return s.finish(ctx, next, o, s.lookInstance(id))
	}
	return 0, nil, errTooManyConflicts()
}

// sameUpdate reports whether want (the running update with a re-sent
// request applied) asks for nothing new.
func sameUpdate(running, want *osbv1alpha1.SFServiceInstance) bool {
	a, b := &running.Spec, &want.Spec
	return a.PlanID == b.PlanID &&
		sameObject(rawBytes(a.Parameters), rawBytes(b.Parameters)) &&
		sameObject(rawBytes(a.Context), rawBytes(b.Context)) &&
		running.Annotations[AnnotationMaintenanceVersion] == want.Annotations[AnnotationMaintenanceVersion]
}

// fetchInstance answers GET /v2/service_instances/:instance_id.
func (s *Server) fetchInstance(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	id, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	q, err := parseQuery(r)
	if err != nil {
		return 0, nil, err
	}
	for _, h := range []string{"service_id", "plan_id"} {
		if _, err := q.hint(h); err != nil {
			return 0, nil, err
		}
	}
	inst, err := s.getInstance(ctx, id, Fresh)
	if apierrors.IsNotFound(err) {
		return 0, nil, notFound("The service instance does not exist.")
	}
	if err != nil {
		return 0, nil, err
	}
	snap := s.catalog.Snapshot()
	if svc := snap.Service(inst.Spec.ServiceID); svc != nil && !svc.InstancesRetrievable {
		return 0, nil, badRequest("The service offering does not support fetching instances (instances_retrievable is false).")
	}
	op, p := instanceProgress(inst)
	switch {
	case p.gone:
		return 0, nil, notFound("The service instance does not exist.")
	case op.Type == OpDelete:
		return 0, nil, concurrencyError("The instance is being deleted.")
	case op.Type == OpCreate && p.running():
		return 0, nil, notFound("The service instance is still being provisioned.")
	case op.Type == OpCreate && p.state == stateFailed:
		return 0, nil, notFound("The service instance could not be provisioned.")
	case op.Type == OpUpdate && p.running():
		return 0, nil, concurrencyError("The instance is being updated.")
	}
	resp := fetchInstanceResponse{
		ServiceID:    inst.Spec.ServiceID,
		PlanID:       inst.Spec.PlanID,
		DashboardURL: dashboardURL(snap.Plan(inst.Spec.PlanID), inst),
		Parameters:   rawBytes(inst.Spec.Parameters),
	}
	if v := inst.Annotations[AnnotationMaintenanceVersion]; v != "" {
		resp.MaintenanceInfo = &maintenanceInfo{Version: v}
		if plan := snap.Plan(inst.Spec.PlanID); plan != nil && plan.MaintenanceVersion == v {
			resp.MaintenanceInfo.Description = plan.MaintenanceDescription
		}
	}
	if m := inst.Spec.Metadata; m != nil && (len(m.Labels) > 0 || len(m.Attributes) > 0) {
		resp.Metadata = &instanceMeta{Labels: m.Labels, Attributes: m.Attributes}
	}
	return http.StatusOK, resp, nil
}

// deprovision answers DELETE /v2/service_instances/:instance_id.
func (s *Server) deprovision(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	id, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	q, err := parseQuery(r)
	if err != nil {
		return 0, nil, err
	}
	serviceID, err := q.required("service_id")
	if err != nil {
		return 0, nil, err
	}
	if _, err := q.required("plan_id"); err != nil {
		return 0, nil, err
	}
	async, err := q.acceptsIncomplete()
	if err != nil {
		return 0, nil, err
	}
	snap := s.catalog.Snapshot()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		inst, err := s.getInstance(ctx, id, Fresh)
		if apierrors.IsNotFound(err) {
			return http.StatusGone, emptyObject, nil
		}
		if err != nil {
			return 0, nil, err
		}
		if inst.Spec.ServiceID != serviceID {
			return 0, nil, badRequest("service_id %q is not the service offering of the instance.", truncate(serviceID, 100))
		}
		op, p := instanceProgress(inst)
		if p.gone {
			return http.StatusGone, emptyObject, nil
		}
		// A plan removed from the catalog can still be deprovisioned;
		// without it the broker waits as for a synchronous plan.
		plan := snap.Plan(inst.Spec.PlanID)
		asyncOnly := plan != nil && plan.Async
		if asyncOnly && !async {
			return 0, nil, asyncRequired("service plan")
		}
		o := outcome{
			async:      async,
			asyncOnly:  asyncOnly,
			doneStatus: http.StatusOK,
			done:       func(client.Object) (any, error) { return emptyObject, nil },
			failed: func(p progress) *Error {
				e := newError(http.StatusInternalServerError, "", "Deprovisioning failed: %s", p.description)
				e.InstanceUsable = p.instanceUsable
				return e
			},
		}
		if inst.DeletionTimestamp != nil {
			if p.state == stateFailed {
				// The deletion failed: the re-sent request tries again.
				next := op.next(OpDelete)
				if _, err := s.startOperation(ctx, inst, next, osbv1alpha1.StateDelete, x,
					func(o client.Object) {
						resetInstanceStatus(&o.(*osbv1alpha1.SFServiceInstance).Status, osbv1alpha1.StateDelete)
					}, nil, s.refreshInstance(id)); err != nil {
					if apierrors.IsConflict(err) {
						continue
					}
					return 0, nil, err
				}
				op = next
			}
			o.accepted = operationResponse{Operation: op.String()}
			return s.finish(ctx, op, o, s.lookInstance(id))
		}
		var bindings osbv1alpha1.SFServiceBindingList
		if err := s.store.List(ctx, inst.Namespace, &bindings); err != nil {
			return 0, nil, err
		}
		for i := range bindings.Items {
			b := &bindings.Items[i]
			if b.Spec.InstanceID != id {
				continue
			}
			if _, bp := bindingProgress(b); bp.running() {
				return 0, nil, concurrencyError("A binding of the instance is being created or deleted.")
			}
		}
		// Bindings the platform did not delete first go with the instance.
		for i := range bindings.Items {
			b := &bindings.Items[i]
			if b.Spec.InstanceID != id || b.DeletionTimestamp != nil {
				continue
			}
			if err := s.deleteObject(ctx, b, currentOperation(b).next(OpDelete), x, setBindingDeleteState,
				s.refreshBinding(id, b.Spec.ID)); err != nil && !apierrors.IsNotFound(err) {
				return 0, nil, err
			}
		}
		next := op.next(OpDelete)
		if op.Type == OpDelete {
			// A previous attempt recorded the operation but did not
			// delete.
			next = op
		}
		if err := s.deleteObject(ctx, inst, next, x, setInstanceDeleteState, s.refreshInstance(id)); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return 0, nil, err
		}
		s.log.V(1).Info("Deprovision accepted", "instanceID", id, "operation", next.String(), "requestIdentity", x.requestID)
		o.accepted = operationResponse{Operation: next.String()}
		return s.finish(ctx, next, o, s.lookInstance(id))
	}
	return 0, nil, errTooManyConflicts()
}

// setInstanceDeleteState sets state "delete" on an instance being deleted,
// unless the deletion already moved on.
func setInstanceDeleteState(o client.Object) bool {
	inst := o.(*osbv1alpha1.SFServiceInstance)
	switch {
	case deletionFinished(inst), inst.Status.State == osbv1alpha1.StateDelete, inst.Status.State == osbv1alpha1.StateInProgress:
		return false
	}
	resetInstanceStatus(&inst.Status, osbv1alpha1.StateDelete)
	return true
}
