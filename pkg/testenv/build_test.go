package testenv_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestBuildBinariesLinksOnce builds a small module's binary three times,
// changing its source before the third build. The first two builds give
// the same file (linked once, shared), and the third a new one, while the
// first keeps running the old program: a binary a test runs is never
// rewritten under it. A fourth build replaces a binary the directory had.
func TestBuildBinariesLinksOnce(t *testing.T) {
	testenv.SkipIfShort(t)
	// The shared build directory lives under the temporary directory:
	// this test's own, so that it goes with the test.
	t.Setenv("TMPDIR", t.TempDir())
	module := t.TempDir()
	writeHello := func(greeting string) {
		t.Helper()
		src := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(" + `"` + greeting + `"` + ") }\n"
		for name, data := range map[string]string{"go.mod": "module example.com/hello\n\ngo 1.26\n", "main.go": src} {
			if err := os.WriteFile(filepath.Join(module, name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(dir string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(dir, "hello")).Output()
		if err != nil {
			t.Fatalf("run %s/hello: %v", dir, err)
		}
		return strings.TrimSpace(string(out))
	}
	same := func(a, b string) bool {
		t.Helper()
		fa, err := os.Stat(filepath.Join(a, "hello"))
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.Stat(filepath.Join(b, "hello"))
		if err != nil {
			t.Fatal(err)
		}
		return os.SameFile(fa, fb)
	}
	writeHello("one")
	t.Chdir(module)
	// The third directory does not exist yet: like `go build -o`,
	// BuildBinaries creates it.
	first, second, third := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "bin")
	testenv.BuildBinaries(t, first, ".")
	testenv.BuildBinaries(t, second, ".")
	if !same(first, second) {
		t.Error("the second build of unchanged packages linked a binary of its own; want the shared one")
	}
	writeHello("two")
	testenv.BuildBinaries(t, third, ".")
	if same(first, third) {
		t.Error("the build of changed packages wrote into the file an earlier build handed out")
	}
	if got := run(first); got != "one" {
		t.Errorf("first build runs %q, want %q", got, "one")
	}
	if got := run(third); got != "two" {
		t.Errorf("third build runs %q, want %q", got, "two")
	}
	// A directory that has a binary of the name already (bin/ after
	// `make build`, or a link to it) gets the new one, as with `go build
	// -o dir/`; the old file is not written to.
	stale := t.TempDir()
	if err := os.Symlink(filepath.Join(first, "hello"), filepath.Join(stale, "hello")); err != nil {
		t.Fatal(err)
	}
	testenv.BuildBinaries(t, stale, ".")
	if got := run(stale); got != "two" {
		t.Errorf("a build into a directory that had the binary runs %q, want %q", got, "two")
	}
	if got := run(first); got != "one" {
		t.Errorf("the binary a directory had before the build runs %q now, want %q", got, "one")
	}
	// Linked without DWARF and symbol table (-s -w), which costs less CPU.
	bin, err := elf.Open(filepath.Join(third, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, section := range []string{".debug_info", ".symtab"} {
		if bin.Section(section) != nil {
			t.Errorf("the binary has a %s section; want it linked with -ldflags=-s -w", section)
		}
	}
}
