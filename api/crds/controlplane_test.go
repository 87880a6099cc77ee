package crds_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// crdByName returns the embedded CRD name.
func crdByName(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatalf("crds.All(): %v", err)
	}
	for _, crd := range all {
		if crd.Name == name {
			return crd
		}
	}
	t.Fatalf("no embedded CRD %s", name)
	return nil
}

// TestControlPlaneCRD checks what kubectl users and CRD managers rely on for
// openMCP's current control-plane kind, and that its schema is the
// ManagedControlPlane's: one controller serves both, so every field must
// mean the same in both.
func TestControlPlaneCRD(t *testing.T) {
	cp := crdByName(t, "controlplanes."+controlplanev2alpha1.GroupName)
	mcp := crdByName(t, "managedcontrolplanes."+corev2alpha1.GroupName)

	v := cp.Spec.Versions[0]
	got := omcpCRDFacts{
		Plural: cp.Spec.Names.Plural, Scope: cp.Spec.Scope, ShortNames: cp.Spec.Names.ShortNames,
		Cluster: cp.Labels[crds.ClusterLabel], Status: v.Subresources != nil && v.Subresources.Status != nil,
	}
	for _, col := range v.AdditionalPrinterColumns {
		got.Columns = append(got.Columns, col.Name)
	}
	want := omcpCRDFacts{Plural: "controlplanes", Scope: apiextensionsv1.NamespaceScoped, ShortNames: []string{"ctrlp"},
		Cluster: crds.ClusterOnboarding, Status: true, Columns: []string{"Phase", "Ready", "Kubeconfig", "Age"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ControlPlane CRD facts (-want +got):\n%s", diff)
	}
	if cp.Spec.Group != "core.open-control-plane.io" || v.Name != "v2alpha1" || cp.Spec.Names.Kind != "ControlPlane" {
		t.Errorf("CRD serves %s/%s %s, want openMCP's core.open-control-plane.io/v2alpha1 ControlPlane", cp.Spec.Group, v.Name, cp.Spec.Names.Kind)
	}
	routed, err := crds.ForCluster(crds.ClusterOnboarding)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range routed {
		names = append(names, c.Name)
	}
	if !strings.Contains(strings.Join(names, ","), cp.Name) {
		t.Errorf("crds.ForCluster(onboarding) = %v, want it to include %s", names, cp.Name)
	}

	schema := func(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
		s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.DeepCopy()
		s.Description = ""
		return s
	}
	if diff := cmp.Diff(schema(mcp), schema(cp)); diff != "" {
		t.Errorf("the ControlPlane schema differs from the ManagedControlPlane's (-ManagedControlPlane +ControlPlane):\n%s", diff)
	}
}

// TestControlPlaneObjects applies openMCP-shaped ControlPlanes to a real API
// server: every field is stored unchanged and decodes strictly into the Go
// type; the empty defaultProvider that openMCP's Go client sends is
// accepted.
func TestControlPlaneObjects(t *testing.T) {
	c := apiServer(t)
	data, err := os.ReadFile(filepath.Join("testdata", "controlplane", "controlplane.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("decode fixture: %d objects, %v", len(objs), err)
	}
	want := objs[0]

	t.Run("every openMCP field round-trips", func(t *testing.T) {
		obj := want.DeepCopy()
		if err := c.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("create the openMCP ControlPlane: %v", err)
		}
		got := omcpGet(t, c, want)
		if diffs := testenv.FieldDiffs(want.Object, got.Object); len(diffs) > 0 {
			t.Errorf("the API server lost or changed fields:\n  %s", strings.Join(diffs, "\n  "))
		}
		typed := &controlplanev2alpha1.ControlPlane{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(got.Object, typed, true); err != nil {
			t.Fatalf("decode the stored ControlPlane into its Go type: %v", err)
		}
		back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err != nil {
			t.Fatal(err)
		}
		if diffs := testenv.FieldDiffs(want.Object, back); len(diffs) > 0 {
			t.Errorf("the Go type lost or changed fields:\n  %s", strings.Join(diffs, "\n  "))
		}
	})

	t.Run("an empty defaultProvider is accepted", func(t *testing.T) {
		if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}); err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "core.open-control-plane.io/v2alpha1", "kind": "ControlPlane",
			"metadata": map[string]any{"name": "bare", "namespace": "tenant-b"},
			"spec":     map[string]any{"iam": map[string]any{"oidc": map[string]any{"defaultProvider": map[string]any{}}}},
		}}
		if err := c.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("create a ControlPlane with defaultProvider {} (what openMCP's Go type sends): %v", err)
		}
	})
}
