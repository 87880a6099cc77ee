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

// TestPruneSharedSparesDirectoriesBeingWritten prunes while another test
// process records the module of a shared directory: the record is replaced
// atomically, so pruning never reads it empty and removes a directory a
// build is using. Writing it in place (truncate, then write) made the
// CI-like run of the whole suite fail with "creating work dir: no such
// file or directory".
func TestPruneSharedSparesDirectoriesBeingWritten(t *testing.T) {
	parent := t.TempDir()
	modules := []string{t.TempDir(), t.TempDir()}
	dir := filepath.Join(parent, "busy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 3000 {
			// Two modules in turn, so that each call writes the file.
			if err := writeModuleFile(dir, modules[i%2]); err != nil {
				t.Errorf("write the module file: %v", err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		pruneShared(parent)
		if _, err := os.Stat(dir); err != nil {
			<-done
			t.Fatalf("pruning removed the directory of an existing module while its record was written: %v", err)
		}
	}
}
