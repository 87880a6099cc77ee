package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRun runs the benchmark briefly, so that it keeps working: it must
// render the sample plan and print its figures.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	c := config{catalog: "../../examples/catalog", duration: 50 * time.Millisecond, warmup: 5, rounds: 2}
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"single-threaded", "goroutines (GOMAXPROCS)", "renders/s", "µs/render", "template parses: 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
