package osb

import "encoding/json"

// Request and response bodies of OSB v2.17. Unknown fields are ignored, as
// the spec requires. Free-form objects stay raw JSON: the backend checks
// them (ObjectField) and stores them as sent.

// MaintenanceInfo is the OSB maintenance_info object.
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// ProvisionRequest is PUT /v2/service_instances/:instance_id.
type ProvisionRequest struct {
	InstanceID       string          `json:"-"`
	ServiceID        string          `json:"service_id"`
	PlanID           string          `json:"plan_id"`
	Context          json.RawMessage `json:"context"`
	OrganizationGUID string          `json:"organization_guid"`
	SpaceGUID        string          `json:"space_guid"`
	Parameters       json.RawMessage `json:"parameters"`
	MaintenanceInfo  json.RawMessage `json:"maintenance_info"`
}

// UpdateRequest is PATCH /v2/service_instances/:instance_id.
type UpdateRequest struct {
	InstanceID      string          `json:"-"`
	ServiceID       string          `json:"service_id"`
	PlanID          string          `json:"plan_id"`
	Context         json.RawMessage `json:"context"`
	Parameters      json.RawMessage `json:"parameters"`
	PreviousValues  json.RawMessage `json:"previous_values"`
	MaintenanceInfo json.RawMessage `json:"maintenance_info"`
}

// DeleteRequest is DELETE of an instance (BindingID empty) or of a
// binding: service_id and plan_id are required query parameters.
type DeleteRequest struct {
	InstanceID, BindingID string
	ServiceID, PlanID     string
}

// FetchRequest is GET of an instance (BindingID empty) or of a binding.
type FetchRequest struct {
	InstanceID, BindingID string
}

// LastOperationRequest is GET .../last_operation of an instance
// (BindingID empty) or of a binding. Operation is the operation query
// parameter, "" when absent.
type LastOperationRequest struct {
	InstanceID, BindingID string
	Operation             string
}

// BindRequest is PUT .../service_bindings/:binding_id.
type BindRequest struct {
	InstanceID           string          `json:"-"`
	BindingID            string          `json:"-"`
	ServiceID            string          `json:"service_id"`
	PlanID               string          `json:"plan_id"`
	Context              json.RawMessage `json:"context"`
	AppGUID              string          `json:"app_guid"`
	BindResource         json.RawMessage `json:"bind_resource"`
	Parameters           json.RawMessage `json:"parameters"`
	PredecessorBindingID string          `json:"predecessor_binding_id"`
}

// ProvisionResponse is the body of 200/201/202 to provision and update.
type ProvisionResponse struct {
	DashboardURL string `json:"dashboard_url,omitempty"`
	Operation    string `json:"operation,omitempty"`
}

// OperationResponse is the body of 202 to deprovision, bind and unbind.
type OperationResponse struct {
	Operation string `json:"operation,omitempty"`
}

// FetchInstanceResponse is the body of GET /v2/service_instances/:id.
type FetchInstanceResponse struct {
	ServiceID       string            `json:"service_id"`
	PlanID          string            `json:"plan_id"`
	DashboardURL    string            `json:"dashboard_url,omitempty"`
	Parameters      json.RawMessage   `json:"parameters,omitempty"`
	MaintenanceInfo *MaintenanceInfo  `json:"maintenance_info,omitempty"`
	Metadata        *InstanceMetadata `json:"metadata,omitempty"`
}

// InstanceMetadata is the OSB ServiceInstanceMetadata object.
type InstanceMetadata struct {
	Labels     map[string]string `json:"labels,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// OSB last_operation states.
const (
	StateInProgress = "in progress"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
)

// EmptyObject is the body "{}" of 200 to update, deprovision and unbind and
// of 410.
var EmptyObject = struct{}{}
