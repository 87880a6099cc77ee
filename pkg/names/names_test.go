package names

import (
	"strings"
	"testing"
)

func TestShorten(t *testing.T) {
	cases := map[string]struct {
		in    string
		limit int
		want  string
	}{
		"Short":        {in: "sp-sample", limit: 63, want: "sp-sample"},
		"AtTheLimit":   {in: strings.Repeat("a", 10), limit: 10, want: strings.Repeat("a", 10)},
		"Long":         {in: strings.Repeat("a", 20), limit: 15, want: "aaaaaa-" + WithHash("", strings.Repeat("a", 20), 100)[1:]},
		"TrailingDash": {in: "abcde-" + strings.Repeat("x", 20), limit: 15, want: "abcde-" + WithHash("", "abcde-"+strings.Repeat("x", 20), 100)[1:]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Shorten(tc.in, tc.limit)
			if got != tc.want {
				t.Errorf("Shorten(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
			}
			if len(got) > tc.limit {
				t.Errorf("Shorten(%q, %d) = %q is %d bytes long", tc.in, tc.limit, got, len(got))
			}
		})
	}
}

// TestWithHashIsStable pins the output: names already given to objects
// must not change.
func TestWithHashIsStable(t *testing.T) {
	// The first 8 hex digits of sha256("ns/svc").
	if got, want := WithHash("sf-ns-svc", "ns/svc", 63), "sf-ns-svc-76372607"; got != want {
		t.Errorf("WithHash = %q, want %q", got, want)
	}
	if got, want := WithHash(strings.Repeat("a", 70), "ns/svc", 20), "aaaaaaaaaaa-76372607"; got != want {
		t.Errorf("WithHash of a long prefix = %q, want %q (20 bytes)", got, want)
	}
	if a, b := WithHash("p", "x", 63), WithHash("p", "y", 63); a == b {
		t.Errorf("different inputs gave the same name %q", a)
	}
}
