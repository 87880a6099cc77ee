package osb

import "net/http"

// route is one endpoint of the OSB API: its mux pattern, its name in
// metrics and logs, and what answers it.
type route struct {
	pattern, endpoint string
	serve             endpointFunc
}

// routes is the OSB API: the only table of its endpoints. Every request
// passes the checks of wrap first, in this order: request identity echoed;
// basic auth (401); API version (412); originating identity (400); body
// size (413).
var routes = []route{
	{"GET /v2/catalog", "catalog", (*Handler).getCatalog},
	{"PUT /v2/service_instances/{instance_id}", "provision", (*Handler).provision},
	{"PATCH /v2/service_instances/{instance_id}", "update", (*Handler).update},
	{"GET /v2/service_instances/{instance_id}", "fetch_instance", (*Handler).fetchInstance},
	{"DELETE /v2/service_instances/{instance_id}", "deprovision", (*Handler).deprovision},
	{"GET /v2/service_instances/{instance_id}/last_operation", "instance_last_operation", (*Handler).instanceLastOperation},
	{"PUT /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "bind", (*Handler).bind},
	{"GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "fetch_binding", (*Handler).fetchBinding},
	{"DELETE /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "unbind", (*Handler).unbind},
	{"GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation", "binding_last_operation", (*Handler).bindingLastOperation},
	{"/", "unknown", (*Handler).unknown},
}

// provision answers PUT /v2/service_instances/:instance_id.
func (s *Handler) provision(x *exchange, r *http.Request) (int, any, error) {
	ids, _, err := parseCall(x, r, parseAsync)
	if err != nil {
		return 0, nil, err
	}
	req := &ProvisionRequest{InstanceID: ids.instanceID}
	if err := decodeBody(r, req); err != nil {
		return 0, nil, err
	}
	return s.backend.Provision(r.Context(), &x.call, req)
}

// update answers PATCH /v2/service_instances/:instance_id.
func (s *Handler) update(x *exchange, r *http.Request) (int, any, error) {
	ids, _, err := parseCall(x, r, parseAsync)
	if err != nil {
		return 0, nil, err
	}
	req := &UpdateRequest{InstanceID: ids.instanceID}
	if err := decodeBody(r, req); err != nil {
		return 0, nil, err
	}
	return s.backend.Update(r.Context(), &x.call, req)
}

// fetchInstance answers GET /v2/service_instances/:instance_id.
func (s *Handler) fetchInstance(x *exchange, r *http.Request) (int, any, error) {
	ids, _, err := parseCall(x, r, parseHints)
	if err != nil {
		return 0, nil, err
	}
	return s.backend.FetchInstance(r.Context(), &x.call, &FetchRequest{InstanceID: ids.instanceID})
}

// deprovision answers DELETE /v2/service_instances/:instance_id.
func (s *Handler) deprovision(x *exchange, r *http.Request) (int, any, error) {
	ids, q, err := parseCall(x, r, parseDelete|parseAsync)
	if err != nil {
		return 0, nil, err
	}
	return s.backend.Deprovision(r.Context(), &x.call, &DeleteRequest{InstanceID: ids.instanceID,
		ServiceID: q.serviceID.value, PlanID: q.planID.value})
}

// instanceLastOperation answers GET .../service_instances/:id/last_operation.
func (s *Handler) instanceLastOperation(x *exchange, r *http.Request) (int, any, error) {
	ids, q, err := parseCall(x, r, parseHints)
	if err != nil {
		return 0, nil, err
	}
	op, err := q.operation()
	if err != nil {
		return 0, nil, err
	}
	return s.backend.InstanceLastOperation(r.Context(), &x.call, &LastOperationRequest{InstanceID: ids.instanceID, Operation: op})
}

// bind answers PUT .../service_bindings/:binding_id.
func (s *Handler) bind(x *exchange, r *http.Request) (int, any, error) {
	ids, _, err := parseCall(x, r, parseBinding|parseAsync)
	if err != nil {
		return 0, nil, err
	}
	req := &BindRequest{InstanceID: ids.instanceID, BindingID: ids.bindingID}
	if err := decodeBody(r, req); err != nil {
		return 0, nil, err
	}
	return s.backend.Bind(r.Context(), &x.call, req)
}

// fetchBinding answers GET .../service_bindings/:binding_id.
func (s *Handler) fetchBinding(x *exchange, r *http.Request) (int, any, error) {
	ids, _, err := parseCall(x, r, parseBinding|parseHints)
	if err != nil {
		return 0, nil, err
	}
	return s.backend.FetchBinding(r.Context(), &x.call, &FetchRequest{InstanceID: ids.instanceID, BindingID: ids.bindingID})
}

// unbind answers DELETE .../service_bindings/:binding_id.
func (s *Handler) unbind(x *exchange, r *http.Request) (int, any, error) {
	ids, q, err := parseCall(x, r, parseBinding|parseDelete|parseAsync)
	if err != nil {
		return 0, nil, err
	}
	return s.backend.Unbind(r.Context(), &x.call, &DeleteRequest{InstanceID: ids.instanceID, BindingID: ids.bindingID,
		ServiceID: q.serviceID.value, PlanID: q.planID.value})
}

// bindingLastOperation answers GET .../service_bindings/:binding_id/last_operation.
func (s *Handler) bindingLastOperation(x *exchange, r *http.Request) (int, any, error) {
	ids, q, err := parseCall(x, r, parseBinding|parseHints)
	if err != nil {
		return 0, nil, err
	}
	op, err := q.operation()
	if err != nil {
		return 0, nil, err
	}
	return s.backend.BindingLastOperation(r.Context(), &x.call,
		&LastOperationRequest{InstanceID: ids.instanceID, BindingID: ids.bindingID, Operation: op})
}
