// Package crdinstall installs CustomResourceDefinitions into a cluster and
// waits until the API server serves them. Provider init commands and the
// operator's init use it; it is safe to run again and again (server-side
// apply with a fixed field owner).
package crdinstall

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTimeout bounds how long Apply waits for CRDs to be established.
const DefaultTimeout = time.Minute

// Apply creates or updates crds with server-side apply as fieldOwner and
// waits until every one is Established, or timeout passes (DefaultTimeout when
// zero). It fails with the names of the CRDs that did not make it.
//
// An API server that is overloaded or still starting answers some requests
// with a timeout, 429, 503 or 500 ("etcdserver: request timed out"), or drops
// the connection. Apply repeats such a request, which is safe because a
// server-side apply is idempotent, for up to timeout after its first failure
// (which may itself be the server's own 60-second request timeout); errors
// about the CRD itself (an invalid name or schema) end it at once.
func Apply(ctx context.Context, c client.Client, fieldOwner string, timeout time.Duration, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	for _, crd := range crds {
		desired := crd.DeepCopy()
		desired.APIVersion, desired.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
		desired.ResourceVersion, desired.Status = "", apiextensionsv1.CustomResourceDefinitionStatus{}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
		if err != nil {
			return fmt.Errorf("convert CRD %s: %w", crd.Name, err)
		}
		delete(u, "status")
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
		err = retryTransient(ctx, timeout, func() error {
			return c.Apply(ctx, ac, client.FieldOwner(fieldOwner), client.ForceOwnership)
		})
		if err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
				if Transient(err) {
					// Asked again at the next poll, within the same timeout.
					pending = append(pending, crd.Name)
					continue
				}
				return false, fmt.Errorf("get CRD %s: %w", crd.Name, err)
			}
			if !Established(got) {
				pending = append(pending, crd.Name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		if len(pending) > 0 {
			return fmt.Errorf("CRDs not established after %s: %v: %w", timeout, pending, err)
		}
		return err
	}
	return nil
}

// ApplyMissing installs those of crds the cluster lacks, as Apply does, and
// leaves alone those it has (a cluster may run newer versions of them,
// installed by their own owner). It returns how many it installed.
func ApplyMissing(ctx context.Context, c client.Client, fieldOwner string, timeout time.Duration, crds ...*apiextensionsv1.CustomResourceDefinition) (int, error) {
	var missing []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextensionsv1.CustomResourceDefinition{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, crd)
		case err != nil:
			return 0, fmt.Errorf("get CRD %s: %w", crd.Name, err)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	if err := Apply(ctx, c, fieldOwner, timeout, missing...); err != nil {
		return 0, err
	}
	return len(missing), nil
}

// Transient reports whether err is one an overloaded or starting API server
// gives for a request that may succeed when sent again unchanged: a server or
// client timeout, 429 Too Many Requests, 503 Service Unavailable, 500 Internal
// Error (etcd timeouts arrive as one), or a connection reset or cut short.
func Transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// retryTransient calls do until it returns nil or an error that is not
// Transient, or until window has passed since its first error or ctx ends;
// then it returns the last error. Waits between calls grow from 200 ms to
// 5 s.
func retryTransient(ctx context.Context, window time.Duration, do func() error) error {
	delay := 200 * time.Millisecond
	var deadline time.Time
	for {
		err := do()
		if err == nil || !Transient(err) {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(window)
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("gave up retrying: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// Established reports whether the API server serves crd.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
