package install

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/marketplane/marketplane/charts"
)

// configManifest is the plain manifest generated from the chart
// (hack/manifests), relative to this package.
var configManifest = filepath.Join("..", "..", "config", "marketplane.yaml")

// rbacOf is what an RBAC object grants: for roles their rules (and
// aggregation), for bindings the role and subjects, for ServiceAccounts
// only that they exist.
type rbacOf struct {
	Rules           []rbacv1.PolicyRule
	AggregationRule *rbacv1.AggregationRule
	RoleRef         *rbacv1.RoleRef
	Subjects        []rbacv1.Subject
}

// rbacObjects returns the ServiceAccounts, roles and bindings of objs by
// "Kind namespace/name".
func rbacObjects(t *testing.T, objs []*unstructured.Unstructured) map[string]rbacOf {
	t.Helper()
	out := map[string]rbacOf{}
	for _, u := range objs {
		key := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
		switch u.GetKind() {
		case "ServiceAccount":
			out[key] = rbacOf{}
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			fromUnstructured(t, u, r)
			out[key] = rbacOf{Rules: r.Rules, AggregationRule: r.AggregationRule}
		case "Role":
			r := &rbacv1.Role{}
			fromUnstructured(t, u, r)
			out[key] = rbacOf{Rules: r.Rules}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			fromUnstructured(t, u, b)
			out[key] = rbacOf{RoleRef: &b.RoleRef, Subjects: b.Subjects}
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			fromUnstructured(t, u, b)
			out[key] = rbacOf{RoleRef: &b.RoleRef, Subjects: b.Subjects}
		}
	}
	return out
}

// decodeManifest decodes every object of a multi-document YAML file.
func decodeManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// TestConfigRBACMatchesChart checks that the plain manifests under config/
// grant exactly what the chart rendered with its default values grants:
// the same ServiceAccounts, roles (rules) and bindings (role, subjects).
func TestConfigRBACMatchesChart(t *testing.T) {
	if _, err := os.Stat(configManifest); errors.Is(err, os.ErrNotExist) {
		t.Skipf("no %s", configManifest)
	}
	rendered, err := charts.Render(nil)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	want := rbacObjects(t, rendered)
	got := rbacObjects(t, decodeManifest(t, configManifest))
	if len(want) == 0 {
		t.Fatal("the chart renders no RBAC objects")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RBAC of %s differs from the chart's (-chart +config):\n%s", configManifest, diff)
	}
	t.Logf("%d ServiceAccounts, roles and bindings agree", len(want))
}
