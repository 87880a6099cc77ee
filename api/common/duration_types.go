package common

import (
	"fmt"
	"time"
)

// DurationPattern is the syntax of time.ParseDuration as a regular expression:
// an optional sign, then "0" or one or more numbers (with an optional
// fraction) each followed by a unit (ns, us, µs, μs, ms, s, m or h), without
// spaces. A string matches it exactly when time.ParseDuration accepts it,
// except for values too large for a time.Duration (about 292 years), which
// only time.ParseDuration refuses. The CEL rule of Duration uses it so that a
// bad value makes the rule false, and the API server answers with the rule's
// message, instead of making duration() fail with a conversion error;
// TestDurationPatternIsParseDuration and the CRD tests check both claims.
const DurationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// Duration is a length of time written as a string in Go's syntax
// (time.ParseDuration): "30s", "5m", "1h30m", "1.5h". Its JSON form is the
// same as metav1.Duration's, so manifests written for either apply unchanged.
//
// The API server refuses a value that is not a duration, or is negative, with
// the rule's message. Unlike metav1.Duration, whose decoding fails on such a
// value, a Duration decodes any string and keeps it verbatim: an object
// stored before the rule existed (or written past it) still decodes, so one
// bad object cannot make a controller's informer fail to list all the
// others. Readers call Parse, which reports the bad value, and give that one
// object a condition instead.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') && duration(self) >= duration('0s')",message="must be a non-negative duration such as 30s, 5m or 1h30m: a number and a unit (ns, us, ms, s, m, h), repeated, without spaces"
type Duration string

// DurationOf returns d as a *Duration, for optional fields.
func DurationOf(d time.Duration) *Duration {
	s := Duration(d.String())
	return &s
}

// Parse returns the length of time d names. A nil d is zero and no error:
// the field is unset. A value that time.ParseDuration refuses, or a negative
// one, is an error that quotes it; callers name the field.
func (d *Duration) Parse() (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; write it like 30s, 5m or 1h30m (a number and a unit ns, us, ms, s, m or h, without spaces)", string(*d))
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative; a duration here must be zero or more", string(*d))
	}
	return v, nil
}

// Validate reports, as "<path>: <problem>", why d is not a valid duration;
// nil when it is valid or unset.
func (d *Duration) Validate(path string) error {
	if _, err := d.Parse(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
