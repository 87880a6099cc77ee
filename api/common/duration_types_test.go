package common

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/internal/crdtest"
)

// durationCorpus holds strings on both sides of time.ParseDuration's
// syntax; the CRD tests (api/crds) send the same ones to a real API server.
var durationCorpus = crdtest.DurationCorpus

func TestDurationParse(t *testing.T) {
	cases := map[string]struct {
		reason  string
		d       *Duration
		want    time.Duration
		wantErr string
	}{
		"Unset":      {reason: "an unset field is zero, not an error", d: nil, want: 0},
		"Minutes":    {reason: "Go syntax", d: ptr("5m"), want: 5 * time.Minute},
		"Compound":   {reason: "several units", d: ptr("1h30m"), want: 90 * time.Minute},
		"Fraction":   {reason: "fractions", d: ptr("1.5h"), want: 90 * time.Minute},
		"Zero":       {reason: "a bare zero is valid", d: ptr("0"), want: 0},
		"Canonical":  {reason: "what metav1.Duration wrote reads back", d: ptr("1m0s"), want: time.Minute},
		"Fortnight":  {reason: "issue #10's value", d: ptr("1 fortnight"), wantErr: `"1 fortnight" is not a duration`},
		"Often":      {reason: "issue #10's value", d: ptr("often"), wantErr: `"often" is not a duration`},
		"Empty":      {reason: "an empty string is not a duration", d: ptr(""), wantErr: `"" is not a duration`},
		"Negative":   {reason: "no field here means anything by a negative time", d: ptr("-5s"), wantErr: `"-5s" is negative`},
		"NoUnit":     {reason: "a number alone (other than 0) is not a duration", d: ptr("30"), wantErr: "is not a duration"},
		"Days":       {reason: "Go has no day unit", d: ptr("1d"), wantErr: "is not a duration"},
		"TooLarge":   {reason: "overflow", d: ptr("9999999999h"), wantErr: "is not a duration"},
		"WithSpaces": {reason: "no spaces", d: ptr("1h 30m"), wantErr: "is not a duration"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.d.Parse()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: Parse() error = %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				if verr := tc.d.Validate("spec.x"); verr == nil || !strings.HasPrefix(verr.Error(), "spec.x: ") {
					t.Errorf("%s: Validate() = %v, want an error naming spec.x", tc.reason, verr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%s: Parse() = %v, %v; want %v, nil", tc.reason, got, err, tc.want)
			}
			if err := tc.d.Validate("spec.x"); err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tc.reason, err)
			}
		})
	}
}

// TestDurationDecodesAnyString is the tolerance the informers rely on: a
// value that is not a duration decodes (metav1.Duration's decoding fails,
// which fails the whole list) and encodes back verbatim, so a controller's
// status write does not change it.
func TestDurationDecodesAnyString(t *testing.T) {
	type spec struct {
		TTL *Duration `json:"ttl,omitempty"`
	}
	for _, raw := range []string{`{"ttl":"1 fortnight"}`, `{"ttl":"often"}`, `{"ttl":"1h"}`, `{"ttl":"1m0s"}`, `{}`} {
		var s spec
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Errorf("decode %s: %v; any string must decode", raw, err)
			continue
		}
		out, err := json.Marshal(s)
		if err != nil || string(out) != raw {
			t.Errorf("decode and encode %s = %s, %v; want it unchanged", raw, out, err)
		}
	}
	if out, err := json.Marshal(spec{TTL: DurationOf(90 * time.Second)}); err != nil || string(out) != `{"ttl":"1m30s"}` {
		t.Errorf("DurationOf(90s) encodes as %s, %v; want metav1.Duration's form 1m30s", out, err)
	}
}

// TestDurationPatternIsParseDuration checks the claim of DurationPattern's
// documentation on the corpus: the pattern matches exactly the strings
// time.ParseDuration accepts, apart from overflows.
func TestDurationPatternIsParseDuration(t *testing.T) {
	re := regexp.MustCompile(DurationPattern)
	for _, s := range durationCorpus {
		_, err := time.ParseDuration(s)
		if matched := re.MatchString(s); matched != (err == nil) && !isOverflow(s) {
			t.Errorf("%q: pattern matches = %v, time.ParseDuration error = %v", s, matched, err)
		}
	}
}

// FuzzDurationPattern looks for strings on which DurationPattern and
// time.ParseDuration disagree (other than overflows).
func FuzzDurationPattern(f *testing.F) {
	for _, s := range durationCorpus {
		f.Add(s)
	}
	re := regexp.MustCompile(DurationPattern)
	f.Fuzz(func(t *testing.T, s string) {
		_, err := time.ParseDuration(s)
		if matched := re.MatchString(s); matched != (err == nil) && (!matched || !isOverflow(s)) {
			t.Errorf("%q: pattern matches = %v, time.ParseDuration error = %v", s, matched, err)
		}
	})
}

// isOverflow reports whether s is refused by time.ParseDuration only for
// its size: the same digits with every number made 0 parse.
func isOverflow(s string) bool {
	if _, err := time.ParseDuration(s); err == nil || !regexp.MustCompile(DurationPattern).MatchString(s) {
		return false
	}
	small := regexp.MustCompile(`[0-9]+`).ReplaceAllString(s, "0")
	_, err := time.ParseDuration(small)
	return err == nil
}

func ptr(s string) *Duration { d := Duration(s); return &d }
