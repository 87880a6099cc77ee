package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPruneSharedRemovesDirectoriesOfGoneModules keeps the shared build
// directory of a module that exists and removes that of one that is gone
// (a scaffolded module a finished test removed).
func TestPruneSharedRemovesDirectoriesOfGoneModules(t *testing.T) {
	parent, module := t.TempDir(), t.TempDir()
	shared := func(name, module string) string {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, moduleFile), []byte(module), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	kept := shared("kept", module)
	gone := shared("gone", filepath.Join(module, "removed"))
	pruneShared(parent)
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("directory of an existing module: %v; want it kept", err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("directory of a module that is gone: %v; want it removed", err)
	}
}
