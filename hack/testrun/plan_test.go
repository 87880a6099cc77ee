package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseArgs(t *testing.T) {
	cases := map[string]struct {
		reason  string
		args    []string
		want    options
		wantErr bool
	}{
		"MakefileLine": {
			reason: "make test's flags: test flags become -test.* flags, -p and the patterns stay with testrun",
			args:   []string{"-count=1", "-timeout=30m", "-p", "4", "./test/e2e", "./..."},
			want: options{
				parallel: 4, binDir: "bin/testbin", timeout: 30 * time.Minute,
				buildArgs: []string{"-ldflags=-s -w"},
				testArgs:  []string{"-test.paniconexit0", "-test.count=1", "-test.timeout=30m"},
				patterns:  []string{"./test/e2e", "./..."},
			},
		},
		"Defaults": {
			reason: "without flags: go test's default timeout, the current directory's package",
			args:   nil,
			want: options{
				parallel: 4, binDir: "bin/testbin", timeout: 10 * time.Minute,
				buildArgs: []string{"-ldflags=-s -w"},
				testArgs:  []string{"-test.paniconexit0", "-test.timeout=10m0s"},
				patterns:  []string{"."},
			},
		},
		"VerboseShortRunAndBuildFlags": {
			reason: "booleans in either form, values after a space, build flags for go test -c (-ldflags after go test's -s -w)",
			args:   []string{"-v", "--short=true", "-run", "TestCRDs", "-race", "-tags=e2e", "-bindir", "x", "./a", "-failfast", "-ldflags", "-X a.b=c"},
			want: options{
				parallel: 4, binDir: "x", timeout: 10 * time.Minute, verbose: true, failFast: true,
				buildArgs: []string{"-race", "-tags=e2e", "-ldflags=-s -w -X a.b=c"},
				testArgs: []string{"-test.paniconexit0", "-test.v=true", "-test.short=true", "-test.run=TestCRDs",
					"-test.failfast=true", "-test.timeout=10m0s"},
				patterns: []string{"./a"},
			},
		},
		"VerboseOff": {
			reason: "-v=false is passed on and does not turn on the output of passing packages",
			args:   []string{"-v=false", "-timeout", "0"},
			want: options{
				parallel: 4, binDir: "bin/testbin",
				buildArgs: []string{"-ldflags=-s -w"},
				testArgs:  []string{"-test.paniconexit0", "-test.v=false", "-test.timeout=0"},
				patterns:  []string{"."},
			},
		},
		"NiceAndFavor": {
			reason: "-nice for every test binary but those -favor names, comma-separated or repeated",
			args:   []string{"-nice", "10", "-favor", "./test/e2e,m/x", "-favor=m/y", "./..."},
			want: options{
				parallel: 4, binDir: "bin/testbin", timeout: 10 * time.Minute, nice: 10,
				favored:   []string{"./test/e2e", "m/x", "m/y"},
				buildArgs: []string{"-ldflags=-s -w"},
				testArgs:  []string{"-test.paniconexit0", "-test.timeout=10m0s"},
				patterns:  []string{"./..."},
			},
		},
		"BadNice": {
			reason:  "a niceness above 19 does not exist",
			args:    []string{"-nice=20"},
			wantErr: true,
		},
		"UnknownFlag": {
			reason:  "a flag testrun cannot honour (coverage, json) is refused, not dropped",
			args:    []string{"-coverprofile=c.out", "./..."},
			wantErr: true,
		},
		"MissingValue": {
			reason:  "a value flag at the end",
			args:    []string{"-run"},
			wantErr: true,
		},
		"BadParallelism": {
			reason:  "-p must be positive",
			args:    []string{"-p=0"},
			wantErr: true,
		},
		"BadBool": {
			reason:  "-short=maybe is not a boolean",
			args:    []string{"-short=maybe"},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseArgs(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nparseArgs(%q): error %v, want error %v", tc.reason, tc.args, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nparseArgs(%q): -want +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}

func TestBinaryName(t *testing.T) {
	cases := map[string]string{
		"github.com/marketplane/marketplane/internal/operator/clusters": "clusters.test",
		"github.com/marketplane/marketplane/api/core/v1alpha1":          "v1alpha1.test",
		"example.com/mod/v2": "mod.test",
		"example.com/mod/v1": "v1.test",
		"v2":                 "v2.test",
	}
	for path, want := range cases {
		if got := binaryName(path); got != want {
			t.Errorf("binaryName(%q) = %q, want %q (go test -c's name)", path, got, want)
		}
	}
}

func TestPlanBuckets(t *testing.T) {
	paths := []string{
		"m/test/e2e", "m/internal/landscape", "m/providers/sample/test/e2e", // started first with -p 3
		"m/internal/operator/clusters", "m/internal/interoperator/clusters", "m/internal/names",
		"m/x/clusters", "m/test/e2e/sub",
	}
	pkgs := make([]testPackage, len(paths))
	for i, p := range paths {
		pkgs[i] = testPackage{ImportPath: p}
	}
	got := planBuckets(pkgs, 3)
	want := []bucket{
		{Dir: "first-0", Packages: []int{0, 1}},
		{Dir: "first-1", Packages: []int{2}},
		{Dir: "rest-0", Packages: []int{3, 5, 7}},
		{Dir: "rest-1", Packages: []int{4}},
		{Dir: "rest-2", Packages: []int{6}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("planBuckets: the first 3 packages apart, no two binaries of one name in a bucket, as few buckets as possible: -want +got:\n%s", diff)
	}
	for i, p := range pkgs {
		found := false
		for _, j := range got[p.bucket].Packages {
			found = found || j == i
		}
		if !found {
			t.Errorf("package %s says bucket %d, which does not hold it", p.ImportPath, p.bucket)
		}
	}
	// Every binary path is distinct.
	seen := map[string]string{}
	for _, p := range pkgs {
		file := got[p.bucket].Dir + "/" + binaryName(p.ImportPath)
		if other, ok := seen[file]; ok {
			t.Errorf("%s and %s share the binary %s", other, p.ImportPath, file)
		}
		seen[file] = p.ImportPath
	}
}

func TestReport(t *testing.T) {
	exitErr := func(code int) error {
		err := exec.Command("sh", "-c", "exit "+string(rune('0'+code))).Run()
		if err == nil {
			t.Fatal("sh exited 0")
		}
		return err
	}
	cases := map[string]struct {
		reason  string
		out     string
		err     error
		verbose bool
		want    string
	}{
		"Pass": {
			reason: "a passing package prints only the ok line",
			out:    "PASS\n",
			want:   "ok  \tm/p\t1.500s\n",
		},
		"PassVerbose": {
			reason:  "with -v the output comes first, ended by a newline",
			out:     "=== RUN   TestA\n--- PASS: TestA\nPASS",
			verbose: true,
			want:    "=== RUN   TestA\n--- PASS: TestA\nPASS\nok  \tm/p\t1.500s\n",
		},
		"NoTestsToRun": {
			reason: "-run matching nothing is said, as go test does",
			out:    "testing: warning: no tests to run\nPASS\n",
			want:   "ok  \tm/p\t1.500s [no tests to run]\n",
		},
		"Fail": {
			reason: "a failure prints the whole output and the FAIL line; the exit status is implied by the output",
			out:    "--- FAIL: TestA (0.00s)\nFAIL\n",
			err:    exitErr(1),
			want:   "--- FAIL: TestA (0.00s)\nFAIL\n" + "FAIL\tm/p\t1.500s\n",
		},
		"FailWithoutOutput": {
			reason: "a failure without output says the exit status",
			err:    exitErr(3),
			want:   "exit status 3\nFAIL\tm/p\t1.500s\n",
		},
		"NotStarted": {
			reason: "a binary that could not start says why",
			out:    "partial",
			err:    errors.New("fork/exec x: permission denied"),
			want:   "partial\nfork/exec x: permission denied\nFAIL\tm/p\t1.500s\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := string(report("m/p", []byte(tc.out), 1500*time.Millisecond, tc.err, tc.verbose))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNiceCommand runs the command testrun would run for a favored and for
// another package, with a script as the test binary that prints the
// niceness it runs at: -nice reaches the other package's process, not the
// favored one's.
func TestNiceCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nice.test")
	// Field 19 of /proc/PID/stat is the niceness.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ncut -d' ' -f19 /proc/$$/stat\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	niceness := func(cmd *exec.Cmd) int {
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%v printed %q", cmd.Args, out)
		}
		return n
	}
	opts, err := parseArgs([]string{"-nice", "5", "-favor", dir})
	if err != nil {
		t.Fatal(err)
	}
	base := niceness(options{}.command(t.Context(), bin, testPackage{ImportPath: "m/a", Dir: dir}))
	if got := niceness(opts.command(t.Context(), bin, testPackage{ImportPath: "m/favored", Dir: dir})); got != base {
		t.Errorf("favored package (by directory) at niceness %d, want %d as testrun", got, base)
	}
	if got, want := niceness(opts.command(t.Context(), bin, testPackage{ImportPath: "m/other", Dir: t.TempDir()})), min(base+5, 19); got != want {
		t.Errorf("other package at niceness %d, want %d", got, want)
	}
}
