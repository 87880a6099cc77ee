package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

var bindingResource = osbv1alpha1.GroupVersion.WithResource("sfservicebindings").GroupResource()

// getBinding reads the binding bindingID of instance instanceID.
func (s *Server) getBinding(ctx context.Context, instanceID, bindingID string, read Read) (*osbv1alpha1.SFServiceBinding, error) {
	key := BindingKey(instanceID, bindingID)
	b := &osbv1alpha1.SFServiceBinding{}
	if err := s.store.Get(ctx, key, b, read); err != nil {
		return nil, err
	}
	if b.Spec.ID != bindingID || b.Spec.InstanceID != instanceID {
		return nil, apierrors.NewNotFound(bindingResource, key.Name)
	}
	return b, nil
}

func (s *Server) lookBinding(instanceID, bindingID string) func(context.Context, Read) (client.Object, Operation, progress, error) {
	return func(ctx context.Context, read Read) (client.Object, Operation, progress, error) {
		b, err := s.getBinding(ctx, instanceID, bindingID, read)
		if err != nil {
			return nil, Operation{}, progress{}, err
		}
		op, p := bindingProgress(b)
		return b, op, p, nil
	}
}

func (s *Server) refreshBinding(instanceID, bindingID string) func() (client.Object, error) {
	return func() (client.Object, error) {
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		return s.getBinding(ctx, instanceID, bindingID, Fresh)
	}
}

// bind answers PUT /v2/service_instances/:instance_id/service_bindings/:binding_id.
func (s *Server) bind(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	instanceID, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	bindingID, err := pathID(r, "binding_id")
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
	var req bindRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	switch {
	case req.ServiceID == "":
		return 0, nil, badRequest("service_id is required.")
	case req.PlanID == "":
		return 0, nil, badRequest("plan_id is required.")
	}
	ctxJSON, err := objectField(req.Context, "context")
	if err != nil {
		return 0, nil, err
	}
	params, err := objectField(req.Parameters, "parameters")
	if err != nil {
		return 0, nil, err
	}
	resourceJSON, err := objectField(req.BindResource, "bind_resource")
	if err != nil {
		return 0, nil, err
	}
	var res bindResource
	if resourceJSON != nil {
		if err := json.Unmarshal(resourceJSON, &res); err != nil {
			return 0, nil, badRequest("bind_resource.app_guid and bind_resource.route must be strings.")
		}
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
	if !plan.Bindable {
		return 0, nil, badRequest("Service plan %q is not bindable.", plan.Name)
	}
	if req.PredecessorBindingID != "" {
		return 0, nil, badRequest("Service plan %q does not support binding rotation (predecessor_binding_id).", plan.Name)
	}
	inst, err := s.getInstance(ctx, instanceID, Fresh)
	if apierrors.IsNotFound(err) {
		return 0, nil, notFound("The service instance does not exist.")
	}
	if err != nil {
		return 0, nil, err
	}
	if inst.Spec.ServiceID != req.ServiceID || inst.Spec.PlanID != req.PlanID {
		return 0, nil, badRequest("service_id and plan_id must be those of the instance (plan %q).", inst.Spec.PlanID)
	}
	iop, ip := instanceProgress(inst)
	switch {
	case ip.gone:
		return 0, nil, notFound("The service instance does not exist.")
	case iop.Type == OpDelete:
		return 0, nil, concurrencyError("The instance is being deleted.")
	case ip.running():
		return 0, nil, concurrencyError("An operation on the instance is in progress.")
	case iop.Type == OpCreate && ip.state == stateFailed:
		return 0, nil, unprocessable("The instance could not be provisioned, so it cannot be bound.")
	}
	appGUID := res.AppGUID
	if appGUID == "" {
		appGUID = req.AppGUID
	}
	checkNew := func() error {
		if err := plan.BindSchema.Validate(params); err != nil {
			return badRequest("parameters do not match the plan's binding schema: %v.", err)
		}
		if plan.RequiresApp && appGUID == "" {
			return newError(http.StatusUnprocessableEntity, CodeRequiresApp,
				"This service supports generation of credentials through binding an application only: send bind_resource.app_guid.")
		}
		if plan.AsyncBinding && !async {
			return asyncRequired("service binding")
		}
		return nil
	}
	o := func(op Operation, doneStatus int) outcome {
		return outcome{
			async:      async,
			asyncOnly:  plan.AsyncBinding,
			doneStatus: doneStatus,
			accepted:   operationResponse{Operation: op.String()},
			done: func(obj client.Object) (any, error) {
				return s.bindingBody(ctx, obj.(*osbv1alpha1.SFServiceBinding), nil)
			},
			failed: func(p progress) *Error {
				return newError(http.StatusInternalServerError, "", "Binding failed: %s", p.description)
			},
		}
	}

	for attempt := 0; attempt < maxAttempts; attempt++ {
		b, err := s.getBinding(ctx, instanceID, bindingID, Fresh)
		if apierrors.IsNotFound(err) {
			if err := checkNew(); err != nil {
				return 0, nil, err
			}
			b = newBinding(instanceID, bindingID, &req, appGUID, ctxJSON, params, resourceJSON, async, x)
			if err := s.store.Create(ctx, b); err != nil {
				if apierrors.IsAlreadyExists(err) {
					if attempt > 0 {
						return 0, nil, conflict("A binding with this id already exists under another id's name.")
					}
					continue
				}
				return 0, nil, err
			}
			s.setInitialState(ctx, b, func(o client.Object) bool {
				st := &o.(*osbv1alpha1.SFServiceBinding).Status
				if st.State != "" {
					return false
				}
				st.State = osbv1alpha1.StateInQueue
				return true
			}, s.refreshBinding(instanceID, bindingID))
			op := Operation{Type: OpCreate, Seq: 1}
			s.log.V(1).Info("Bind accepted", "instanceID", instanceID, "bindingID", bindingID, "operation", op.String(), "requestIdentity", x.requestID)
			return s.finish(ctx, op, o(op, http.StatusCreated), s.lookBinding(instanceID, bindingID))
		}
		if err != nil {
			return 0, nil, err
		}
		if b.DeletionTimestamp != nil {
			return 0, nil, concurrencyError("The binding is being deleted.")
		}
		if !sameBinding(b, &req, appGUID, ctxJSON, params, resourceJSON) {
			return 0, nil, conflict("A binding with this id already exists with different attributes.")
		}
		op, p := bindingProgress(b)
		switch {
		case op.Type == OpDelete:
			return 0, nil, concurrencyError("The binding is being deleted.")
		case p.running():
			if plan.AsyncBinding && !async {
				return 0, nil, asyncRequired("service binding")
			}
			return s.finish(ctx, op, o(op, http.StatusOK), s.lookBinding(instanceID, bindingID))
		case p.state == stateFailed:
			if err := checkNew(); err != nil {
				return 0, nil, err
			}
			next := op.next(OpCreate)
			if _, err := s.startOperation(ctx, b, next, osbv1alpha1.StateInQueue, x,
				func(o client.Object) {
					resetBindingStatus(&o.(*osbv1alpha1.SFServiceBinding).Status, osbv1alpha1.StateInQueue)
				},
				nil, s.refreshBinding(instanceID, bindingID)); err != nil {
				if apierrors.IsConflict(err) {
					continue
				}
				return 0, nil, err
			}
			s.log.V(1).Info("Bind restarted after a failure", "instanceID", instanceID, "bindingID", bindingID, "operation", next.String(), "requestIdentity", x.requestID)
			return s.finish(ctx, next, o(next, http.StatusCreated), s.lookBinding(instanceID, bindingID))
		default:
			body, err := s.bindingBody(ctx, b, nil)
			if err != nil {
				return 0, nil, err
			}
			return http.StatusOK, body, nil
		}
	}
	return 0, nil, errTooManyConflicts()
}

// newBinding builds the SFServiceBinding that records a bind request.
func newBinding(instanceID, bindingID string, req *bindRequest, appGUID string, ctxJSON, params, resourceJSON json.RawMessage, async bool, x *exchange) *osbv1alpha1.SFServiceBinding {
	key := BindingKey(instanceID, bindingID)
	b := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:       key.Name,
			Namespace:  key.Namespace,
			Finalizers: []string{osbv1alpha1.FinalizerBroker},
		},
		Spec: osbv1alpha1.SFServiceBindingSpec{
			ID:                bindingID,
			InstanceID:        instanceID,
			PlanID:            req.PlanID,
			ServiceID:         req.ServiceID,
			AppGUID:           appGUID,
			BindResource:      rawExtension(resourceJSON),
			Context:           rawExtension(ctxJSON),
			Parameters:        rawExtension(params),
			AcceptsIncomplete: async,
		},
	}
	markOperation(b, Operation{Type: OpCreate, Seq: 1}, osbv1alpha1.StateInQueue, x)
	return b
}

// sameBinding reports whether a bind request asks for exactly the binding
// that is stored.
func sameBinding(b *osbv1alpha1.SFServiceBinding, req *bindRequest, appGUID string, ctxJSON, params, resourceJSON json.RawMessage) bool {
	sp := &b.Spec
	return sp.ServiceID == req.ServiceID && sp.PlanID == req.PlanID && sp.AppGUID == appGUID &&
		sameObject(rawBytes(sp.BindResource), resourceJSON) &&
		sameObject(rawBytes(sp.Context), ctxJSON) &&
		sameObject(rawBytes(sp.Parameters), params)
}

// bindingBody builds the body of a bind response or fetched binding from
// the provisioner's response Secret: the OSB fields it holds, and the
// binding's parameters when withParameters is set. It fails when the
// Secret is missing or unreadable; its content is never logged.
func (s *Server) bindingBody(ctx context.Context, b *osbv1alpha1.SFServiceBinding, withParameters json.RawMessage) (any, error) {
	out := map[string]json.RawMessage{}
	if b.Status.Response != nil && b.Status.Response.SecretRef != "" {
		data, err := s.store.BindResponse(ctx, b.Namespace, b.Status.Response.SecretRef)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &Error{Status: http.StatusInternalServerError, Description: "The binding's response Secret is missing; see the provisioner."}
			}
			return nil, err
		}
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(data, &resp); err != nil {
			return nil, &Error{Status: http.StatusInternalServerError, Description: "The binding's response Secret does not hold a JSON object; see the provisioner."}
		}
		for _, f := range bindingFields {
			if v, ok := resp[f]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				out[f] = v
			}
		}
	}
	if withParameters != nil {
		out["parameters"] = withParameters
	}
	return out, nil
}

// fetchBinding answers GET .../service_bindings/:binding_id.
func (s *Server) fetchBinding(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	instanceID, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	bindingID, err := pathID(r, "binding_id")
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
	b, err := s.getBinding(ctx, instanceID, bindingID, Fresh)
	if apierrors.IsNotFound(err) {
		return 0, nil, notFound("The service binding does not exist.")
	}
	if err != nil {
		return 0, nil, err
	}
	if svc := s.catalog.Snapshot().Service(b.Spec.ServiceID); svc != nil && !svc.BindingsRetrievable {
		return 0, nil, badRequest("The service offering does not support fetching bindings (bindings_retrievable is false).")
	}
	op, p := bindingProgress(b)
	switch {
	case op.Type == OpDelete:
		return 0, nil, notFound("The service binding is being deleted.")
	case p.running():
		return 0, nil, notFound("The service binding is still being created.")
	case p.state == stateFailed:
		return 0, nil, notFound("The service binding could not be created.")
	}
	params := rawBytes(b.Spec.Parameters)
	if params == nil {
		params = json.RawMessage("{}")
	}
	body, err := s.bindingBody(ctx, b, params)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// unbind answers DELETE .../service_bindings/:binding_id.
func (s *Server) unbind(x *exchange, r *http.Request) (int, any, error) {
	ctx := r.Context()
	instanceID, err := pathID(r, "instance_id")
	if err != nil {
		return 0, nil, err
	}
	bindingID, err := pathID(r, "binding_id")
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
		b, err := s.getBinding(ctx, instanceID, bindingID, Fresh)
		if apierrors.IsNotFound(err) {
			return http.StatusGone, emptyObject, nil
		}
		if err != nil {
			return 0, nil, err
		}
		if b.Spec.ServiceID != serviceID {
			return 0, nil, badRequest("service_id %q is not the service offering of the binding.", truncate(serviceID, 100))
		}
		op, p := bindingProgress(b)
		if p.gone {
			return http.StatusGone, emptyObject, nil
		}
		plan := snap.Plan(b.Spec.PlanID)
		asyncOnly := plan != nil && plan.AsyncBinding
		if asyncOnly && !async {
			return 0, nil, asyncRequired("service binding")
		}
		o := outcome{
			async:      async,
			asyncOnly:  asyncOnly,
			doneStatus: http.StatusOK,
			done:       func(client.Object) (any, error) { return emptyObject, nil },
			failed: func(p progress) *Error {
				return newError(http.StatusInternalServerError, "", "Unbinding failed: %s", p.description)
			},
		}
		if b.DeletionTimestamp != nil {
			if p.state == stateFailed {
				next := op.next(OpDelete)
				if _, err := s.startOperation(ctx, b, next, osbv1alpha1.StateDelete, x,
					func(o client.Object) {
						resetBindingStatus(&o.(*osbv1alpha1.SFServiceBinding).Status, osbv1alpha1.StateDelete)
					}, nil, s.refreshBinding(instanceID, bindingID)); err != nil {
					if apierrors.IsConflict(err) {
						continue
					}
					return 0, nil, err
				}
				op = next
			}
			o.accepted = operationResponse{Operation: op.String()}
			return s.finish(ctx, op, o, s.lookBinding(instanceID, bindingID))
		}
		if op.Type == OpCreate && p.running() {
			return 0, nil, concurrencyError("The binding is still being created; unbind it once that finished.")
		}
		inst, err := s.getInstance(ctx, instanceID, Fresh)
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, nil, err
		}
		if inst != nil && inst.DeletionTimestamp != nil {
			return 0, nil, concurrencyError("The instance of the binding is being deleted.")
		}
		next := op.next(OpDelete)
		if op.Type == OpDelete {
			next = op
		}
		if err := s.deleteObject(ctx, b, next, x, setBindingDeleteState, s.refreshBinding(instanceID, bindingID)); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return 0, nil, err
		}
		s.log.V(1).Info("Unbind accepted", "instanceID", instanceID, "bindingID", bindingID, "operation", next.String(), "requestIdentity", x.requestID)
		o.accepted = operationResponse{Operation: next.String()}
		return s.finish(ctx, next, o, s.lookBinding(instanceID, bindingID))
	}
	return 0, nil, errTooManyConflicts()
}

// setBindingDeleteState sets state "delete" on a binding being deleted,
// unless the deletion already moved on.
func setBindingDeleteState(o client.Object) bool {
	b := o.(*osbv1alpha1.SFServiceBinding)
	switch {
	case deletionFinished(b), b.Status.State == osbv1alpha1.StateDelete, b.Status.State == osbv1alpha1.StateInProgress:
		return false
	}
	resetBindingStatus(&b.Status, osbv1alpha1.StateDelete)
	return true
}
