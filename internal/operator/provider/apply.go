package provider

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// FieldOwner is the field manager of the operator's server-side applies.
const FieldOwner = "marketplane-operator"

// apply server-side applies obj, a typed object that holds exactly the
// fields the operator owns, and reads the result back into obj. Fields
// the operator set before and leaves out now are removed; fields others
// own are left alone. Applying an unchanged object writes nothing.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return fmt.Errorf("apply %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	// A typed object always serialises these; applying them would claim
	// ownership of fields the operator does not set.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("read back %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// Apply server-side applies obj as the operator (field manager FieldOwner)
// and reads the result back into obj, for the operator's other controllers
// that write what belongs to all providers (see apply).
func Apply(ctx context.Context, c client.Client, obj client.Object) error { return apply(ctx, c, obj) }
