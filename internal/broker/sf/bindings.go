package sf

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

var bindingResource = osbv1alpha1.GroupVersion.WithResource("sfservicebindings").GroupResource()

// getBinding reads the binding bindingID of instance instanceID. One that
// records other ids, or lives in a namespace the broker does not own for
// the instance, counts as missing: its response Secret is never read.
func (s *Backend) getBinding(ctx context.Context, instanceID, bindingID string, read Read) (*osbv1alpha1.SFServiceBinding, error) {
	key := BindingKey(instanceID, bindingID)
	b := &osbv1alpha1.SFServiceBinding{}
	if err := s.store.Get(ctx, key, b, read); err != nil {
		return nil, err
	}
	if b.Spec.ID != bindingID || b.Spec.InstanceID != instanceID {
		return nil, apierrors.NewNotFound(bindingResource, key.Name)
	}
	if err := checkNamespace(ctx, s.store, instanceID); err != nil {
		return nil, err
	}
	return b, nil
}

func (s *Backend) lookBinding(instanceID, bindingID string) func(context.Context, Read) (client.Object, Operation, progress, error) {
	return func(ctx context.Context, read Read) (client.Object, Operation, progress, error) {
		b, err := s.getBinding(ctx, instanceID, bindingID, read)
		if err != nil {
			return nil, Operation{}, progress{}, err
		}
		op, p := bindingProgress(b)
		return b, op, p, nil
	}
}

func (s *Backend) refreshBinding(instanceID, bindingID string) func() (client.Object, error) {
	return func() (client.Object, error) {
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		return s.getBinding(ctx, instanceID, bindingID, Fresh)
	}
}

// bindInput is a bind request, checked against itself and the catalog.
type bindInput struct {
	req                           *osb.BindRequest
	appGUID                       string
	ctxJSON, params, resourceJSON json.RawMessage
	plan                          *catalog.Plan
}

// parseBind reads and checks the body of a bind request.
func (s *Backend) parseBind(c *osbCall, req *osb.BindRequest) (*bindInput, error) {
	in := &bindInput{req: req}
	switch {
	case req.ServiceID == "":
		return nil, osb.BadRequest("service_id is required.")
	case req.PlanID == "":
		return nil, osb.BadRequest("plan_id is required.")
	}
	var err error
	if in.ctxJSON, err = osb.ObjectField(req.Context, "context"); err != nil {
		return nil, err
	}
	if in.params, err = osb.ObjectField(req.Parameters, "parameters"); err != nil {
		return nil, err
	}
	if in.resourceJSON, err = osb.ObjectField(req.BindResource, "bind_resource"); err != nil {
		return nil, err
	}
	var res bindResource
	if in.resourceJSON != nil {
		if err := json.Unmarshal(in.resourceJSON, &res); err != nil {
			return nil, osb.BadRequest("bind_resource.app_guid and bind_resource.route must be strings.")
		}
	}
	if in.appGUID = res.AppGUID; in.appGUID == "" {
		in.appGUID = req.AppGUID
	}
	if err := osb.CheckPlatform(c.x.Identity, in.ctxJSON); err != nil {
		return nil, err
	}
	if in.plan, err = s.servicePlan(req.ServiceID, req.PlanID); err != nil {
		return nil, err
	}
	if !in.plan.Bindable {
		return nil, osb.BadRequest("Service plan %q is not bindable.", in.plan.Name)
	}
	if req.PredecessorBindingID != "" {
		return nil, osb.BadRequest("Service plan %q does not support binding rotation (predecessor_binding_id).", in.plan.Name)
	}
	return in, nil
}

// checkNew checks what only matters when the request creates the binding
// (anew, or again after a failure).
func (in *bindInput) checkNew(c *osbCall) error {
	if err := in.plan.BindSchema.Validate(in.params); err != nil {
		return osb.BadRequest("parameters do not match the plan's binding schema: %v.", err)
	}
	if in.plan.RequiresApp && in.appGUID == "" {
		return osb.NewError(http.StatusUnprocessableEntity, osb.CodeRequiresApp,
			"This service supports generation of credentials through binding an application only: send bind_resource.app_guid.")
	}
	if in.plan.AsyncBinding && !c.async {
		return osb.AsyncBindingRequired(c.x)
	}
	return nil
}

// bindOutcome is what a bind that started or joined op answers.
func (s *Backend) bindOutcome(c *osbCall, in *bindInput, op Operation, doneStatus int) outcome {
	return outcome{
		async:      c.async,
		asyncOnly:  in.plan.AsyncBinding,
		doneStatus: doneStatus,
		accepted:   osb.OperationResponse{Operation: op.String()},
		done: func(obj client.Object) (any, error) {
			return s.bindingBody(c.ctx, c.x.Version, obj.(*osbv1alpha1.SFServiceBinding), nil)
		},
		failed: func(p progress) *osb.Error {
			return osb.NewError(http.StatusInternalServerError, "", "Binding failed: %s", p.description)
		},
	}
}

// bindableInstance reads the instance of a bind request and checks that
// it can be bound now. It reads the cache first (never older than this
// broker's own writes of the instance): the platform binds an instance it
// has seen provisioned, through this cache. Only a refusal is confirmed on
// a fresh read, since the cache may lag behind the provisioner.
func (s *Backend) bindableInstance(c *osbCall, in *bindInput) error {
	if inst, err := s.getInstance(c.ctx, c.instanceID, Cached); err == nil && bindable(inst, in) == nil {
		return nil
	}
	inst, err := s.getInstance(c.ctx, c.instanceID, Fresh)
	if apierrors.IsNotFound(err) {
		return osb.NotFound("The service instance does not exist.")
	}
	if err != nil {
		return err
	}
	return bindable(inst, in)
}

// bindable checks that inst can be bound by the request in now.
func bindable(inst *osbv1alpha1.SFServiceInstance, in *bindInput) error {
	if inst.Spec.ServiceID != in.req.ServiceID || inst.Spec.PlanID != in.req.PlanID {
		return osb.BadRequest("service_id and plan_id must be those of the instance (plan %q).", inst.Spec.PlanID)
	}
	op, p := instanceProgress(inst)
	switch {
	case p.gone:
		return osb.NotFound("The service instance does not exist.")
	case op.Type == OpDelete:
		return osb.ConcurrencyError("The instance is being deleted.")
	case p.running():
		return osb.ConcurrencyError("An operation on the instance is in progress.")
	case op.Type == OpCreate && p.state == osb.StateFailed:
		return osb.Unprocessable("The instance could not be provisioned, so it cannot be bound.")
	}
	return nil
}

// Bind answers PUT .../service_bindings/:binding_id.
func (s *Backend) Bind(ctx context.Context, x *osb.Call, req *osb.BindRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, req.BindingID)
	in, err := s.parseBind(c, req)
	if err != nil {
		return 0, nil, err
	}
	if err := s.bindableInstance(c, in); err != nil {
		return 0, nil, err
	}
	t := s.bindingTarget(c.instanceID, c.bindingID)
	return retryConflicts(func(attempt int) (int, any, error) {
		b, err := readForCreate(attempt, func(read Read) (*osbv1alpha1.SFServiceBinding, error) {
			return s.getBinding(c.ctx, c.instanceID, c.bindingID, read)
		})
		switch {
		case apierrors.IsNotFound(err):
			return s.bindNew(c, t, in, nil, attempt)
		case err != nil:
			return 0, nil, err
		case deletionFinished(b):
			// The previous binding of this id is gone; only its
			// tombstone is left, which must not block the id.
			return s.bindNew(c, t, in, b, attempt)
		}
		return s.bindExisting(c, t, in, b)
	})
}

// bindNew creates the binding, in place of the tombstone of a deleted one
// when there is one, continuing its count of operations (see
// provisionNew).
func (s *Backend) bindNew(c *osbCall, t target, in *bindInput, tombstone *osbv1alpha1.SFServiceBinding, attempt int) (int, any, error) {
	if err := in.checkNew(c); err != nil {
		return 0, nil, err
	}
	op := Operation{Type: OpCreate, Seq: 1}
	var old client.Object
	if tombstone != nil {
		op, old = currentOperation(tombstone).next(OpCreate), tombstone
	}
	b := newBinding(c, in, op)
	if err := s.createNew(c, t, b, old, attempt); err != nil {
		return 0, nil, err
	}
	s.logDecision(c, t, "Bind accepted", "operation", op.String(), "reusedID", tombstone != nil)
	return s.finish(c.ctx, op, s.bindOutcome(c, in, op, http.StatusCreated), t)
}

// bindExisting answers a bind request for a binding that exists: a
// re-sent request joins the binding or binds again after a failure; an
// identical request for a created binding gets its response again.
func (s *Backend) bindExisting(c *osbCall, t target, in *bindInput, b *osbv1alpha1.SFServiceBinding) (int, any, error) {
	if b.DeletionTimestamp != nil {
		return 0, nil, osb.ConcurrencyError("The binding is being deleted.")
	}
	if !sameBinding(b, in) {
		return 0, nil, osb.Conflict("A binding with this id already exists with different attributes.")
	}
	op, p := bindingProgress(b)
	switch {
	case op.Type == OpDelete:
		return 0, nil, osb.ConcurrencyError("The binding is being deleted.")
	case p.running():
		if in.plan.AsyncBinding && !c.async {
			return 0, nil, osb.AsyncBindingRequired(c.x)
		}
		return s.finish(c.ctx, op, s.bindOutcome(c, in, op, http.StatusOK), t)
	case p.state == osb.StateFailed:
		if err := in.checkNew(c); err != nil {
			return 0, nil, err
		}
		next := op.next(OpCreate)
		if _, err := s.begin(c, t, b, next, osbv1alpha1.StateInQueue, nil); err != nil {
			return 0, nil, err
		}
		s.logDecision(c, t, "Bind restarted after a failure", "operation", next.String())
		return s.finish(c.ctx, next, s.bindOutcome(c, in, next, http.StatusCreated), t)
	}
	body, err := s.bindingBody(c.ctx, c.x.Version, b, nil)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// newBinding builds the SFServiceBinding that records a bind request, as
// the operation op.
func newBinding(c *osbCall, in *bindInput, op Operation) *osbv1alpha1.SFServiceBinding {
	key := BindingKey(c.instanceID, c.bindingID)
	b := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:      key.Name,
			Namespace: key.Namespace,
			// The provisioner's finalizer too: it would add it with a
			// write of its own before it renders the binding, one of
			// the few writes a binding costs. A binding deleted before
			// the provisioner saw it waits for the provisioner's
			// (empty) deprovision, as every binding does.
			Finalizers: []string{osbv1alpha1.FinalizerBroker, osbv1alpha1.FinalizerProvisioner},
		},
		Spec: osbv1alpha1.SFServiceBindingSpec{
			ID:                c.bindingID,
			InstanceID:        c.instanceID,
			PlanID:            in.req.PlanID,
			ServiceID:         in.req.ServiceID,
			AppGUID:           in.appGUID,
			BindResource:      rawExtension(in.resourceJSON),
			Context:           rawExtension(in.ctxJSON),
			Parameters:        rawExtension(in.params),
			AcceptsIncomplete: c.async,
		},
	}
	markOperation(b, op, osbv1alpha1.StateInQueue, c.x)
	return b
}

// sameBinding reports whether a bind request asks for exactly the binding
// that is stored.
func sameBinding(b *osbv1alpha1.SFServiceBinding, in *bindInput) bool {
	sp := &b.Spec
	return sp.ServiceID == in.req.ServiceID && sp.PlanID == in.req.PlanID && sp.AppGUID == in.appGUID &&
		osb.SameObject(rawBytes(sp.BindResource), in.resourceJSON) &&
		osb.SameObject(rawBytes(sp.Context), in.ctxJSON) &&
		osb.SameObject(rawBytes(sp.Parameters), in.params)
}

// bindingBody builds the body of a bind response or fetched binding from
// the provisioner's response Secret: the OSB fields it holds, and the
// binding's parameters when withParameters is set. It fails when the
// Secret is missing or unreadable; its content is never logged.
func (s *Backend) bindingBody(ctx context.Context, v osb.APIVersion, b *osbv1alpha1.SFServiceBinding, withParameters json.RawMessage) (any, error) {
	out := map[string]json.RawMessage{}
	if b.Status.Response != nil && b.Status.Response.SecretRef != "" {
		data, err := s.store.BindResponse(ctx, b.Namespace, b.Status.Response.SecretRef)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &osb.Error{Status: http.StatusInternalServerError, Description: "The binding's response Secret is missing; see the provisioner."}
			}
			return nil, err
		}
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(data, &resp); err != nil {
			return nil, &osb.Error{Status: http.StatusInternalServerError, Description: "The binding's response Secret does not hold a JSON object; see the provisioner."}
		}
		for _, f := range bindingFields {
			if since, ok := bindingFieldSince[f]; ok && v.Less(since) {
				continue
			}
			if value, ok := resp[f]; ok && !bytes.Equal(bytes.TrimSpace(value), []byte("null")) {
				out[f] = value
			}
		}
	}
	if withParameters != nil {
		out["parameters"] = withParameters
	}
	return out, nil
}

// FetchBinding answers GET .../service_bindings/:binding_id.
func (s *Backend) FetchBinding(ctx context.Context, x *osb.Call, req *osb.FetchRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, req.BindingID)
	b, err := s.getBinding(c.ctx, c.instanceID, c.bindingID, Fresh)
	if apierrors.IsNotFound(err) {
		return 0, nil, osb.NotFound("The service binding does not exist.")
	}
	if err != nil {
		return 0, nil, err
	}
	if svc := s.catalog.Snapshot().Service(b.Spec.ServiceID); svc != nil && !svc.BindingsRetrievable {
		return 0, nil, osb.BadRequest("The service offering does not support fetching bindings (bindings_retrievable is false).")
	}
	op, p := bindingProgress(b)
	switch {
	case op.Type == OpDelete:
		return 0, nil, osb.NotFound("The service binding is being deleted.")
	case p.running():
		return 0, nil, osb.NotFound("The service binding is still being created.")
	case p.state == osb.StateFailed:
		return 0, nil, osb.NotFound("The service binding could not be created.")
	}
	params := rawBytes(b.Spec.Parameters)
	if params == nil {
		params = json.RawMessage("{}")
	}
	body, err := s.bindingBody(c.ctx, c.x.Version, b, params)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// Unbind answers DELETE .../service_bindings/:binding_id. It decides on
// the cached binding and instance first (decisionRead, confirm).
func (s *Backend) Unbind(ctx context.Context, x *osb.Call, req *osb.DeleteRequest) (int, any, error) {
	c := newCall(ctx, x, req.InstanceID, req.BindingID)
	c.serviceID = req.ServiceID
	snap := s.catalog.Snapshot()
	t := s.bindingTarget(c.instanceID, c.bindingID)
	return retryConflicts(func(attempt int) (int, any, error) {
		read := decisionRead(attempt)
		b, err := s.getBinding(c.ctx, c.instanceID, c.bindingID, read)
		if apierrors.IsNotFound(err) {
			return http.StatusGone, osb.EmptyObject, nil
		}
		if err != nil {
			return 0, nil, err
		}
		if b.Spec.ServiceID != c.serviceID {
			return 0, nil, osb.BadRequest("service_id %q is not the service offering of the binding.", osb.Truncate(c.serviceID, 100))
		}
		op, p := bindingProgress(b)
		if p.gone {
			return http.StatusGone, osb.EmptyObject, nil
		}
		plan := snap.Plan(b.Spec.PlanID)
		asyncOnly := plan != nil && plan.AsyncBinding
		if asyncOnly && !c.async {
			return 0, nil, osb.AsyncBindingRequired(c.x)
		}
		o := deleteOutcome(c.async, asyncOnly, func(p progress) *osb.Error {
			return osb.NewError(http.StatusInternalServerError, "", "Unbinding failed: %s", p.description)
		})
		if b.DeletionTimestamp != nil {
			return s.rejoinDeletion(c, t, b, read, op, p, o)
		}
		if err := s.unbindable(c, read, op, p); err != nil {
			return 0, nil, confirm(read, err)
		}
		return s.startDeletion(c, t, b, op, o, "Unbind accepted")
	})
}

// unbindable refuses an unbind while the binding is being created or its
// instance is being deleted.
func (s *Backend) unbindable(c *osbCall, read Read, op Operation, p progress) error {
	if op.Type == OpCreate && p.running() {
		return osb.ConcurrencyError("The binding is still being created; unbind it once that finished.")
	}
	inst, err := s.getInstance(c.ctx, c.instanceID, read)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if inst != nil && inst.DeletionTimestamp != nil {
		return osb.ConcurrencyError("The instance of the binding is being deleted.")
	}
	return nil
}
