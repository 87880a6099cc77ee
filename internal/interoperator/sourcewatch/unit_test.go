package sourcewatch

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIdentityOnly: the informers' stores keep an object's identity and
// nothing else, so that a kind with many large objects costs little.
func TestIdentityOnly(t *testing.T) {
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{"a": "b"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
			Finalizers:    []string{"f"},
		},
	}
	out, err := identityOnly(in)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	want := metav1.ObjectMeta{Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "7"}
	if got.Namespace != want.Namespace || got.Name != want.Name || got.UID != want.UID || got.ResourceVersion != want.ResourceVersion {
		t.Errorf("identity %+v, want %+v", got.ObjectMeta, want)
	}
	if got.Labels != nil || got.Annotations != nil || got.ManagedFields != nil || got.Finalizers != nil {
		t.Errorf("kept more than the identity: %+v", got.ObjectMeta)
	}
	if got.Kind != "Secret" {
		t.Errorf("kind %q, want Secret", got.Kind)
	}
	// Anything else (a tombstone) passes unchanged.
	if o, _ := identityOnly("x"); o != "x" {
		t.Errorf("a non-metadata object was changed: %v", o)
	}
}
