package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// interruptWait is how long the go command gets to stop after SIGINT before
// it is killed.
const interruptWait = 10 * time.Second

// listedPackage is the part of `go list -json` testrun reads.
type listedPackage struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
	Error        *struct{ Err string }
}

// built is the outcome of a package's build, known once done is closed.
type built struct {
	done   chan struct{}
	failed bool
	out    []byte // the build's output when it failed
}

// output serialises the reports of packages that end at the same time.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *output) print(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(b)
}

// run lists, builds and runs the packages of opts, writing the reports to w.
// It reports whether every package built and passed; an error means testrun
// itself could not work (go list failed, a directory could not be made).
func run(ctx context.Context, opts options, w io.Writer) (bool, error) {
	out := &output{w: w}
	goroot, err := goEnv(ctx, "GOROOT")
	if err != nil {
		return false, err
	}
	pkgs, setupOK, err := listPackages(ctx, opts.patterns, out)
	if err != nil {
		return false, err
	}
	binDir, err := filepath.Abs(opts.binDir)
	if err != nil {
		return false, fmt.Errorf("cache directory %s: %w", opts.binDir, err)
	}
	buckets := planBuckets(pkgs, opts.parallel)
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(binDir, b.Dir), 0o755); err != nil {
			return false, fmt.Errorf("cache directory: %w", err)
		}
	}
	results := make([]*built, len(pkgs))
	for i := range results {
		results[i] = &built{done: make(chan struct{})}
	}
	buildsDone := make(chan struct{})
	go func() {
		defer close(buildsDone)
		buildAll(ctx, opts.buildArgs, binDir, pkgs, buckets, results)
	}()
	// On an interruption, leave no go command behind.
	defer func() { <-buildsDone }()
	if opts.buildOnly {
		return reportBuilds(pkgs, results, out, setupOK) && ctx.Err() == nil, nil
	}
	r := &runner{opts: opts, out: out, goroot: goroot}
	failed := r.runAll(ctx, pkgs, binDir, buckets, results)
	return setupOK && !failed && ctx.Err() == nil, nil
}

// reportBuilds waits for every build, reports the failed ones as go test
// does and says whether all built (and ok, the setup's outcome, held).
func reportBuilds(pkgs []testPackage, results []*built, out *output, ok bool) bool {
	for i, b := range results {
		<-b.done
		if b.failed {
			ok = false
			out.print(append(b.out, fmt.Appendf(nil, "FAIL\t%s [build failed]\n", pkgs[i].ImportPath)...))
		}
	}
	return ok
}

// runAll runs the packages' test binaries, -p at once in the packages'
// order, each once its build is done, and reports whether one failed.
// With -failfast no package starts after a failure.
func (r *runner) runAll(ctx context.Context, pkgs []testPackage, binDir string, buckets []bucket, results []*built) bool {
	var (
		mu     sync.Mutex
		next   int
		failed bool
		wg     sync.WaitGroup
	)
	// claim returns the next package to run, or false when none should.
	claim := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		i := next
		stop := i >= len(pkgs) || ctx.Err() != nil || (r.opts.failFast && failed)
		next++
		return i, !stop
	}
	for range min(r.opts.parallel, len(pkgs)) {
		wg.Go(func() {
			for {
				i, ok := claim()
				if !ok {
					return
				}
				select {
				case <-results[i].done:
					ok = r.runPackage(ctx, pkgs[i], binDir, buckets[pkgs[i].bucket].Dir, results[i])
				case <-ctx.Done():
					return
				}
				if !ok {
					mu.Lock()
					failed = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// listPackages expands the patterns with go list, in order and without
// duplicates, keeping the packages with test files. A pattern that cannot be
// loaded is reported as go test does ("FAIL\tpkg [setup failed]").
func listPackages(ctx context.Context, patterns []string, out *output) ([]testPackage, bool, error) {
	args := append([]string{"list", "-e", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,Error", "--"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, false, fmt.Errorf("go list %s: %w", strings.Join(patterns, " "), err)
	}
	var pkgs []testPackage
	ok := true
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, false, fmt.Errorf("read go list output: %w", err)
		}
		if p.Error != nil {
			ok = false
			out.print(fmt.Appendf(nil, "%s\nFAIL\t%s [setup failed]\n", p.Error.Err, p.ImportPath))
			continue
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 {
			pkgs = append(pkgs, testPackage{ImportPath: p.ImportPath, Dir: p.Dir})
		}
	}
	return pkgs, ok, nil
}

// buildAll builds the buckets one after another, closing each package's done
// channel as soon as its bucket is built.
func buildAll(ctx context.Context, buildArgs []string, binDir string, pkgs []testPackage, buckets []bucket, results []*built) {
	for _, b := range buckets {
		dir := filepath.Join(binDir, b.Dir) + string(filepath.Separator)
		paths := make([]string, len(b.Packages))
		for j, i := range b.Packages {
			paths[j] = pkgs[i].ImportPath
		}
		out, err := goTestC(ctx, buildArgs, dir, paths...)
		if err == nil && len(out) > 0 {
			_, _ = os.Stderr.Write(out) // warnings of a build that worked
		}
		for _, i := range b.Packages {
			if err != nil && len(b.Packages) > 1 && ctx.Err() == nil {
				// Tell which package of the batch failed: the others are now
				// current, so this costs a go invocation per package, no link.
				out, err := goTestC(ctx, buildArgs, dir, pkgs[i].ImportPath)
				results[i].failed, results[i].out = err != nil, out
			} else if err != nil {
				results[i].failed, results[i].out = true, out
			}
			close(results[i].done)
		}
	}
}

// goTestC runs `go test -c -o dir/ pkgs...` and returns its combined output.
func goTestC(ctx context.Context, buildArgs []string, dir string, pkgs ...string) ([]byte, error) {
	args := append(append([]string{"test", "-c", "-o", dir}, buildArgs...), pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = interruptWait
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// goEnv returns a variable of `go env`.
func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// runner runs test binaries.
type runner struct {
	opts   options
	out    *output
	goroot string
}

// runPackage runs one package's test binary (or reports its failed build) and
// prints its report; it returns whether the package passed.
func (r *runner) runPackage(ctx context.Context, p testPackage, binDir, bucketDir string, b *built) bool {
	if b.failed {
		out := b.out
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		r.out.print(append(out, fmt.Appendf(nil, "FAIL\t%s [build failed]\n", p.ImportPath)...))
		return false
	}
	bin := filepath.Join(binDir, bucketDir, binaryName(p.ImportPath))

	// As go test: a wait for the output of processes the test left behind, and
	// SIGQUIT (a stack dump) for a binary still running well after -timeout.
	var waitDelay time.Duration
	killCtx, cancel := ctx, context.CancelFunc(func() {})
	if r.opts.timeout > 0 {
		waitDelay = max(r.opts.timeout/10, 5*time.Second)
		killCtx, cancel = context.WithTimeout(ctx, r.opts.timeout+max(waitDelay, time.Minute))
	}
	defer cancel()

	var buf bytes.Buffer
	cmd := r.opts.command(killCtx, bin, p)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(r.goroot, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PWD="+p.Dir)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	killedForTime := false
	cmd.Cancel = func() error {
		if ctx.Err() != nil {
			// Interrupted: the binary and the processes it started.
			return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		}
		killedForTime = true
		return cmd.Process.Signal(syscall.SIGQUIT)
	}
	cmd.WaitDelay = max(waitDelay, interruptWait)
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if ctx.Err() != nil && cmd.Process != nil {
		// Whatever of its group outlived the interrupted binary.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out := buf.Bytes()
	if killedForTime {
		out = append(out, fmt.Sprintf("*** Test killed with quit: ran too long (%v).\n", r.opts.timeout+max(waitDelay, time.Minute))...)
	} else if errors.Is(err, exec.ErrWaitDelay) {
		out = append(out, fmt.Sprintf("*** Test I/O incomplete %v after exiting.\n", cmd.WaitDelay)...)
	}
	r.out.print(report(p.ImportPath, out, elapsed, err, r.opts.verbose))
	return err == nil
}

// exitedWithStatus reports whether err is the test binary's own exit status
// (rather than a signal or a failure to start).
func exitedWithStatus(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.Exited()
}

// command returns the command that runs the test binary bin of p: through
// nice(1) at -nice unless -favor names p. nice(1) sets the niceness before
// it executes the binary, so that every thread and process of the test has
// it (setpriority(2) after the start would reach only the main thread).
func (o options) command(ctx context.Context, bin string, p testPackage) *exec.Cmd {
	if o.nice > 0 && !o.favors(p) {
		return exec.CommandContext(ctx, "nice", append([]string{"-n", strconv.Itoa(o.nice), bin}, o.testArgs...)...)
	}
	return exec.CommandContext(ctx, bin, o.testArgs...)
}

// favors reports whether p is one of the packages -favor names, by import
// path or directory.
func (o options) favors(p testPackage) bool {
	for _, f := range o.favored {
		if f == p.ImportPath {
			return true
		}
		if dir, err := filepath.Abs(f); err == nil && dir == p.Dir {
			return true
		}
	}
	return false
}
