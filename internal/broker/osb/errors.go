package osb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OSB error codes (v2.17 "Service Broker Errors").
const (
	// CodeAsyncRequired: the request needs accepts_incomplete=true.
	CodeAsyncRequired = "AsyncRequired"
	// CodeConcurrencyError: another operation on the resource is running.
	CodeConcurrencyError = "ConcurrencyError"
	// CodeRequiresApp: the bind request lacks app_guid.
	CodeRequiresApp = "RequiresApp"
	// CodeMaintenanceInfoConflict: maintenance_info.version differs from
	// the catalog's.
	CodeMaintenanceInfoConflict = "MaintenanceInfoConflict"
	// CodeStorageUnavailable: the broker cannot reach the API server that
	// stores its instances and bindings. It is the broker's own code (the
	// spec lets brokers define codes beyond its four), sent with 503 and
	// Retry-After so that a platform or an operator can tell an outage
	// from a failure of the request.
	CodeStorageUnavailable = "StorageUnavailable"
)

// RetryAfterUnavailable is the Retry-After of a 503: about the time a
// supervised API server needs to come back after a restart.
const RetryAfterUnavailable = 5 * time.Second

// Error is an OSB error response: an HTTP status with the body
// {error, description, instance_usable, update_repeatable}.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is the OSB error code, empty when the spec defines none.
	Code string
	// Description is the user-facing message. It never holds credentials.
	Description string
	// InstanceUsable is set only for failed updates and deprovisions.
	InstanceUsable *bool
	// UpdateRepeatable is set only for failed updates.
	UpdateRepeatable *bool
	// RetryAfter, when positive, is sent as the Retry-After header (in
	// whole seconds): how long the platform should wait before it tries
	// again.
	RetryAfter time.Duration
	// refusedCatalog marks a refused GET /v2/catalog (credentials,
	// version): its body also carries "services" as a string, see
	// errorBody.
	refusedCatalog bool
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Description)
	}
	return fmt.Sprintf("%d: %s", e.Status, e.Description)
}

// errorBody is the wire form of an Error.
type errorBody struct {
	Error            string `json:"error,omitempty"`
	Description      string `json:"description,omitempty"`
	InstanceUsable   *bool  `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool  `json:"update_repeatable,omitempty"`
	// Services is set on a refused catalog request only, to the
	// description: a client that decodes the body as a catalog without
	// looking at the status (eden does) then fails with a type error
	// instead of showing an empty catalog. Responses may carry fields a
	// client does not know (OSB 2.14 and later).
	Services string `json:"services,omitempty"`
}

// NewError returns an OSB error with status, code (empty for none) and a
// formatted description.
func NewError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Description: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 with a formatted description.
func BadRequest(format string, args ...any) *Error {
	return NewError(http.StatusBadRequest, "", format, args...)
}

// Unprocessable is a 422 without an OSB error code.
func Unprocessable(format string, args ...any) *Error {
	return NewError(http.StatusUnprocessableEntity, "", format, args...)
}

// ConcurrencyError is a 422 ConcurrencyError: another operation runs.
func ConcurrencyError(format string, args ...any) *Error {
	return NewError(http.StatusUnprocessableEntity, CodeConcurrencyError, format, args...)
}

// AsyncRequired is a 422 AsyncRequired for what (a "service plan", say).
func AsyncRequired(what string) *Error {
	return NewError(http.StatusUnprocessableEntity, CodeAsyncRequired,
		"This %s requires client support for asynchronous operations: add accepts_incomplete=true to the request.", what)
}

// AsyncBindingRequired answers a bind or unbind of a plan whose bindings
// are only asynchronous, sent without accepts_incomplete=true: 422
// AsyncRequired, or 412 to a caller whose version (before 2.14) has no
// asynchronous bindings to offer, with the version that has them.
func AsyncBindingRequired(x *Call) *Error {
	if !x.AsyncBindings() {
		return NewError(http.StatusPreconditionFailed, "",
			"The bindings of this service plan are asynchronous, which OSB %s introduced; %s %s cannot bind it: send %s %s or later with accepts_incomplete=true.",
			Version2_14, HeaderAPIVersion, x.Version, HeaderAPIVersion, Version2_14)
	}
	return AsyncRequired("service binding")
}

// NotFound is a 404 with a formatted description.
func NotFound(format string, args ...any) *Error {
	return NewError(http.StatusNotFound, "", format, args...)
}

// Conflict is a 409 with a formatted description.
func Conflict(format string, args ...any) *Error {
	return NewError(http.StatusConflict, "", format, args...)
}

// ErrStorageUnavailable is what a platform sees when the API server cannot
// be reached; the detail goes to the log only.
var ErrStorageUnavailable = &Error{
	Status:      http.StatusServiceUnavailable,
	Code:        CodeStorageUnavailable,
	Description: "The broker cannot reach its storage right now; nothing was changed by this request that a retry would not repeat. Try again later.",
	RetryAfter:  RetryAfterUnavailable,
}

// ErrInternal is what a platform sees for an unexpected failure; the detail
// goes to the log only.
var ErrInternal = &Error{
	Status:      http.StatusInternalServerError,
	Description: "The broker failed to process the request; see the broker's log.",
}

// storeError turns an error of the Store into an OSB error. Rejections of
// the data itself become 400; unavailability 503; the rest 500. logDetail
// reports whether the detail belongs in the error log: it does for
// failures the broker did not decide on, not for an *Error it answers on
// purpose (a provisioner's failure, a timeout).
func storeError(err error) (e *Error, logDetail bool) {
	var osb *Error
	switch {
	case errors.As(err, &osb):
		return osb, false
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return BadRequest("The request was rejected by the broker's storage: %s", APIMessage(err)), false
	case isNamespaceTerminating(err):
		return ConcurrencyError("A previous resource with this id is still being deleted; try again later."), false
	case apierrors.IsConflict(err):
		return ConcurrencyError("Another request changed this resource at the same time; try again."), false
	case apierrors.IsAlreadyExists(err):
		return Conflict("A resource with this id already exists."), false
	case apierrors.IsNotFound(err):
		return NotFound("The resource does not exist."), false
	case unavailable(err):
		return ErrStorageUnavailable, true
	default:
		return ErrInternal, true
	}
}

// APIMessage returns the message of a Kubernetes API error, or err's text.
func APIMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if m := status.Status().Message; m != "" {
			return m
		}
	}
	return err.Error()
}

func isNamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseType("NamespaceTerminating"))
}

// unavailable reports whether err says the API server could not be reached
// or did not answer in time.
func unavailable(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}
