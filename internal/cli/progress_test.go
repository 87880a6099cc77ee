package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// fakeClock is a clock the test moves on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestLandscapeProgressPlain checks the steps made of the landscape's
// progress lines when the output is no terminal: one line per finished
// step with its duration, notices as they come, the summary (or an error)
// after the last step's outcome, and lines passing through once finished.
func TestLandscapeProgressPlain(t *testing.T) {
	cases := map[string]struct {
		reason string
		writes []string
		err    error
		after  string
		want   string
	}{
		"up": {
			reason: "Each progress line is a step until the next; a restart notice ends no step; the summary follows the last step, a line split over writes included.",
			writes: []string{
				"• creating a new landscape in /s\n• starting etcd\n",
				"• etcd (pid 7) ended (signal: killed); restarting it in 1s (restarts so far: 0)\n",
				"• registering the clusters\n",
				"\nMarketplane landscape is ready (new, started in 3s). State: /s\n",
				"Next, with",
				" kubectl:\n",
			},
			after: "• restarted etcd (pid 8, restart 1)\n",
			want: "✓ creating a new landscape in /s (0.0s)\n" +
				"• etcd (pid 7) ended (signal: killed); restarting it in 1s (restarts so far: 0)\n" +
				"✓ starting etcd (2.0s)\n" +
				"✓ registering the clusters (4.0s)\n" +
				"\nMarketplane landscape is ready (new, started in 3s). State: /s\n" +
				"Next, with kubectl:\n" +
				"• restarted etcd (pid 8, restart 1)\n",
		},
		"failed": {
			reason: "A failure marks the running step failed and shows what came after it.",
			writes: []string{"• starting etcd\n", "Error: start etcd: exited\n"},
			err:    errors.New("exited"),
			want:   "✗ starting etcd (2.0s)\nError: start etcd: exited\n",
		},
		"down": {
			reason: "Down's lines: stopping steps, then the closing line; a line without its line break still shows.",
			writes: []string{"• stopping the landscape (supervisor pid 1)\n", "• stopping etcd (pid 2)\n", "Removed the landscape in /s."},
			want:   "✓ stopping the landscape (supervisor pid 1) (1.0s)\n✓ stopping etcd (pid 2) (2.0s)\nRemoved the landscape in /s.\n",
		},
		"no steps": {
			reason: "Lines while no step runs pass through at once.",
			writes: []string{"No landscape in /s.\n"},
			want:   "No landscape in /s.\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out testenv.SyncBuffer
			// Each write comes a second after the one before, and
			// finish a second after the last.
			clock := &fakeClock{t: time.Unix(0, 0)}
			l := newLandscapeProgress(&out, false)
			l.now = clock.now
			for _, w := range tc.writes {
				if _, err := l.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
				clock.t = clock.t.Add(time.Second)
			}
			l.finish(tc.err)
			if _, err := l.Write([]byte(tc.after)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLandscapeProgressTerminal checks that on a terminal the running
// step has a spinner line that its outcome replaces, and that a notice is
// written above the running line, which is drawn again.
func TestLandscapeProgressTerminal(t *testing.T) {
	var out testenv.SyncBuffer
	l := newLandscapeProgress(&out, true)
	l.p.interval = time.Hour // no redraws by the ticker: the output is the test's
	clock := &fakeClock{t: time.Unix(0, 0)}
	l.now = clock.now
	write := func(s string) {
		t.Helper()
		if _, err := l.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write("• starting etcd\n")
	write("• restarted etcd (pid 8, restart 1)\n")
	clock.t = clock.t.Add(1500 * time.Millisecond)
	write("• starting the operator\n")
	write("\nMarketplane landscape is ready\n")
	l.finish(nil)
	got := out.String()
	for _, want := range []string{
		"\r\033[K" + spinnerFrames[0] + " starting etcd (0s)",
		"\r\033[K• restarted etcd (pid 8, restart 1)\n\r\033[K" + spinnerFrames[0] + " starting etcd (",
		"\r\033[K✓ starting etcd (1.5s)\n",
		"\r\033[K" + spinnerFrames[0] + " starting the operator (0s)",
		"\r\033[K✓ starting the operator (0.0s)\n\nMarketplane landscape is ready\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, got)
		}
	}
	if !strings.HasSuffix(got, "Marketplane landscape is ready\n") {
		t.Errorf("terminal output does not end with the summary:\n%q", got)
	}
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.stop != nil || l.p.drawn {
		t.Error("the spinner still runs after finish")
	}
}
