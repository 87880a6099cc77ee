// Command release builds Marketplane's release binaries: every binary of
// cmd/ (by default) for linux/amd64 and linux/arm64, statically linked
// (CGO_ENABLED=0), without local paths (-trimpath) or VCS stamps
// (-buildvcs=false), stripped (-s -w), with the version, revision and build
// date stamped into pkg/version. The binaries are written to
// <out>/<name>-<os>-<arch>, their checksums to <out>/SHA256SUMS in the
// format of sha256sum (`sha256sum -c SHA256SUMS` verifies them).
//
// The build is reproducible: the same source, Go toolchain and stamps
// (version, revision, build date) give byte-identical binaries, which is why the
// build date defaults to the commit time rather than the clock.
//
// `make release` runs it from the repository root:
//
//	go run ./hack/release -out dist -version v0.2.0 -revision <commit> -build-date <RFC 3339>
//
// Without -version, -revision or -build-date the values come from git:
// `git describe --tags --always --dirty`, `git rev-parse HEAD` and
// `git log -1 --format=%cI`. docs/release.md describes the whole release.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
)

func main() {
	var (
		o         Options
		binaries  string
		platforms string
	)
	flag.StringVar(&o.Out, "out", "dist", "directory the binaries and SHA256SUMS are written to")
	flag.StringVar(&o.Dir, "dir", ".", "the module's root directory")
	flag.StringVar(&o.Go, "go", "go", "the go command")
	flag.StringVar(&binaries, "binaries", strings.Join(DefaultBinaries, ","), "comma-separated binaries, each a directory under cmd/")
	flag.StringVar(&platforms, "platforms", strings.Join(DefaultPlatforms, ","), "comma-separated os/arch pairs")
	flag.StringVar(&o.Stamp.Version, "version", "", "release version, a tag such as v0.2.0 (default: git describe --tags --always --dirty)")
	flag.StringVar(&o.Stamp.Revision, "revision", "", "source commit (default: git rev-parse HEAD)")
	flag.StringVar(&o.Stamp.BuildDate, "build-date", "", "build date, RFC 3339 (default: the commit time, git log -1 --format=%cI)")
	flag.Parse()
	o.Binaries, o.Platforms = split(binaries), split(platforms)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run fills the stamps from git, builds and prints each artifact's
// checksum and path.
func run(o Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := o.Stamp.fromGit(ctx, o.Dir); err != nil {
		return err
	}
	artifacts, err := Run(ctx, o)
	if err != nil {
		return err
	}
	for _, a := range artifacts {
		fmt.Printf("%s  %s\n", a.SHA256, a.Path)
	}
	return nil
}

// split returns the non-empty, trimmed elements of a comma-separated list.
func split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// fromGit fills the values not given from the git repository at dir.
func (s *Stamp) fromGit(ctx context.Context, dir string) error {
	for _, v := range []struct {
		value *string
		args  []string
	}{
		{&s.Version, []string{"describe", "--tags", "--always", "--dirty"}},
		{&s.Revision, []string{"rev-parse", "HEAD"}},
		{&s.BuildDate, []string{"log", "-1", "--format=%cI"}},
	} {
		if *v.value != "" {
			continue
		}
		cmd := exec.CommandContext(ctx, "git", v.args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("git %s (set -version, -revision and -build-date outside a git repository): %w", strings.Join(v.args, " "), err)
		}
		*v.value = strings.TrimSpace(string(out))
	}
	return nil
}
