package install_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/api/install"
)

// TestSchemeKnowsEveryCRD checks the scheme against the embedded CRDs: each
// served kind and its list decode into Go types, and each group version has
// the meta types (ListOptions and the like) that metav1.AddToGroupVersion
// adds, which controller-runtime's scheme.Builder added implicitly. A kind
// left out of a package's knownTypes fails here, naming it; so does a kind
// registered under a group version no CRD serves.
func TestSchemeKnowsEveryCRD(t *testing.T) {
	s, err := install.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	served := map[schema.GroupVersion]bool{}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			served[gv] = true
			for _, kind := range []string{crd.Spec.Names.Kind, crd.Spec.Names.ListKind} {
				if !s.Recognizes(gv.WithKind(kind)) {
					t.Errorf("the scheme does not know %s of CRD %s; add it to knownTypes in the package of %s", kind, crd.Name, gv)
				}
			}
		}
	}
	for gv := range served {
		if !s.Recognizes(gv.WithKind("ListOptions")) {
			t.Errorf("the scheme has no ListOptions for %s: its addKnownTypes does not call metav1.AddToGroupVersion", gv)
		}
	}
	// Marketplane's groups are those with a CRD; every kind the scheme has
	// in them must be served by one (or be one of the meta types).
	groups := map[string]bool{}
	for gv := range served {
		groups[gv.Group] = true
	}
	meta := map[string]bool{}
	for kind := range s.KnownTypes(metav1.SchemeGroupVersion) {
		meta[kind] = true
	}
	for gvk := range s.AllKnownTypes() {
		// AddToGroupVersion also registers WatchEvent under the group's
		// internal version, which no CRD serves.
		if !groups[gvk.Group] || meta[gvk.Kind] || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if !served[gvk.GroupVersion()] {
			t.Errorf("the scheme registers %s, but no embedded CRD serves %s", gvk, gvk.GroupVersion())
		}
	}
}
