package main

import (
	"fmt"
	"strings"
	"time"
)

// binaryProgress is how far one binary's build is.
type binaryProgress struct {
	name string
	// stale are the packages go list reported stale, which go build must
	// compile; started those go build -v has named so far.
	stale   map[string]bool
	started int
	done    bool
}

// state reads "done", "linking" (every package compiled or compiling) or
// "started/stale".
func (b *binaryProgress) state() string {
	switch {
	case b.done:
		return "done"
	case b.started >= len(b.stale):
		return "linking"
	default:
		return fmt.Sprintf("%d/%d", b.started, len(b.stale))
	}
}

// progress is the build's state across its binaries.
type progress struct {
	binaries []*binaryProgress
	// known are every stale package of any binary.
	known map[string]bool
}

func newProgress(names []string, stale []map[string]bool) *progress {
	p := &progress{known: map[string]bool{}}
	for i, name := range names {
		p.binaries = append(p.binaries, &binaryProgress{name: name, stale: stale[i]})
		for pkg := range stale[i] {
			p.known[pkg] = true
		}
	}
	return p
}

// started records a package go build -v named; it reports whether the
// package was one the build was known to compile.
func (p *progress) started(pkg string) bool {
	if !p.known[pkg] {
		return false
	}
	delete(p.known, pkg)
	for _, b := range p.binaries {
		if b.stale[pkg] {
			b.started++
		}
	}
	return true
}

// line is one progress line: the time so far and each binary's state.
func (p *progress) line(elapsed time.Duration) string {
	parts := make([]string, 0, len(p.binaries))
	for _, b := range p.binaries {
		parts = append(parts, b.name+" "+b.state())
	}
	return fmt.Sprintf("building (%s, packages compiled/to compile): %s", elapsed.Truncate(time.Second), strings.Join(parts, " · "))
}
