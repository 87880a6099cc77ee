package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    []target
		wantErr string
	}{
		"names from the package path": {
			args: []string{"-o", "bin", "./cmd/tool", "go.etcd.io/etcd/server/v3"},
			want: []target{{name: "tool", pkg: "./cmd/tool"}, {name: "server", pkg: "go.etcd.io/etcd/server/v3"}},
		},
		"a name given": {
			args: []string{"-o", "bin", "etcd=go.etcd.io/etcd/server/v3"},
			want: []target{{name: "etcd", pkg: "go.etcd.io/etcd/server/v3"}},
		},
		"no output directory": {args: []string{"./cmd/tool"}, wantErr: "-o, the output directory, is required"},
		"no package":          {args: []string{"-o", "bin"}, wantErr: "no package to build"},
		"two of a name":       {args: []string{"-o", "bin", "./a/tool", "./b/tool"}, wantErr: `two binaries named "tool"`},
		"a name with a slash": {args: []string{"-o", "bin", "x/y=./cmd/tool"}, wantErr: "NAME a file name"},
		"an unknown flag":     {args: []string{"-o", "bin", "-race", "./cmd/tool"}, wantErr: "usage: buildprogress"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := parseArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseArgs(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tc.args, err)
			}
			if len(o.targets) != len(tc.want) {
				t.Fatalf("targets %v, want %v", o.targets, tc.want)
			}
			for i := range tc.want {
				if o.targets[i] != tc.want[i] {
					t.Errorf("target %d = %+v, want %+v", i, o.targets[i], tc.want[i])
				}
			}
		})
	}
}

func TestProgressLine(t *testing.T) {
	p := newProgress([]string{"a", "b", "c"}, []map[string]bool{
		{"x": true, "y": true},
		{"y": true},
		{},
	})
	for _, pkg := range []string{"y", "y", "unknown"} {
		p.started(pkg)
	}
	p.binaries[2].done = true
	got := p.line(83*time.Second + 400*time.Millisecond)
	want := "building (1m23s, packages compiled/to compile): a 1/2 · b linking · c done"
	if got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
}

// TestBuild builds a module of two commands, one named like a major version
// suffix, and checks the binaries' names, that they run, and the progress
// lines printed while a dependency compiles.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	mod := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A constant unique to this run keeps the shared package out of the
	// build cache, so go build must compile it.
	unique := time.Now().Format(time.RFC3339Nano)
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("shared/shared.go", "package shared\n\nconst Word = \"hello "+unique+"\"\n")
	write("cmd/hello/main.go", "package main\n\nimport (\"fmt\"; \"example.com/m/shared\")\n\nfunc main() { fmt.Println(shared.Word) }\n")
	write("server/v3/main.go", "package main\n\nimport (\"fmt\"; \"example.com/m/shared\")\n\nfunc main() { fmt.Println(\"v3 \" + shared.Word) }\n")

	out := filepath.Join(t.TempDir(), "bin")
	var stdout, stderr bytes.Buffer
	// -every 1ns: a progress line at every tick, so at least one is printed.
	status := run(context.Background(), []string{"-C", mod, "-o", out, "-every", "1ns", "./cmd/hello", "named=example.com/m/server/v3"}, &stdout, &stderr)
	if status != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", status, &stdout, &stderr)
	}
	for name, want := range map[string]string{"hello": "hello " + unique, "named": "v3 hello " + unique} {
		got, err := exec.Command(filepath.Join(out, name)).Output()
		if err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("%s printed %q, want %q", name, got, want)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("output directory holds %d entries, want the two binaries (the build directory removed)", len(entries))
	}
	if !strings.Contains(stdout.String(), "built hello, named into "+out) {
		t.Errorf("no closing line in the output:\n%s", &stdout)
	}
	if stderr.Len() != 0 {
		t.Errorf("go build -v's package names were passed on:\n%s", &stderr)
	}
}

// TestBuildFailure checks that a compile error is passed on and the exit
// status is non-zero.
func TestBuildFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/broken\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nfunc main() { undefinedName() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	status := run(context.Background(), []string{"-C", mod, "-o", filepath.Join(t.TempDir(), "bin"), "."}, &stdout, &stderr)
	if status != 1 {
		t.Errorf("exit status %d, want 1", status)
	}
	if !strings.Contains(stderr.String(), "undefined: undefinedName") || !strings.Contains(stderr.String(), "go build failed") {
		t.Errorf("stderr does not carry the compile error and the failure:\n%s\nstdout:\n%s", &stderr, &stdout)
	}
}
