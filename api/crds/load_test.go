package crds_test

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/marketplane/marketplane/api/crds"
)

// crdYAML is a minimal CustomResourceDefinition named name.
func crdYAML(name string) string {
	return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n"
}

// TestLoad covers the loader every api/crds package uses: file-name order,
// only .yaml files directly in the directory, strict decoding, and errors
// that name the file.
func TestLoad(t *testing.T) {
	t.Run("DecodesYAMLFilesInNameOrder", func(t *testing.T) {
		fsys := fstest.MapFS{
			"m/b.yaml":        {Data: []byte(crdYAML("bs.example.com"))},
			"m/a.yaml":        {Data: []byte(crdYAML("as.example.com"))},
			"m/README.md":     {Data: []byte("not a CRD")},
			"m/sub/c.yaml":    {Data: []byte(crdYAML("cs.example.com"))},
			"other/d.yaml":    {Data: []byte(crdYAML("ds.example.com"))},
			"m/broken.yaml.x": {Data: []byte("{")},
		}
		got, err := crds.Load(fsys, "m")
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		var names []string
		for _, crd := range got {
			names = append(names, crd.Name)
		}
		if want := []string{"as.example.com", "bs.example.com"}; !slices.Equal(names, want) {
			t.Errorf("Load returned %v, want %v (the .yaml files directly in m, by file name)", names, want)
		}
	})
	t.Run("FreshCopies", func(t *testing.T) {
		fsys := fstest.MapFS{"m/a.yaml": {Data: []byte(crdYAML("as.example.com"))}}
		first, err := crds.Load(fsys, "m")
		if err != nil {
			t.Fatal(err)
		}
		first[0].Name = "changed"
		second, err := crds.Load(fsys, "m")
		if err != nil {
			t.Fatal(err)
		}
		if second[0].Name != "as.example.com" {
			t.Errorf("a change to a loaded CRD leaked into the next Load: name %q", second[0].Name)
		}
	})
	for name, tc := range map[string]struct {
		reason string
		fsys   fstest.MapFS
		dir    string
		want   []string
	}{
		"UnknownField": {
			reason: "a field the CRD type does not know must not be dropped silently",
			fsys:   fstest.MapFS{"m/x.yaml": {Data: []byte(crdYAML("xs.example.com") + "spec:\n  scopee: Cluster\n")}},
			dir:    "m",
			want:   []string{"decode m/x.yaml", "scopee"},
		},
		"NotYAML": {
			reason: "a broken manifest is an error naming its file",
			fsys:   fstest.MapFS{"m/x.yaml": {Data: []byte("metadata: [")}},
			dir:    "m",
			want:   []string{"decode m/x.yaml"},
		},
		"NoDirectory": {
			reason: "a wrong directory is an error, not an empty list",
			fsys:   fstest.MapFS{"m/x.yaml": {Data: []byte(crdYAML("xs.example.com"))}},
			dir:    "manifests",
			want:   []string{"read CRD manifests in manifests"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := crds.Load(tc.fsys, tc.dir)
			if err == nil {
				t.Fatalf("%s: Load succeeded, want an error containing %q", tc.reason, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not contain %q", tc.reason, err, w)
				}
			}
		})
	}
}

// TestAllIsSortedByName checks the order All promises, which Load (file
// names are group_plural) does not give by itself.
func TestAllIsSortedByName(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("All returned no CRDs")
	}
	if !slices.IsSortedFunc(all, func(a, b *apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("All is not sorted by CRD name")
	}
}
