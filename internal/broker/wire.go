package broker

import "encoding/json"

// Request and response bodies of OSB v2.17. Unknown fields are ignored, as
// the spec requires. Free-form objects stay raw JSON: they are checked to be
// objects and stored as sent.

// maintenanceInfo is the OSB maintenance_info object.
type maintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// provisionRequest is the body of PUT /v2/service_instances/:id.
type provisionRequest struct {
	ServiceID        string          `json:"service_id"`
	PlanID           string          `json:"plan_id"`
	Context          json.RawMessage `json:"context"`
	OrganizationGUID string          `json:"organization_guid"`
	SpaceGUID        string          `json:"space_guid"`
	Parameters       json.RawMessage `json:"parameters"`
	MaintenanceInfo  json.RawMessage `json:"maintenance_info"`
}

// updateRequest is the body of PATCH /v2/service_instances/:id.
type updateRequest struct {
	ServiceID       string          `json:"service_id"`
	PlanID          string          `json:"plan_id"`
	Context         json.RawMessage `json:"context"`
	Parameters      json.RawMessage `json:"parameters"`
	PreviousValues  json.RawMessage `json:"previous_values"`
	MaintenanceInfo json.RawMessage `json:"maintenance_info"`
}

// bindRequest is the body of PUT .../service_bindings/:binding_id.
type bindRequest struct {
	ServiceID            string          `json:"service_id"`
	PlanID               string          `json:"plan_id"`
	Context              json.RawMessage `json:"context"`
	AppGUID              string          `json:"app_guid"`
	BindResource         json.RawMessage `json:"bind_resource"`
	Parameters           json.RawMessage `json:"parameters"`
	PredecessorBindingID string          `json:"predecessor_binding_id"`
}

// bindResource is the part of bind_resource the broker reads.
type bindResource struct {
	AppGUID string `json:"app_guid"`
	Route   string `json:"route"`
}

// provisionResponse is the body of 200/201/202 to provision and update.
type provisionResponse struct {
	DashboardURL string `json:"dashboard_url,omitempty"`
	Operation    string `json:"operation,omitempty"`
}

// operationResponse is the body of 202 to deprovision, bind and unbind.
type operationResponse struct {
	Operation string `json:"operation,omitempty"`
}

// fetchInstanceResponse is the body of GET /v2/service_instances/:id.
type fetchInstanceResponse struct {
	ServiceID       string           `json:"service_id"`
	PlanID          string           `json:"plan_id"`
	DashboardURL    string           `json:"dashboard_url,omitempty"`
	Parameters      json.RawMessage  `json:"parameters,omitempty"`
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info,omitempty"`
	Metadata        *instanceMeta    `json:"metadata,omitempty"`
}

// instanceMeta is the OSB ServiceInstanceMetadata object.
type instanceMeta struct {
	Labels     map[string]string `json:"labels,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// bindingFields are the fields of a bind response (201/200 and fetch) that
// the broker passes on from the provisioner's response Secret. Anything else
// in the Secret is not sent.
var bindingFields = []string{"credentials", "syslog_drain_url", "route_service_url", "volume_mounts", "endpoints", "metadata"}

// bindingFieldSince names the bind response fields that later versions
// added: a caller of an older version does not get them. Clients decode
// them by what their version says, if at all (service-catalog's client
// decodes endpoints' ports as numbers, which 2.15 made strings).
var bindingFieldSince = map[string]APIVersion{"endpoints": Version2_15, "metadata": Version2_16}

// OSB last_operation states.
const (
	stateInProgress = "in progress"
	stateSucceeded  = "succeeded"
	stateFailed     = "failed"
)

// emptyObject is the body "{}" of 200 to update, deprovision and unbind and
// of 410.
var emptyObject = struct{}{}
