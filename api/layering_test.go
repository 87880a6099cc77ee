package api_test

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// repoRoot is the module root seen from this package's directory, where go
// test runs it.
const repoRoot = ".."

// apiRoots are the directories, relative to the module root, that hold API
// packages: Marketplane's own and the sample provider's (which the scaffold
// writes for every new provider).
var apiRoots = []string{"api", "providers/sample/api"}

// TestAPIImportsOnlyAPI keeps the arrow pointing one way: a package of the
// API layer may import libraries and other API packages, but no other
// package of this module (pkg/..., internal/..., cmd/...). Before the phase
// type moved to api/common, api/osb/v1alpha1 imported pkg/spruntime for it
// and so pulled in ~800 packages. Checking direct imports is enough: when no
// API package imports a non-API package of the module, none reaches one
// through another. Test files are not checked; they may use the runtime.
func TestAPIImportsOnlyAPI(t *testing.T) {
	modPath := modulePath(t)
	isAPI := func(importPath string) bool {
		for _, root := range apiRoots {
			p := modPath + "/" + root
			if importPath == p || strings.HasPrefix(importPath, p+"/") {
				return true
			}
		}
		return false
	}

	var checked []string
	for _, root := range apiRoots {
		err := filepath.WalkDir(filepath.Join(repoRoot, root), func(dir string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			pkg, err := build.ImportDir(dir, 0)
			if noGo := (*build.NoGoError)(nil); errors.As(err, &noGo) {
				return nil
			}
			if err != nil {
				t.Errorf("read package in %s: %v", dir, err)
				return nil
			}
			rel, err := filepath.Rel(repoRoot, dir)
			if err != nil {
				return err
			}
			importPath := path.Join(modPath, filepath.ToSlash(rel))
			checked = append(checked, importPath)
			for _, imp := range pkg.Imports {
				if (imp == modPath || strings.HasPrefix(imp, modPath+"/")) && !isAPI(imp) {
					t.Errorf("API package %s imports %s; API packages may import only packages under %v and libraries (move the shared type into api/common)",
						importPath, imp, apiRoots)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}

	// The walk must have seen the packages that once broke the rule, or a
	// moved directory would make the test pass by checking nothing.
	for _, want := range []string{"api/common", "api/crds", "api/osb/v1alpha1", "providers/sample/api/v1alpha1", "providers/sample/api/crds"} {
		if !slices.Contains(checked, modPath+"/"+want) {
			t.Errorf("package %s was not checked (checked: %v); the walk no longer reaches it", want, checked)
		}
	}
}

// modulePath reads the module path from the module root's go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatalf("read go.mod: %v", err)
	}
	mp := modfile.ModulePath(data)
	if mp == "" {
		t.Fatal("go.mod declares no module path")
	}
	return mp
}
