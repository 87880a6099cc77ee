package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestRunMeasuresEveryKind runs the benchmark with a few requests of each
// kind and checks that every kind, with and without the CRD's CEL rules,
// printed a figure for the API server.
func TestRunMeasuresEveryKind(t *testing.T) {
	testenv.SkipIfShort(t)
	var out bytes.Buffer
	if err := run(context.Background(), config{n: 3, workers: 2}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	celState.original = nil
	for _, k := range kinds(nil) {
		names := []string{k.name}
		if strings.HasPrefix(k.name, "instance") {
			names = append(names, k.name+" (CRD without CEL rules)", k.name+" (CEL rules restored)")
		}
		for _, name := range names {
			line := lineOf(out.String(), name)
			if line == "" {
				t.Errorf("no line for %q in\n%s", name, out.String())
				continue
			}
			f := strings.Fields(strings.TrimPrefix(line, name))
			if len(f) != 2 {
				t.Errorf("line %q: want two figures", line)
				continue
			}
			if v, err := strconv.ParseFloat(f[0], 64); err != nil || v < 0 {
				t.Errorf("line %q: API server figure %q is not a CPU time", line, f[0])
			}
		}
	}
}

// lineOf returns the line of out that starts with name followed by spaces.
func lineOf(out, name string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(l, name); ok && strings.HasPrefix(rest, " ") {
			return l
		}
	}
	return ""
}
