// Command buildprogress builds Go commands with one `go build` and shows,
// while it runs, how far each command is: the packages it still had to
// compile, how many of them have started, whether it is linked, and how long
// the build has taken so far. A first build of the landscape's binaries
// compiles thousands of packages for minutes; without this a user sees
// nothing in that time.
//
// `make tools` and `make build` run it:
//
//	buildprogress -C hack/tools/cluster -o bin -ldflags '-s -w' etcd=go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kubectl
//
// Each argument is a main package, optionally NAME=PACKAGE to name the binary
// (go build would call go.etcd.io/etcd/server/v3 "server"). All of them are
// built by one go build, so that packages they share are compiled once and go
// build schedules every compile and link over the cores. The binaries are
// written into a directory beside the output directory and then renamed into
// it, so a binary in use is replaced, never rewritten in place.
//
// The packages to compile are those `go list -deps` reports stale; go build
// -v names each package as it starts compiling it. On a terminal one line is
// redrawn every second; otherwise a line is printed every -every (default
// 30s) and when a binary is done. Lines of go build that are not package names
// (compile errors) are passed on. The exit status is go build's.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// options are buildprogress's flags and arguments.
type options struct {
	dir     string
	outDir  string
	ldflags string
	every   time.Duration
	targets []target
}

// run parses args, builds, and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "buildprogress: %v\n", err)
		return 2
	}
	b := &build{options: o, out: stdout, errOut: stderr, terminal: isTerminal(stdout), now: time.Now}
	if err := b.run(ctx); err != nil {
		fmt.Fprintf(stderr, "buildprogress: %v\n", err)
		return 1
	}
	return 0
}

// parseArgs reads the flags and the NAME=PACKAGE arguments.
func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("buildprogress", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.dir, "C", ".", "directory of the module to build in")
	fs.StringVar(&o.outDir, "o", "", "directory the binaries are written to (required)")
	fs.StringVar(&o.ldflags, "ldflags", "", "go build's -ldflags")
	fs.DurationVar(&o.every, "every", 30*time.Second, "how often a progress line is printed when the output is not a terminal")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w (usage: buildprogress [-C dir] -o dir [-ldflags flags] [-every 30s] [NAME=]PACKAGE...)", err)
	}
	if o.outDir == "" {
		return o, fmt.Errorf("-o, the output directory, is required")
	}
	if fs.NArg() == 0 {
		return o, fmt.Errorf("no package to build: give main packages, optionally NAME=PACKAGE")
	}
	if o.every <= 0 {
		return o, fmt.Errorf("-every %s: must be positive", o.every)
	}
	seen := map[string]bool{}
	for _, arg := range fs.Args() {
		t, err := parseTarget(arg)
		if err != nil {
			return o, err
		}
		if seen[t.name] {
			return o, fmt.Errorf("two binaries named %q: name one of them with NAME=PACKAGE", t.name)
		}
		seen[t.name] = true
		o.targets = append(o.targets, t)
	}
	return o, nil
}

// isTerminal reports whether w is a character device, where a redrawn line
// reads well.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
