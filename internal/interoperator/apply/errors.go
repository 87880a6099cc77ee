package apply

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// InvalidObjectError is a rendered object that cannot be applied at all,
// for example one without metadata.name. It is found before any request.
type InvalidObjectError struct {
	// Index is the position of the object in the render, from 1.
	Index int
	// What describes the object: its apiVersion and kind, and its name when
	// it has one.
	What string
	// Problem says what is wrong.
	Problem string
}

// Error implements error.
func (e *InvalidObjectError) Error() string {
	return fmt.Sprintf("object %d (%s): %s", e.Index, e.What, e.Problem)
}

// RejectedError is an object the API server refused for what it is: it is
// invalid, malformed or forbidden. Applying it again cannot succeed.
type RejectedError struct {
	// Ref is the object.
	Ref osbv1alpha1.Source
	// Err is the API server's answer.
	Err error
}

// Error implements error.
func (e *RejectedError) Error() string {
	return fmt.Sprintf("the API server rejected %s: %s", describe(e.Ref), apiMessage(e.Err))
}

// Unwrap returns the API server's answer.
func (e *RejectedError) Unwrap() error { return e.Err }

// UnknownKindError is an object whose kind the cluster does not serve, for
// example because its CRD is not installed, or no longer serves the
// object's version. Applying it again cannot succeed until someone
// installs the kind on the cluster.
type UnknownKindError struct {
	// Ref is the object.
	Ref osbv1alpha1.Source
	// Err is the RESTMapper's answer.
	Err error
}

// Error implements error.
func (e *UnknownKindError) Error() string {
	gv, _ := schema.ParseGroupVersion(e.Ref.APIVersion)
	return fmt.Sprintf("the cluster does not serve %s (group %q, version %q, kind %q) of %s: install its CRD or API on the cluster, or render a version it serves",
		e.Ref.APIVersion+" "+e.Ref.Kind, gv.Group, gv.Version, e.Ref.Kind, describe(e.Ref))
}

// Unwrap returns the RESTMapper's answer.
func (e *UnknownKindError) Unwrap() error { return e.Err }

// IsPermanent reports whether err says that the objects themselves are at
// fault, so that retrying without a new render cannot help.
func IsPermanent(err error) bool {
	var invalid *InvalidObjectError
	var rejected *RejectedError
	return errors.As(err, &invalid) || errors.As(err, &rejected)
}

// rejected reports whether the API server's answer refuses the object for
// what it is, rather than for the moment. A namespace being terminated is
// Forbidden too, but passes.
func rejected(err error) bool {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err):
		return true
	case apierrors.IsForbidden(err):
		return !strings.Contains(err.Error(), "because it is being terminated")
	case apierrors.IsInternalError(err):
		// The API server passes etcd's refusal of an oversized
		// server-side apply on as an internal error; the same object is
		// refused every time.
		return strings.Contains(err.Error(), "etcdserver: request is too large")
	}
	return false
}

// apiMessage is the API server's message without the client's prefixes.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

func describe(ref osbv1alpha1.Source) string {
	if ref.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", ref.Kind, ref.Namespace, ref.Name)
	}
	return fmt.Sprintf("%s %s", ref.Kind, ref.Name)
}
