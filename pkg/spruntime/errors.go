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
