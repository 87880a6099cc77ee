package crds_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/marketplane/marketplane/api/crds"

	providercrds "github.com/marketplane/marketplane/providers/sample/api/crds"
	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

// TestCRDs checks that the embedded CRDs are those of the Go types, with
// the scope and cluster label `init` relies on. A stale manifest (types
// changed without `make generate`) fails here.
func TestCRDs(t *testing.T) {
	list, err := providercrds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	type facts struct {
		Group, Kind, Plural, Cluster string
		Scope                        apiextensionsv1.ResourceScope
		Versions                     []string
	}
	got := map[string]facts{}
	for _, crd := range list {
		var versions []string
		for _, v := range crd.Spec.Versions {
			versions = append(versions, v.Name)
		}
		got[crd.Name] = facts{
			Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind, Plural: crd.Spec.Names.Plural,
			Cluster: crd.Labels[crds.ClusterLabel], Scope: crd.Spec.Scope, Versions: versions,
		}
	}
	group := apiv1alpha1.GroupVersion.Group
	want := map[string]facts{
		"samples." + group: {
			Group: group, Kind: "Sample", Plural: "samples", Cluster: crds.ClusterOnboarding,
			Scope: apiextensionsv1.NamespaceScoped, Versions: []string{apiv1alpha1.GroupVersion.Version},
		},
		"providerconfigs." + group: {
			Group: group, Kind: "ProviderConfig", Plural: "providerconfigs", Cluster: crds.ClusterPlatform,
			Scope: apiextensionsv1.ClusterScoped, Versions: []string{apiv1alpha1.GroupVersion.Version},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("embedded CRDs (-want +got):\n%s", diff)
	}
}
