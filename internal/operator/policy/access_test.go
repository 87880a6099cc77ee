package policy

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// TestNamespacesOfOwnFirst checks the order of a provider's namespaces:
// the one the operator created (controller reference) first, whatever the
// names, then those a platform operator registered for it, sorted; others'
// namespaces and unlabelled ones are not the provider's.
func TestNamespacesOfOwnFirst(t *testing.T) {
	ns := func(name, owner string, controller bool, labelled bool) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: providerv1alpha1.GroupVersion.String(), Kind: "ServiceProvider", Name: owner, UID: "u", Controller: ptr.To(controller),
		}}}}
		if labelled {
			n.Labels = map[string]string{providerKindLabel: "ServiceProvider", providerv1alpha1.ManagedByLabel: managedByOperator}
		}
		return n
	}
	c := fake.NewClientBuilder().WithObjects(
		ns("b-registered", "x", false, true),
		ns("sp-x", "x", true, true),
		ns("a-registered", "x", false, true),
		ns("sp-y", "y", true, true),
		ns("unlabelled", "x", false, false),
	).Build()
	got, err := NamespacesOf(t.Context(), c, "ServiceProvider", "x")
	if want := []string{"sp-x", "a-registered", "b-registered"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("NamespacesOf = %v, %v; want %v", got, err, want)
	}
}
