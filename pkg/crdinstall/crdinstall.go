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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTimeout bounds how long Apply waits for CRDs to be established.
const DefaultTimeout = time.Minute

// Apply creates or updates crds with server-side apply as fieldOwner and
// waits until every one is Established, or timeout passes (DefaultTimeout when
// zero). It fails with the names of the CRDs that did not make it.
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
		if err := c.Apply(ctx, ac, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
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

// Established reports whether the API server serves crd.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
