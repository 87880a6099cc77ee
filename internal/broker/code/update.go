package code

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// How the broker tells the phases of a code-based instance apart without
// recording them: the provider's object is created at generation 1, and
// only a change of its spec raises the generation. While the generation is
// 1, the instance's last operation is its provision; above 1, an update
// (the broker's, or one the tenant made to the object directly, which the
// platform may discover by fetching the instance).
const provisionGeneration = 1

// codeInstance is a code-based instance as the update and fetch endpoints
// read it: its record, the provider's object and the object's state.
type codeInstance struct {
	rec   *record
	obj   *unstructured.Unstructured
	state codeOperationState
}

// provisioning reports whether the instance's last operation is its
// provision (the object's spec never changed).
func (ci *codeInstance) provisioning() bool { return ci.obj.GetGeneration() <= provisionGeneration }

// spec returns the provider's object's spec as compact JSON ({} when it
// has none).
func (ci *codeInstance) spec() (json.RawMessage, error) {
	spec, ok := ci.obj.Object["spec"]
	if !ok || spec == nil {
		return json.RawMessage("{}"), nil
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode the spec of %s: %w", ci.rec.object, err)
	}
	return raw, nil
}

// parameters returns the instance's parameters: spec, plus
// catalog.ControlPlaneParameter when the provision named a control plane.
func (ci *codeInstance) parameters(spec json.RawMessage) (json.RawMessage, error) {
	if ci.rec.ownsMCP {
		return spec, nil
	}
	params := map[string]json.RawMessage{}
	if err := json.Unmarshal(spec, &params); err != nil {
		return nil, fmt.Errorf("decode the spec of %s: %w", ci.rec.object, err)
	}
	ref, err := json.Marshal(controlPlaneRef{Namespace: ci.rec.object.Namespace, Name: ci.rec.object.Name})
	if err != nil {
		return nil, fmt.Errorf("encode the control plane: %w", err)
	}
	params[catalog.ControlPlaneParameter] = ref
	out, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode parameters: %w", err)
	}
	return out, nil
}

// readInstance reads the code-based instance id for update and fetch.
// It answers 404 when there is none, 422 ConcurrencyError while it is being
// deleted, and 404 when its object is gone (a deprovision that deleted it
// already, or a tenant who did).
func (c *Offerings) readInstance(ctx context.Context, id string) (*codeInstance, error) {
	rec, err := c.existingRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.inspect(ctx, rec)
}

// inspect reads the object of rec and its state, as readInstance.
func (c *Offerings) inspect(ctx context.Context, rec *record) (*codeInstance, error) {
	id := rec.id
	if rec.ns.DeletionTimestamp != nil {
		return nil, osb.ConcurrencyError("Instance %s is being deleted.", osb.Truncate(id, 100))
	}
	obj, err := c.objectOf(ctx, rec)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, osb.NotFound("The %s of instance %s is gone: the instance is being deprovisioned, or its object was removed.", rec.object.Kind, osb.Truncate(id, 100))
	}
	st, err := c.stateOf(ctx, rec, obj)
	if err != nil {
		return nil, err
	}
	if st.state == "deleting" {
		return nil, osb.ConcurrencyError("Instance %s is being deleted.", osb.Truncate(id, 100))
	}
	return &codeInstance{rec: rec, obj: obj, state: st}, nil
}

// Update answers PATCH /v2/service_instances/:id of a code-based
// instance. Only parameters can change: they are a JSON merge patch
// (RFC 7386) of the object's current spec, validated as a whole against
// the plan's schema before anything is written, and written with the
// object's resourceVersion and UID as preconditions. A plan change is
// refused: each plan is another kind, so there is no object to change.
func (c *Offerings) Update(ctx context.Context, x *osb.Call, req *osb.UpdateRequest) (int, any, error) {
	patch, maintenance, err := checkUpdate(x, req)
	if err != nil {
		return 0, nil, err
	}
	rec, err := c.existingRecord(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	plan, err := c.updatablePlan(ctx, rec, req, maintenance)
	if err != nil {
		return 0, nil, err
	}
	ci, err := c.inspect(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	if err := ci.checkProvisioned(); err != nil {
		return 0, nil, err
	}
	current, err := ci.spec()
	if err != nil {
		return 0, nil, err
	}
	spec, err := c.updatedSpec(ci, current, patch)
	if err != nil {
		return 0, nil, err
	}
	params, err := ci.parameters(spec)
	if err != nil {
		return 0, nil, err
	}
	if err := plan.CreateSchema.Validate(params); err != nil {
		return 0, nil, osb.BadRequest("The parameters do not match the schema of plan %s (the spec of %s): %v.", plan.Name, plan.Kind, err)
	}
	if osb.SameObject(spec, current) {
		return c.updateUnchanged(ctx, x, ci, current)
	}
	return c.startUpdate(ctx, x, ci, spec)
}

// checkUpdate checks an update request against itself and returns its
// parameters (nil when absent) and whether it sends maintenance_info.
func checkUpdate(x *osb.Call, req *osb.UpdateRequest) (json.RawMessage, bool, error) {
	if req.ServiceID == "" {
		return nil, false, osb.BadRequest("service_id is required.")
	}
	mi, err := osb.MaintenanceField(req.MaintenanceInfo)
	if err != nil {
		return nil, false, err
	}
	ctxJSON, err := osb.ObjectField(req.Context, "context")
	if err != nil {
		return nil, false, err
	}
	patch, err := osb.ObjectField(req.Parameters, "parameters")
	if err != nil {
		return nil, false, err
	}
	if _, err := osb.ObjectField(req.PreviousValues, "previous_values"); err != nil {
		return nil, false, err
	}
	if err := osb.CheckPlatform(x.Identity, ctxJSON); err != nil {
		return nil, false, err
	}
	return patch, mi != nil, nil
}

// errMaintenanceInfo answers an update that sends maintenance_info: the
// plans of code-based offerings have none.
var errMaintenanceInfo = osb.NewError(http.StatusUnprocessableEntity, osb.CodeMaintenanceInfoConflict,
	"The service plan has no maintenance_info; fetch the catalog again.")

// updatablePlan checks an update against the instance's record and the
// catalog and returns the instance's plan: the offering must be served,
// the plan unchanged and still offered, and no maintenance_info sent.
func (c *Offerings) updatablePlan(ctx context.Context, rec *record, req *osb.UpdateRequest, maintenance bool) (*catalog.CodePlan, error) {
	id := osb.Truncate(rec.id, 100)
	if req.ServiceID != rec.serviceID {
		return nil, osb.BadRequest("service_id %q is not the service offering of the instance.", osb.Truncate(req.ServiceID, 100))
	}
	code := c.catalog.Snapshot().Code()
	svc := code.Service(rec.serviceID)
	if svc == nil {
		return nil, c.Unserved(ctx, rec.serviceID, osb.Unprocessable("The service offering of instance %s is no longer in the catalog; it cannot be updated.", id))
	}
	if req.PlanID != "" && req.PlanID != rec.planID {
		if p := code.Plan(req.PlanID); p == nil || p.ServiceID != svc.ID {
			return nil, osb.BadRequest("plan_id %q is not a plan of service offering %s.", osb.Truncate(req.PlanID, 100), svc.Name)
		}
		// OSB: 422 when "the requested change is not supported"; the
		// catalog declares plan_updateable false, and no retry helps.
		e := osb.Unprocessable("Service offering %s does not support plan changes: each plan is another kind of object, so an instance keeps its plan. Provision a new instance of the other plan instead.", svc.Name)
		e.InstanceUsable, e.UpdateRepeatable = ptr.To(true), ptr.To(false)
		return nil, e
	}
	plan := code.Plan(rec.planID)
	if plan == nil || plan.ServiceID != svc.ID {
		return nil, osb.Unprocessable("The plan of instance %s is no longer offered; it cannot be updated.", id)
	}
	if maintenance {
		return nil, errMaintenanceInfo
	}
	return plan, nil
}

// checkProvisioned refuses an update while the instance is provisioned
// or after its provision failed.
func (ci *codeInstance) checkProvisioned() error {
	if !ci.provisioning() {
		return nil
	}
	switch ci.state.state {
	case osb.StateInProgress:
		return osb.ConcurrencyError("Instance %s is still being provisioned; update it once its last operation succeeded.", osb.Truncate(ci.rec.id, 100))
	case osb.StateFailed:
		return osb.Unprocessable("Instance %s could not be provisioned, so it cannot be updated; deprovision it.", osb.Truncate(ci.rec.id, 100))
	}
	return nil
}

// updateUnchanged answers an update whose change is in the spec already:
// nothing to write. A re-sent update gets its operation until it succeeded
// (OSB: 202, not 200, until it completes; a failed one stays failed until
// the spec changes, which the poll then says); its hash is recorded again
// in case the first request failed after writing the object. An instance
// never updated keeps the hash of its provision.
func (c *Offerings) updateUnchanged(ctx context.Context, x *osb.Call, ci *codeInstance, current json.RawMessage) (int, any, error) {
	if ci.provisioning() {
		return http.StatusOK, osb.EmptyObject, nil
	}
	if err := c.recordHash(ctx, ci, current); err != nil {
		return 0, nil, err
	}
	if ci.state.state == osb.StateSucceeded {
		return http.StatusOK, osb.EmptyObject, nil
	}
	if !x.AcceptsIncomplete {
		return 0, nil, osb.AsyncRequired("service plan")
	}
	return http.StatusAccepted, osb.ProvisionResponse{Operation: operationUpdate}, nil
}

// startUpdate writes spec, unless another update runs, and records the
// request's hash.
func (c *Offerings) startUpdate(ctx context.Context, x *osb.Call, ci *codeInstance, spec json.RawMessage) (int, any, error) {
	if !ci.provisioning() && ci.state.state == osb.StateInProgress {
		return 0, nil, osb.ConcurrencyError("Another update of instance %s is in progress.", osb.Truncate(ci.rec.id, 100))
	}
	if !x.AcceptsIncomplete {
		return 0, nil, osb.AsyncRequired("service plan")
	}
	if err := c.writeSpec(ctx, ci, spec); err != nil {
		return 0, nil, err
	}
	written, err := ci.spec()
	if err != nil {
		return 0, nil, err
	}
	if err := c.recordHash(ctx, ci, written); err != nil {
		return 0, nil, err
	}
	c.log.V(1).Info("Updating a code-based instance", "namespace", ci.rec.ns.Name, "object", ci.rec.object.String(),
		"generation", ci.obj.GetGeneration(), "requestIdentity", x.RequestID)
	return http.StatusAccepted, osb.ProvisionResponse{Operation: operationUpdate}, nil
}

// updatedSpec applies the parameters of an update (patch, nil when absent)
// to the object's spec current. catalog.ControlPlaneParameter is not part
// of the spec: it may be sent, but only with the instance's value (null
// when the broker created the control plane).
func (c *Offerings) updatedSpec(ci *codeInstance, current, patch json.RawMessage) (json.RawMessage, error) {
	if patch == nil {
		return current, nil
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(patch, &fields); err != nil {
		return nil, osb.BadRequest("parameters must be a JSON object.")
	}
	if raw, ok := fields[catalog.ControlPlaneParameter]; ok {
		if !ci.sameControlPlane(raw) {
			e := osb.Unprocessable("%s cannot change: an instance keeps its ManagedControlPlane. Send the instance's value, or leave it out.", catalog.ControlPlaneParameter)
			e.InstanceUsable, e.UpdateRepeatable = ptr.To(true), ptr.To(false)
			return nil, e
		}
		delete(fields, catalog.ControlPlaneParameter)
		var err error
		if patch, err = json.Marshal(fields); err != nil {
			return nil, fmt.Errorf("encode parameters: %w", err)
		}
	}
	merged, err := osb.MergePatch(current, patch)
	if err != nil {
		return nil, osb.BadRequest("The parameters cannot be merged into the instance's spec: %v.", err)
	}
	return merged, nil
}

// sameControlPlane reports whether raw, the value of
// catalog.ControlPlaneParameter in an update, names the instance's control
// plane as it is: null for one the broker created, the same namespace and
// name for one the provision named.
func (ci *codeInstance) sameControlPlane(raw json.RawMessage) bool {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return ci.rec.ownsMCP
	}
	var ref controlPlaneRef
	if ci.rec.ownsMCP || json.Unmarshal(raw, &ref) != nil {
		return false
	}
	return ref == controlPlaneRef{Namespace: ci.rec.object.Namespace, Name: ci.rec.object.Name}
}

// writeSpec writes spec into the provider's object of ci. The update
// carries the object's resourceVersion and UID as read: an object changed
// since, or replaced by another of the same name, is not written (422
// ConcurrencyError, the platform may send the request again).
func (c *Offerings) writeSpec(ctx context.Context, ci *codeInstance, spec json.RawMessage) error {
	var specMap map[string]any
	if err := json.Unmarshal(spec, &specMap); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	obj := ci.obj.DeepCopy()
	obj.Object["spec"] = specMap
	if obj.GetUID() != ci.rec.object.UID || obj.GetResourceVersion() == "" {
		return fmt.Errorf("update %s: the object read has no resourceVersion or another UID than the recorded one", ci.rec.object)
	}
	if err := c.onboarding.Update(ctx, obj); err != nil {
		switch {
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			return osb.ConcurrencyError("The %s of instance %s changed while it was being updated; send the request again.", ci.rec.object.Kind, osb.Truncate(ci.rec.id, 100))
		case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
			return osb.BadRequest("The onboarding cluster refused the %s: %s", ci.rec.object.Kind, osb.APIMessage(err))
		}
		return fmt.Errorf("update %s: %w", ci.rec.object, err)
	}
	ci.obj = obj
	return nil
}

// recordHash records, as the instance's request hash, the attributes the
// instance has now (its spec as the API server stored it, with the control
// plane a provision named): a provision sent after an update is answered
// as for an instance provisioned with the updated parameters (200 when
// they are the same, 409 for the original ones when they differ), as OSB
// compares a provision with "the existing Service Instance".
func (c *Offerings) recordHash(ctx context.Context, ci *codeInstance, spec json.RawMessage) error {
	params, err := ci.parameters(spec)
	if err != nil {
		return err
	}
	hash := canonicalRequestHash(ci.rec.serviceID, ci.rec.planID, params)
	if hash == ci.rec.hash {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationRequestHash: hash}}})
	if err != nil {
		return fmt.Errorf("encode the record's patch: %w", err)
	}
	if err := c.onboarding.Patch(ctx, ci.rec.ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("record the request hash in namespace %s: %w", ci.rec.ns.Name, err)
	}
	ci.rec.hash = hash
	return nil
}

// canonicalRequestHash is requestHash of params with the keys of nested
// objects sorted too, so that the same parameters hash alike whichever
// order a client or the API server wrote them in.
func canonicalRequestHash(serviceID, planID string, params json.RawMessage) string {
	v, ok := osb.DecodeNumbers(params)
	m, isMap := v.(map[string]any)
	fields := map[string]json.RawMessage{}
	if ok && isMap {
		for k, x := range m {
			raw, err := json.Marshal(x)
			if err != nil {
				raw = []byte(err.Error())
			}
			fields[k] = raw
		}
	}
	return requestHash(serviceID, planID, fields)
}

// FetchInstance answers GET /v2/service_instances/:id of a code-based
// instance: its ids and parameters (the object's spec, with the control
// plane a provision named) once provisioned. As OSB requires, it is 404
// while the provision runs or after it failed, and 422 ConcurrencyError
// while an update runs.
func (c *Offerings) FetchInstance(ctx context.Context, _ *osb.Call, req *osb.FetchRequest) (int, any, error) {
	ci, err := c.readInstance(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	id := osb.Truncate(req.InstanceID, 100)
	switch {
	case ci.provisioning() && ci.state.state == osb.StateInProgress:
		return 0, nil, osb.NotFound("Instance %s is still being provisioned.", id)
	case ci.provisioning() && ci.state.state == osb.StateFailed:
		return 0, nil, osb.NotFound("Instance %s could not be provisioned.", id)
	case ci.state.state == osb.StateInProgress:
		return 0, nil, osb.ConcurrencyError("Instance %s is being updated.", id)
	}
	spec, err := ci.spec()
	if err != nil {
		return 0, nil, err
	}
	params, err := ci.parameters(spec)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, osb.FetchInstanceResponse{ServiceID: ci.rec.serviceID, PlanID: ci.rec.planID, Parameters: params}, nil
}

// FetchBinding answers GET .../service_bindings/:bid of a code-based
// instance: the kubeconfig of the binding's granted AccessRequest. An
// AccessRequest that does not carry this instance's and this binding's ids
// is another's: 404, as for a binding that does not exist, so that a
// caller learns nothing about other instances' bindings. The kubeconfig
// holds a token: it is never logged.
func (c *Offerings) FetchBinding(ctx context.Context, _ *osb.Call, req *osb.FetchRequest) (int, any, error) {
	id, bid := req.InstanceID, req.BindingID
	missing := osb.NotFound("Binding %s of instance %s does not exist.", osb.Truncate(bid, 100), osb.Truncate(id, 100))
	rec, err := c.getRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if rec == nil {
		return 0, nil, missing
	}
	if svc := c.catalog.Snapshot().Code().Service(rec.serviceID); svc != nil && !svc.Bindable() {
		return 0, nil, osb.BadRequest("Service offering %s is not bindable, so it has no bindings to fetch (bindings_retrievable is false).", svc.Name)
	}
	key := client.ObjectKey{Namespace: c.accessNamespace, Name: BindingAccessRequestName(bid)}
	ar := &clustersv1alpha1.AccessRequest{}
	if err := c.platform.Get(ctx, key, ar); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil, missing
		}
		return 0, nil, fmt.Errorf("get AccessRequest %s: %w", key, err)
	}
	switch {
	case ar.Annotations[sf.AnnotationInstanceID] != id || ar.Annotations[AnnotationBindingID] != bid ||
		ar.Labels[sf.LabelManagedBy] != sf.ManagedByBroker:
		return 0, nil, missing
	case ar.DeletionTimestamp != nil:
		return 0, nil, osb.NotFound("Binding %s is being deleted.", osb.Truncate(bid, 100))
	case ar.Status.IsDenied():
		return 0, nil, osb.NotFound("Binding %s could not be created: the platform refused its access.", osb.Truncate(bid, 100))
	case !ar.Status.IsGranted() || ar.Status.SecretRef == nil:
		return 0, nil, osb.NotFound("Binding %s is still being created.", osb.Truncate(bid, 100))
	}
	kubeconfig, err := c.grantedKubeconfig(ctx, key, ar)
	if err != nil {
		return 0, nil, err
	}
	if kubeconfig == nil {
		return 0, nil, osb.NotFound("Binding %s is still being created.", osb.Truncate(bid, 100))
	}
	return http.StatusOK, bindResponse{Credentials: bindCredentials{Kubeconfig: string(kubeconfig)}}, nil
}
