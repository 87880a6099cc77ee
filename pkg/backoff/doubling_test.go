package backoff

import (
	"testing"
	"time"
)

func TestDoublingWait(t *testing.T) {
	b := Doubling{Base: time.Second, Max: 30 * time.Second}
	for name, tc := range map[string]struct {
		n    int
		want time.Duration
	}{
		"below one counts as one": {n: 0, want: time.Second},
		"first":                   {n: 1, want: time.Second},
		"second doubles":          {n: 2, want: 2 * time.Second},
		"fifth":                   {n: 5, want: 16 * time.Second},
		"capped":                  {n: 6, want: 30 * time.Second},
		"far past the cap":        {n: 1 << 30, want: 30 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			if got := b.Wait(tc.n); got != tc.want {
				t.Errorf("Wait(%d) = %s, want %s", tc.n, got, tc.want)
			}
		})
	}
}
