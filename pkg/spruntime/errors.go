package spruntime

import (
	"errors"
	"fmt"
)

// InvalidUserInputError is an error caused by what the user wrote (an
// unknown version, a missing field): retrying cannot fix it, so the runtime
// sets Ready=False and Synced=False with Reason and does not requeue until
// the object or its ProviderConfig changes.
type InvalidUserInputError struct {
	// Reason is the condition reason, PascalCase.
	Reason string
	// Message says what is wrong and how to fix it.
	Message string
}

// Error implements error.
func (e *InvalidUserInputError) Error() string { return e.Message }

// InvalidUserInput returns an InvalidUserInputError with the given reason
// (ReasonInvalidUserInput when empty) and a formatted message.
func InvalidUserInput(reason, format string, args ...any) error {
	if reason == "" {
		reason = ReasonInvalidUserInput
	}
	return &InvalidUserInputError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AsInvalidUserInput reports whether err is or wraps an
// InvalidUserInputError, and returns it.
func AsInvalidUserInput(err error) (*InvalidUserInputError, bool) {
	var e *InvalidUserInputError
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// WaitingError says that an object cannot proceed until something outside
// it changes, such as a cluster to place it on being registered or
// capacity being freed: not the user's mistake, and nothing a retry would
// fix sooner. The runtime sets Ready=False and Synced=False with Reason,
// phase Pending (Progressing for an object that was Ready before), and does
// not requeue: the provider's watch on what the object waits for brings it
// back.
type WaitingError struct {
	// Reason is the condition reason, PascalCase.
	Reason string
	// Message says what the object waits for.
	Message string
}

// Error implements error.
func (e *WaitingError) Error() string { return e.Message }

// Waiting returns a WaitingError with the given reason and a formatted
// message.
func Waiting(reason, format string, args ...any) error {
	return &WaitingError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AsWaiting reports whether err is or wraps a WaitingError, and returns
// it.
func AsWaiting(err error) (*WaitingError, bool) {
	var e *WaitingError
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
