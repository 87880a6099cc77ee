package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/validation"
)

// TestConfigIsAValidationSpec reads the manifests a project's config/ holds
// the way its e2e test does: they must make a validation Spec whose
// ServiceProvider, ProviderConfig and service object belong together (the
// ProviderConfig is named like the ServiceProvider, the service object is
// of the project's kind and group), and the e2e test must read each of
// them. Without this, a mismatch shows only in the slow run of the flow.
func TestConfigIsAValidationSpec(t *testing.T) {
	for _, workload := range []bool{false, true} {
		v := newValues(Options{Module: "example.org/acme/velero-provider", Kind: "Velero", WorkloadCluster: workload}, "velero-provider", "velero.acme.example.org")
		files, err := render(v)
		if err != nil {
			t.Fatalf("workload %v: %v", workload, err)
		}
		e2e := string(findFile(files, "test/e2e/validate_test.go"))
		if e2e == "" {
			t.Fatalf("workload %v: no test/e2e/validate_test.go", workload)
		}
		dir := t.TempDir()
		var manifests []string
		for _, f := range files {
			if strings.HasPrefix(f.Path, "config/") {
				name := filepath.Join(dir, filepath.FromSlash(f.Path))
				if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
				manifests = append(manifests, name)
				if !strings.Contains(e2e, `"../../`+f.Path+`"`) {
					t.Errorf("workload %v: test/e2e/validate_test.go does not read %s", workload, f.Path)
				}
			}
		}
		if len(manifests) != 3 {
			t.Fatalf("workload %v: config/ holds %v, want the ServiceProvider, the ProviderConfig and a Velero", workload, manifests)
		}
		spec, err := validation.SpecFromFiles(manifests...)
		if err != nil {
			t.Fatalf("workload %v: %v", workload, err)
		}
		if got := spec.Provider.GetName(); got != v.Name {
			t.Errorf("workload %v: ServiceProvider %q, want %q", workload, got, v.Name)
		}
		kinds := map[string]string{}
		for _, o := range spec.Objects {
			gvk := o.GroupVersionKind()
			if gvk.Group != v.Group {
				t.Errorf("workload %v: %s %s is of group %s, want %s", workload, gvk.Kind, o.GetName(), gvk.Group, v.Group)
			}
			kinds[gvk.Kind] = o.GetName()
		}
		if got := kinds["ProviderConfig"]; got != v.Name {
			t.Errorf("workload %v: ProviderConfig %q, want one named like the ServiceProvider, %q", workload, got, v.Name)
		}
		if _, ok := kinds[v.Kind]; !ok || len(kinds) != 2 {
			t.Errorf("workload %v: objects %v, want a ProviderConfig and a %s", workload, kinds, v.Kind)
		}
	}
}

// findFile returns the data of the file at path in files, or nil.
func findFile(files []File, path string) []byte {
	for _, f := range files {
		if f.Path == path {
			return f.Data
		}
	}
	return nil
}
