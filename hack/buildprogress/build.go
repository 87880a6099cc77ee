package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// tick is how often the build's state is looked at (and redrawn on a terminal).
const tick = time.Second

// build is one run of go build with its progress.
type build struct {
	options
	out, errOut io.Writer
	terminal    bool
	now         func() time.Time

	// mu guards progress and the writes to out and errOut.
	mu       sync.Mutex
	progress *progress
}

// run lists the stale packages, runs go build -v into a directory beside the
// output directory, reports progress, and renames the binaries into place.
func (b *build) run(ctx context.Context) error {
	start := b.now()
	fmt.Fprintln(b.out, "listing the packages to compile (the first time this downloads the modules)...")
	names := make([]string, len(b.targets))
	stale := make([]map[string]bool, len(b.targets))
	for i, t := range b.targets {
		names[i] = t.name
		pkgs, err := b.stalePackages(ctx, t.pkg)
		if err != nil {
			return err
		}
		stale[i] = pkgs
	}
	b.progress = newProgress(names, stale)

	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	tmp, err := os.MkdirTemp(b.outDir, ".buildprogress-")
	if err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	err = b.goBuild(ctx, tmp, start)
	if err != nil {
		b.clearLine()
		return err
	}
	for _, t := range b.targets {
		if err := os.Rename(filepath.Join(tmp, goExecName(t.pkg)), filepath.Join(b.outDir, t.name)); err != nil {
			return fmt.Errorf("move %s into %s: %w", t.name, b.outDir, err)
		}
	}
	b.clearLine()
	fmt.Fprintf(b.out, "built %s into %s in %s\n", strings.Join(names, ", "), b.outDir, b.now().Sub(start).Truncate(time.Second))
	return nil
}

// stalePackages are the packages below pkg that go build must compile (pkg
// itself, whose binary is always linked, shows as "linking").
func (b *build) stalePackages(ctx context.Context, pkg string) (map[string]bool, error) {
	cmd := exec.CommandContext(ctx, goCommand(), "list", "-deps", "-f", "{{if and .Stale .DepOnly}}{{.ImportPath}}{{end}}", pkg)
	cmd.Dir = b.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	stale := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			stale[line] = true
		}
	}
	return stale, nil
}

// goBuild runs go build -v, counting the packages it names and passing on
// every other line, while a ticker reports progress.
func (b *build) goBuild(ctx context.Context, tmp string, start time.Time) error {
	args := []string{"build", "-v", "-o", tmp + string(filepath.Separator)}
	if b.ldflags != "" {
		args = append(args, "-ldflags", b.ldflags)
	}
	for _, t := range b.targets {
		args = append(args, t.pkg)
	}
	cmd := exec.CommandContext(ctx, goCommand(), args...)
	cmd.Dir = b.dir
	// Both streams go through one pipe, read here alone, so that lines
	// are passed on whole and in order.
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	stopTicker := b.report(tmp, start)
	scanner := bufio.NewScanner(pr)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		b.mu.Lock()
		if !b.progress.started(strings.TrimSpace(line)) && !isImportPath(line) {
			b.clearLine()
			fmt.Fprintln(b.errOut, line)
		}
		b.mu.Unlock()
	}
	// A line too long for the scanner: drain the rest so go build can end.
	_, _ = io.Copy(io.Discard, pr)
	waitErr := <-waited
	stopTicker()
	if waitErr != nil {
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) {
			return fmt.Errorf("go build failed after %s: %w", b.now().Sub(start).Truncate(time.Second), exit)
		}
		return fmt.Errorf("go build: %w", waitErr)
	}
	return nil
}

// report starts the ticker that marks binaries done (their file is written)
// and prints progress; the returned func stops it.
func (b *build) report(tmp string, start time.Time) func() {
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		lastPrint := start
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			now := b.now()
			b.mu.Lock()
			newlyDone := b.markDone(tmp)
			line := b.progress.line(now.Sub(start))
			switch {
			case b.terminal:
				fmt.Fprintf(b.out, "\r\033[K%s", line)
			case newlyDone || now.Sub(lastPrint) >= b.every:
				fmt.Fprintln(b.out, line)
				lastPrint = now
			}
			b.mu.Unlock()
		}
	}()
	return func() {
		close(stop)
		<-finished
	}
}

// markDone marks the binaries whose file go build has written; it reports
// whether one was new.
func (b *build) markDone(tmp string) bool {
	newlyDone := false
	for i, t := range b.targets {
		bp := b.progress.binaries[i]
		if bp.done {
			continue
		}
		if _, err := os.Stat(filepath.Join(tmp, goExecName(t.pkg))); err == nil {
			bp.done = true
			newlyDone = true
		}
	}
	return newlyDone
}

// clearLine ends a redrawn progress line before other output.
func (b *build) clearLine() {
	if b.terminal {
		fmt.Fprint(b.out, "\r\033[K")
	}
}

// isImportPath reports whether a line of go build -v is a package's name
// (one the stale lists missed) rather than a message to pass on.
func isImportPath(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t:#")
}

// goCommand is the go command to run: $GO (as the Makefile's GO) or go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
