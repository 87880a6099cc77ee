// Command testrun runs a module's tests like `go test -p N pkgs...`, but keeps
// the linked test binaries between runs, so that a package whose code (and
// whose dependencies' code) did not change is not linked again. go test caches
// compiled packages but links every test binary afresh on each run with
// -count=1; for this module that is about a tenth of the whole suite's CPU.
//
// `make test` runs it from the module's root (and from test/openmcp-compat):
//
//	go build -o bin/testrun ./hack/testrun
//	KUBEBUILDER_ASSETS=$PWD/bin bin/testrun -bindir bin/testbin/main -count=1 -timeout=30m -p 4 ./test/e2e ./...
//
// It works in three steps:
//
//  1. `go list` expands the patterns, in order and without duplicates as go
//     test does; packages without test files are left out.
//  2. `go test -c -o <bindir>/<bucket>/` builds the test binaries, a batch of
//     packages per invocation. go test -c names a binary after the package's
//     last path element, so packages of the same name (internal/operator/clusters,
//     internal/interoperator/clusters) go to different buckets; the first -p
//     packages get buckets of their own, built first, so that they start while
//     the rest is built. go test -c skips the link when the binary in place is
//     current. A failed batch is built again package by package to tell which
//     package failed.
//  3. The binaries run, at most -p at once, in the order given, each in its
//     package's directory with $GOROOT/bin first on PATH and PWD set (as go
//     test does), with -test.paniconexit0 and the test flags. Each package's
//     output is printed whole when it ends, in go test's format: "ok  \tpkg\t1.234s"
//     (preceded by the output with -v), or the output and "FAIL\tpkg\t1.234s".
//
// Flags: -p (default 4), -bindir (default bin/testbin), -buildonly (build the
// test binaries, run none: for a warm-up or to measure the build), -nice N
// (run the test binaries at niceness N, through nice(1), except those of the
// packages -favor names: import paths or directories, comma-separated or
// repeated; `make test` favors the README quick start, whose kubectl must
// finish its TLS handshakes within 10 s beside thirty API servers), the test flags -count,
// -timeout (default 10m), -run, -skip, -v, -short, -failfast, -parallel, -cpu,
// -shuffle, -bench, -benchtime, -benchmem, -list, and the build flags -race,
// -tags, -gcflags, -ldflags (after -s -w: the binaries are stripped like those
// of go test), -trimpath, -mod, -vet. Any other flag is refused.
// Unlike go test, results are never cached (every run is -count=1-like).
//
// A test binary still running -timeout plus one minute after it started gets
// SIGQUIT, as with go test. On SIGINT or SIGTERM testrun sends SIGINT to every
// running test binary's process group (each binary runs in a group of its own
// with the processes it starts), SIGKILL ten seconds later, and exits non-zero.
// The exit status is 1 if a package failed to build or its tests failed.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(testrun(os.Args[1:]))
}

// testrun runs the command and returns its exit status: 2 for bad flags, 1
// for a failed build or test, an interruption or an error of testrun itself.
func testrun(args []string) int {
	opts, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, opts, os.Stdout)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	case ctx.Err() != nil:
		fmt.Println("FAIL\t(interrupted)")
		return 1
	case !ok:
		fmt.Println("FAIL")
		return 1
	}
	return 0
}
