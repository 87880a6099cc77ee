package render

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render/source"
)

// Stage names the step of a render that failed.
type Stage string

// Stages of a render.
const (
	// StageSource is resolving the template text or chart: content,
	// contentEncoded or url.
	StageSource Stage = "source"
	// StageParse is parsing the template text or loading the chart.
	StageParse Stage = "parse"
	// StageExecute is executing the template.
	StageExecute Stage = "execute"
	// StageDecode is decoding the rendered text into objects or a map.
	StageDecode Stage = "decode"
)

// Error is the error of a render. Its message names the action, the type
// and where the text came from, and reads well as an instance's
// status.error. It never quotes variables, which may hold credentials;
// it may quote the template text itself, as Go's template errors do.
type Error struct {
	// Action is the template's action.
	Action osbv1alpha1.TemplateAction
	// Type is the template's type.
	Type osbv1alpha1.TemplateType
	// Source is where the text came from: "content", "contentEncoded" or
	// the url without user information and query.
	Source string
	// Stage is the step that failed.
	Stage Stage
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	src := ""
	if e.Source != "" {
		src = " from " + e.Source
	}
	cause := e.Err
	// A fetch error names the url again; the source is already named.
	var fe *source.Error
	if errors.As(cause, &fe) && e.Source != "" {
		cause = fe.Err
	}
	return fmt.Sprintf("%s template (%s%s): %s: %v", e.Action, e.Type, src, e.Stage, cause)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// IsTransient reports whether a render failed for a reason that may pass
// without a change to the plan: a url could not be fetched because of the
// network or the server (see source.Error.Transient), a ConfigMap could not
// be read, the caller's context ended, or no process to render a Helm
// chart in could be started. Everything else — a template that
// does not parse or execute, a limit, an invalid document, a missing file —
// needs a new plan and should fail the operation.
func IsTransient(err error) bool {
	return source.IsTransient(err) || errors.Is(err, context.Canceled) || errors.Is(err, errHelmUnavailable) ||
		(errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTimeLimit))
}

func newError(t osbv1alpha1.TemplateSpec, origin string, stage Stage, err error) *Error {
	return &Error{Action: t.Action, Type: t.Type, Source: origin, Stage: stage, Err: err}
}

// redactURL returns raw without user information and query, for errors.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "url"
	}
	return source.Redact(u)
}
