package toolsmod

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestSharedVersions fails when the main module and the tools module require
// different versions of a module: the packages of that module, and every
// package above them, would be compiled twice.
func TestSharedVersions(t *testing.T) {
	main := requirements(t, filepath.Join("..", "..", "go.mod"))
	tools := requirements(t, filepath.Join("..", "tools", "cluster", "go.mod"))
	var differ []string
	for path, v := range main {
		if tv, ok := tools[path]; ok && tv != v {
			differ = append(differ, path+": "+v+" in go.mod, "+tv+" in hack/tools/cluster/go.mod")
		}
	}
	sort.Strings(differ)
	if len(differ) > 0 {
		t.Errorf("the main module and the tools module require different versions of %d modules; "+
			"`go get` the higher version in the other module, then `go mod tidy` in both:\n%s",
			len(differ), strings.Join(differ, "\n"))
	}
	if len(main) == 0 || len(tools) == 0 {
		t.Fatalf("read %d requirements from go.mod and %d from the tools module: want both non-empty", len(main), len(tools))
	}
}

// requirements are the module versions a go.mod selects for its
// requirements: the required version, or the version a replace names.
func requirements(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	versions := map[string]string{}
	for _, r := range f.Require {
		versions[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if _, ok := versions[r.Old.Path]; ok && r.New.Version != "" {
			versions[r.Old.Path] = r.New.Version
		}
	}
	return versions
}
