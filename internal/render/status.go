package render

import (
	"encoding/json"
	"fmt"
	"strconv"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// Operation names the section of a status template's output that describes
// one kind of operation.
type Operation string

// Sections of a status template. An update reads OperationProvision.
const (
	// OperationProvision describes a provision or an update.
	OperationProvision Operation = "provision"
	// OperationBind describes a bind.
	OperationBind Operation = "bind"
	// OperationUnbind describes an unbind.
	OperationUnbind Operation = "unbind"
	// OperationDeprovision describes a deprovision.
	OperationDeprovision Operation = "deprovision"
)

// Status is what a status template says about the current operation.
//
// Response holds credentials. Status implements fmt.Stringer,
// fmt.GoStringer and logr.Marshaler without it, so that printing or
// logging a Status does not show it; never log Response itself.
type Status struct {
	// State is the state of the operation.
	State osbv1alpha1.State
	// Description is the human-readable outcome (status.description): the
	// section's response, or its description when there is no response.
	// Empty for bind, whose response is Response.
	Description string
	// Error is the error the template reports.
	Error string
	// DashboardURL is the dashboard of the instance.
	DashboardURL string
	// InstanceUsable is "true" or "false" when the template says whether
	// the instance can still be used after a failed operation.
	InstanceUsable string
	// UpdateRepeatable is "true" or "false" when the template says whether
	// a failed update may be retried.
	UpdateRepeatable string
	// Response is, for bind, the OSB bind response body as JSON (with the
	// credentials); nil when the template renders none.
	Response []byte
}

// String implements fmt.Stringer without the response.
func (s Status) String() string {
	return fmt.Sprintf("{State:%q Description:%q Error:%q DashboardURL:%q InstanceUsable:%q UpdateRepeatable:%q Response:<%d bytes>}",
		s.State, s.Description, s.Error, s.DashboardURL, s.InstanceUsable, s.UpdateRepeatable, len(s.Response))
}

// GoString implements fmt.GoStringer without the response.
func (s Status) GoString() string { return "render.Status" + s.String() }

// MarshalLog implements logr.Marshaler without the response.
func (s Status) MarshalLog() any {
	return struct {
		State, Description, Error, DashboardURL, InstanceUsable, UpdateRepeatable string
		ResponseBytes                                                             int
	}{string(s.State), s.Description, s.Error, s.DashboardURL, s.InstanceUsable, s.UpdateRepeatable, len(s.Response)}
}

// ParseStatus reads the section op of a rendered status template. state is
// required and must be a Service Fabrik state. For bind, a response must be
// JSON: a string holding JSON, as Service Fabrik's templates render it, or
// a mapping, which is encoded. Error messages never quote the response.
func ParseStatus(rendered map[string]any, op Operation) (Status, error) {
	raw, ok := rendered[string(op)]
	if !ok || raw == nil {
		return Status{}, fmt.Errorf("the status template renders no %s section", op)
	}
	sec, ok := raw.(map[string]any)
	if !ok {
		return Status{}, fmt.Errorf("the %s section of the status template is not a mapping", op)
	}
	var st Status
	var err error
	field := func(key string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = scalar(sec[key])
		if err != nil {
			err = fmt.Errorf("%s.%s: %w", op, key, err)
		}
		return s
	}
	state := field("state")
	st.Error = field("error")
	st.DashboardURL = field("dashboardUrl")
	st.InstanceUsable = field("instanceUsable")
	st.UpdateRepeatable = field("updateRepeatable")
	if err != nil {
		return Status{}, err
	}
	if st.State, err = parseState(op, state); err != nil {
		return Status{}, err
	}
	if op == OperationBind {
		if st.Response, err = bindResponse(op, sec["response"]); err != nil {
			return Status{}, err
		}
		return st, nil
	}
	if st.Description, err = responseDescription(op, sec["response"]); err != nil {
		return Status{}, err
	}
	if st.Description == "" {
		if st.Description = field("description"); err != nil {
			return Status{}, err
		}
	}
	return st, nil
}

// parseState checks that state, the section op's, is a Service Fabrik
// state.
func parseState(op Operation, state string) (osbv1alpha1.State, error) {
	switch s := osbv1alpha1.State(state); s {
	case osbv1alpha1.StateInQueue, osbv1alpha1.StateUpdate, osbv1alpha1.StateDelete,
		osbv1alpha1.StateInProgress, osbv1alpha1.StateSucceeded, osbv1alpha1.StateFailed:
		return s, nil
	case "":
		return "", fmt.Errorf("%s.state is required", op)
	default:
		return "", fmt.Errorf("%s.state %q is not one of %q, %q, %q", op, state,
			osbv1alpha1.StateInProgress, osbv1alpha1.StateSucceeded, osbv1alpha1.StateFailed)
	}
}

// bindResponse reads a bind's response: a string holding JSON, or a
// mapping, which is encoded; nil when there is none.
func bindResponse(op Operation, v any) ([]byte, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case string:
		if r == "" {
			return nil, nil
		}
		if !json.Valid([]byte(r)) {
			return nil, fmt.Errorf("%s.response is not valid JSON", op)
		}
		return []byte(r), nil
	case map[string]any:
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%s.response cannot be encoded as JSON", op)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%s.response is neither a JSON string nor a mapping", op)
	}
}

// responseDescription is the description the response of an operation
// other than bind gives: a mapping or list as JSON, a scalar as text.
func responseDescription(op Operation, v any) (string, error) {
	switch r := v.(type) {
	case nil:
		return "", nil
	case map[string]any, []any:
		b, err := json.Marshal(r)
		if err != nil {
			return "", fmt.Errorf("%s.response: %w", op, err)
		}
		return string(b), nil
	default:
		s, _ := scalar(r)
		return s, nil
	}
}

// scalar renders a YAML scalar as a string: "true" for true, "3" for 3.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("not a string but a %T", v)
}
