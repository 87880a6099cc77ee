package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// listedPackage is what go list reports of one package, without its tests.
type listedPackage struct {
	ImportPath string
	// Imports are the direct imports, Deps all packages it depends on.
	Imports, Deps []string
}

// TestModuleLayers checks the layers api -> pkg -> internal -> cmd with go
// list, on production code (tests may use anything):
//   - api/ imports only api/ of this module;
//   - no pkg/ package but pkg/providertest (it runs the operator in the
//     test process) imports internal/, nor depends on it through another;
//   - pkg/testenv (API servers for tests) is imported only by cmd/,
//     bench/, pkg/providertest and test helper packages (their name ends
//     in "test"), and no internal/ package but those helpers depends on it.
func TestModuleLayers(t *testing.T) {
	modPath := modulePath(t)
	pkgs := goList(t)
	in := func(p, dir string) bool { return p == modPath+"/"+dir || strings.HasPrefix(p, modPath+"/"+dir+"/") }
	ours := func(p string) bool { return p == modPath || strings.HasPrefix(p, modPath+"/") }
	testenv := modPath + "/pkg/testenv"
	providertest := modPath + "/pkg/providertest"
	testHelper := func(p string) bool { return strings.HasSuffix(path.Base(p), "test") }
	mayUseTestenv := func(p string) bool {
		return in(p, "cmd") || in(p, "bench") || p == providertest || p == testenv || testHelper(p)
	}

	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
		for _, imp := range p.Imports {
			switch {
			case in(p.ImportPath, "api") && ours(imp) && !in(imp, "api"):
				t.Errorf("%s imports %s: api/ may import only api/ of this module", p.ImportPath, imp)
			case in(p.ImportPath, "pkg") && p.ImportPath != providertest && in(imp, "internal"):
				t.Errorf("%s imports %s: pkg/ may not import internal/ (only pkg/providertest may)", p.ImportPath, imp)
			case imp == testenv && !mayUseTestenv(p.ImportPath):
				t.Errorf("%s imports %s: only cmd/, bench/, pkg/providertest and test helper packages may", p.ImportPath, imp)
			}
		}
		if in(p.ImportPath, "pkg") && p.ImportPath != providertest {
			if i := slices.IndexFunc(p.Deps, func(d string) bool { return in(d, "internal") }); i >= 0 {
				t.Errorf("%s depends on %s: pkg/ may not depend on internal/ (only pkg/providertest may)", p.ImportPath, p.Deps[i])
			}
		}
		if in(p.ImportPath, "internal") && !testHelper(p.ImportPath) && slices.Contains(p.Deps, testenv) {
			t.Errorf("%s depends on %s: production code must not link the test API servers", p.ImportPath, testenv)
		}
	}
	// The packages that once broke the rules must have been checked.
	for _, want := range []string{"pkg/validation", "pkg/providertest", "pkg/testenv", "internal/cli", "internal/operator/internal/optest", "api/common"} {
		if !seen[modPath+"/"+want] {
			t.Errorf("go list did not report %s; the check no longer reaches it", want)
		}
	}
}

// goList lists the module's packages, without their tests.
func goList(t *testing.T) []listedPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH (the layering check needs go list): %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "list", "-e", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
