package scaffold

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/modfile"
)

// repoRoot is the Marketplane checkout the tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := FindModuleRoot(".", MarketplaneModule)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// sampleOptions are the options providers/sample is generated with.
func sampleOptions(root string) Options {
	return Options{
		Module:          MarketplaneModule + "/providers/sample",
		Kind:            "Sample",
		Group:           "sample",
		WorkloadCluster: true,
		Dir:             "providers/sample",
		WorkDir:         root,
		InModule:        true,
	}
}

// regenerateSample is how to bring providers/sample up to date.
const regenerateSample = "rm -rf providers/sample && go run ./cmd/marketplane scaffold provider --module " + MarketplaneModule +
	"/providers/sample --kind Sample --group sample --workload-cluster --dir providers/sample --in-module"

// TestSampleIsScaffoldOutput keeps providers/sample exactly what the
// scaffold writes, so that the sample can never drift from it (and the
// scaffold's output is what `make test` tests there).
func TestSampleIsScaffoldOutput(t *testing.T) {
	root := repoRoot(t)
	p, err := NewProject(sampleOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range p.Files {
		want[f.Path] = string(f.Data)
	}
	got := map[string]string{}
	dir := filepath.Join(root, "providers", "sample")
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("providers/sample/%s is missing", name)
		}
	}
	for name, data := range got {
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("providers/sample/%s is not scaffold output", name)
		case w != data:
			t.Errorf("providers/sample/%s differs from the scaffold's output (-scaffold +file):\n%s", name, cmp.Diff(w, data))
		}
	}
	if t.Failed() {
		t.Logf("to regenerate the sample, run in the repository root:\n  %s", regenerateSample)
	}
}

func TestNewProjectValidates(t *testing.T) {
	root := repoRoot(t)
	notMarketplane := t.TempDir()
	if err := os.WriteFile(filepath.Join(notMarketplane, "go.mod"), []byte("module example.org/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	valid := func(mutate func(*Options)) Options {
		o := Options{Module: "example.org/acme/velero-provider", Kind: "Velero", Group: "velero", Dir: t.TempDir(), WorkDir: root}
		mutate(&o)
		return o
	}
	cases := map[string]struct {
		reason  string
		opts    Options
		wantErr []string
	}{
		"NoModule": {
			reason:  "the module path is required",
			opts:    valid(func(o *Options) { o.Module = "" }),
			wantErr: []string{"--module is required"},
		},
		"BadModule": {
			reason:  "the module path must be a valid Go module path",
			opts:    valid(func(o *Options) { o.Module = "velero provider" }),
			wantErr: []string{`--module "velero provider" is not a valid Go module path`},
		},
		"MarketplaneModule": {
			reason:  "Marketplane's own module cannot be the new provider's",
			opts:    valid(func(o *Options) { o.Module = MarketplaneModule }),
			wantErr: []string{"Marketplane's own module"},
		},
		"NoKind": {
			reason:  "the kind is required",
			opts:    valid(func(o *Options) { o.Kind = "" }),
			wantErr: []string{"--kind is required"},
		},
		"LowerCaseKind": {
			reason:  "a kind is UpperCamelCase",
			opts:    valid(func(o *Options) { o.Kind = "velero" }),
			wantErr: []string{`--kind "velero": want a Kubernetes kind`},
		},
		"KindWithUnderscore": {
			reason:  "a kind has letters and digits only",
			opts:    valid(func(o *Options) { o.Kind = "Velero_Backup" }),
			wantErr: []string{`--kind "Velero_Backup"`},
		},
		"KindProviderConfig": {
			reason:  "the generated package already has ProviderConfig",
			opts:    valid(func(o *Options) { o.Kind = "ProviderConfig" }),
			wantErr: []string{"that name is taken"},
		},
		"KindYAMLKeyword": {
			reason:  "a kind YAML reads as a boolean would not survive the CRD",
			opts:    valid(func(o *Options) { o.Kind = "TrUe" }),
			wantErr: []string{"that name is taken"},
		},
		"KindEndsInList": {
			reason:  "a kind ending in List is confused with a list type",
			opts:    valid(func(o *Options) { o.Kind = "BackupList" }),
			wantErr: []string{"ending in List"},
		},
		"KindTooLong": {
			reason:  "derived names must fit Kubernetes' limits",
			opts:    valid(func(o *Options) { o.Kind = "V" + strings.Repeat("e", maxKindLength) }),
			wantErr: []string{"at most 50 characters"},
		},
		"NoGroup": {
			reason:  "the group is required",
			opts:    valid(func(o *Options) { o.Group = "" }),
			wantErr: []string{"--group is required"},
		},
		"UpperCaseGroup": {
			reason:  "a group is a DNS subdomain, lower case",
			opts:    valid(func(o *Options) { o.Group = "Velero" }),
			wantErr: []string{`--group "Velero": the API group "Velero.services.openmcp.cloud" is not a DNS subdomain`},
		},
		"GroupWithUnderscore": {
			reason:  "a group is a DNS subdomain",
			opts:    valid(func(o *Options) { o.Group = "velero_backup.example.org" }),
			wantErr: []string{`--group "velero_backup.example.org"`},
		},
		"ReservedGroup": {
			reason:  "Kubernetes' groups are not for providers",
			opts:    valid(func(o *Options) { o.Group = "velero.k8s.io" }),
			wantErr: []string{"is reserved"},
		},
		"BadName": {
			reason:  "an explicit name must be a DNS label",
			opts:    valid(func(o *Options) { o.Name = "Velero" }),
			wantErr: []string{`--name "Velero"`},
		},
		"AllAtOnce": {
			reason:  "every invalid input is reported at once",
			opts:    valid(func(o *Options) { o.Module, o.Kind, o.Group = "", "velero", "" }),
			wantErr: []string{"--module is required", "--kind", "--group is required"},
		},
		"NotMarketplane": {
			reason:  "--marketplane-path must be a Marketplane checkout",
			opts:    valid(func(o *Options) { o.MarketplanePath = notMarketplane }),
			wantErr: []string{"is not module " + MarketplaneModule},
		},
		"InModuleWrongImportPath": {
			reason:  "in a module, --module must be the directory's import path",
			opts:    valid(func(o *Options) { o.InModule, o.Dir = true, filepath.Join(root, "providers", "other") }),
			wantErr: []string{`must be the import path`, `"` + MarketplaneModule + `/providers/other"`},
		},
		"InModuleOutsideModule": {
			reason:  "in a module needs a module",
			opts:    valid(func(o *Options) { o.InModule, o.Dir = true, t.TempDir() }),
			wantErr: []string{"is not inside a Go module"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewProject(tc.opts)
			if err == nil {
				t.Fatalf("%s\nNewProject: want an error, got none", tc.reason)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s\nerror %q does not contain %q", tc.reason, err, want)
				}
			}
		})
	}
}

func TestNewProjectResolves(t *testing.T) {
	root := repoRoot(t)
	cases := map[string]struct {
		reason                string
		opts                  Options
		wantName, wantGroup   string
		wantReplace, wantNote string
		wantFiles             []string
		noFiles               []string
	}{
		"ShortGroupAndDetectedCheckout": {
			reason:   "a group without a dot gets the openMCP suffix; the checkout above the working directory is found",
			opts:     Options{Module: "example.org/acme/service-provider-velero", Kind: "Velero", Group: "velero", WorkDir: filepath.Join(root, "internal")},
			wantName: "service-provider-velero", wantGroup: "velero.services.openmcp.cloud", wantReplace: root,
			wantFiles: []string{"go.mod", "go.sum", "cmd/service-provider-velero/main.go", "api/v1alpha1/velero_types.go", "api/crds/manifests/velero.services.openmcp.cloud_veleros.yaml"},
		},
		"FullGroupMajorVersionAndExplicitPath": {
			reason:   "a group with a dot is kept; the name skips a major version suffix; --marketplane-path wins",
			opts:     Options{Module: "example.org/acme/Backup/v2", Kind: "Policy", Group: "backup.acme.example.org", WorkDir: t.TempDir(), MarketplanePath: root},
			wantName: "backup", wantGroup: "backup.acme.example.org", wantReplace: root,
			wantFiles: []string{"api/crds/manifests/backup.acme.example.org_policies.yaml"},
		},
		"NoCheckout": {
			reason:   "without a checkout, go.mod has no replace and the notes say how to add one",
			opts:     Options{Module: "example.org/foo", Kind: "Foo", Group: "foo", Name: "foo-provider", WorkDir: t.TempDir()},
			wantName: "foo-provider", wantGroup: "foo.services.openmcp.cloud", wantNote: "go mod edit -replace " + MarketplaneModule + "=",
			wantFiles: []string{"go.mod", "cmd/foo-provider/main.go"},
			noFiles:   []string{"go.sum"},
		},
		"InModule": {
			reason:   "in a module there is no go.mod",
			opts:     sampleOptions(root),
			wantName: "sample", wantGroup: "sample.services.openmcp.cloud",
			wantFiles: []string{"cmd/sample/main.go"},
			noFiles:   []string{"go.mod", "go.sum"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := NewProject(tc.opts)
			if err != nil {
				t.Fatalf("%s\nNewProject: %v", tc.reason, err)
			}
			if p.Name != tc.wantName || p.Group != tc.wantGroup || p.Replace != tc.wantReplace {
				t.Errorf("%s\nname, group, replace = %q, %q, %q; want %q, %q, %q", tc.reason, p.Name, p.Group, p.Replace, tc.wantName, tc.wantGroup, tc.wantReplace)
			}
			var paths []string
			for _, f := range p.Files {
				paths = append(paths, f.Path)
			}
			for _, f := range tc.wantFiles {
				if !slices.Contains(paths, f) {
					t.Errorf("%s\nno file %s in %v", tc.reason, f, paths)
				}
			}
			for _, f := range tc.noFiles {
				if slices.Contains(paths, f) {
					t.Errorf("%s\nunexpected file %s", tc.reason, f)
				}
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tc.wantNote) {
				t.Errorf("%s\nnotes %q do not say %q", tc.reason, p.Notes, tc.wantNote)
			}
			if i := slices.Index(paths, "go.mod"); i >= 0 {
				checkGoMod(t, p.Files[i].Data, tc.opts.Module, tc.wantReplace)
			}
		})
	}
}

// checkGoMod checks the module, the requirement of Marketplane and the
// replace directive of a generated go.mod.
func checkGoMod(t *testing.T, data []byte, module, replace string) {
	t.Helper()
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatalf("generated go.mod: %v\n%s", err, data)
	}
	if f.Module.Mod.Path != module {
		t.Errorf("go.mod module = %s, want %s", f.Module.Mod.Path, module)
	}
	if !slices.ContainsFunc(f.Require, func(r *modfile.Require) bool { return r.Mod.Path == MarketplaneModule && !r.Indirect }) {
		t.Errorf("go.mod does not require %s directly:\n%s", MarketplaneModule, data)
	}
	var got string
	for _, r := range f.Replace {
		if r.Old.Path == MarketplaneModule {
			got = r.New.Path
		}
	}
	if got != replace {
		t.Errorf("go.mod replaces %s with %q, want %q", MarketplaneModule, got, replace)
	}
}

// TestRenderVariants renders kinds that sort before, between and after the
// ProviderConfig types (the deepcopy code is ordered by type name), with
// and without a workload cluster: every Go file must parse, and the
// deepcopy methods must come in controller-gen's order.
func TestRenderVariants(t *testing.T) {
	for _, kind := range []string{"Alpha", "Provider", "Sample", "Zebra9"} {
		for _, workload := range []bool{false, true} {
			v := newValues(Options{Module: "example.org/x", Kind: kind, WorkloadCluster: workload}, "x", "x.example.org")
			files, err := render(v)
			if err != nil {
				t.Fatalf("%s, workload %v: %v", kind, workload, err)
			}
			for _, f := range files {
				if !strings.HasSuffix(f.Path, ".go") {
					continue
				}
				fset := token.NewFileSet()
				file, err := parser.ParseFile(fset, f.Path, f.Data, parser.AllErrors)
				if err != nil {
					t.Errorf("%s, workload %v: %s: %v", kind, workload, f.Path, err)
					continue
				}
				// Imports are grouped: the standard library never shares a
				// group with other imports.
				for i := 1; i < len(file.Imports); i++ {
					a, b := file.Imports[i-1], file.Imports[i]
					sameGroup := fset.Position(b.Pos()).Line == fset.Position(a.Pos()).Line+1
					if sameGroup && isStd(a.Path.Value) != isStd(b.Path.Value) {
						t.Errorf("%s, workload %v: %s: %s and %s share an import group", kind, workload, f.Path, a.Path.Value, b.Path.Value)
					}
				}
				if strings.HasSuffix(f.Path, "zz_generated.deepcopy.go") {
					var order []string
					for _, line := range bytes.Split(f.Data, []byte("\n")) {
						if s := string(line); strings.HasPrefix(s, "func (in *") && strings.Contains(s, ") DeepCopyInto(") {
							order = append(order, strings.TrimPrefix(strings.SplitN(s, ")", 2)[0], "func (in *"))
						}
					}
					// The ProviderConfig's Workload type comes with the
					// workload cluster.
					want := 7
					if workload {
						want = 8
					}
					if !slices.IsSorted(order) || len(order) != want {
						t.Errorf("%s, workload %v: deepcopy types in the order %v, want %d sorted by name", kind, workload, order, want)
					}
				}
			}
		}
	}
}

// isStd reports whether a quoted import path is of the standard library.
func isStd(quoted string) bool {
	first, _, _ := strings.Cut(strings.Trim(quoted, `"`), "/")
	return !strings.Contains(first, ".")
}

func TestPlural(t *testing.T) {
	cases := map[string]string{
		"velero": "veleros", "fooservice": "fooservices", "policy": "policies", "gateway": "gateways",
		"redis": "redises", "box": "boxes", "batch": "batches", "mesh": "meshes", "y": "ys",
	}
	for in, want := range cases {
		if got := plural(in); got != want {
			t.Errorf("plural(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDefaultGoVersion keeps the go directive of projects without a known
// checkout equal to Marketplane's.
func TestDefaultGoVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Go.Version != defaultGoVersion {
		t.Errorf("defaultGoVersion = %s, Marketplane's go.mod says %s", defaultGoVersion, f.Go.Version)
	}
}

func TestWriteRefusesToOverwrite(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	p, err := NewProject(Options{Module: "example.org/acme/velero", Kind: "Velero", Group: "velero", Dir: dir, WorkDir: root})
	if err != nil {
		t.Fatal(err)
	}
	existing := []string{"README.md", "api/v1alpha1/velero_types.go"}
	for _, name := range existing {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = p.Write()
	if err == nil {
		t.Fatal("Write over existing files: want an error")
	}
	for _, name := range existing {
		if !strings.Contains(err.Error(), filepath.Join(dir, name)) {
			t.Errorf("error does not name the existing %s: %v", name, err)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, name)); string(data) != "mine" {
			t.Errorf("%s was overwritten", name)
		}
	}
	var written []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			written = append(written, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(written)
	if diff := cmp.Diff(existing, written); diff != "" {
		t.Errorf("files after a refused Write (-want +got):\n%s", diff)
	}

	// Into an empty directory everything is written, once.
	fresh := *p
	fresh.Dir = filepath.Join(t.TempDir(), "new")
	if err := fresh.Write(); err != nil {
		t.Fatal(err)
	}
	for _, f := range fresh.Files {
		data, err := os.ReadFile(filepath.Join(fresh.Dir, filepath.FromSlash(f.Path)))
		if err != nil || !bytes.Equal(data, f.Data) {
			t.Errorf("%s not written as rendered: %v", f.Path, err)
		}
	}
	if err := fresh.Write(); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("second Write: want a refusal, got %v", err)
	}
}

func TestFindModuleRoot(t *testing.T) {
	root := repoRoot(t)
	got, err := FindModuleRoot(filepath.Join(root, "internal", "scaffold", "templates"), MarketplaneModule)
	if err != nil || got != root {
		t.Errorf("FindModuleRoot from a subdirectory = %q, %v; want %q", got, err, root)
	}
	if _, err := FindModuleRoot(t.TempDir(), MarketplaneModule); !errors.Is(err, ErrModuleNotFound) {
		t.Errorf("FindModuleRoot outside: want ErrModuleNotFound, got %v", err)
	}
}
