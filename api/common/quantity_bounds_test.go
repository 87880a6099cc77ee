package common

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/marketplane/marketplane/internal/crdtest"
)

// quantityParseLimit is how long one ParseQuantity may take. A bomb parsed
// the slow way takes minutes or never ends (1E-99999999 did not finish in
// five seconds); a bounded one takes microseconds. The limit separates the
// two on a loaded machine without measuring speed.
const quantityParseLimit = 2 * time.Second

// TestParseQuantity checks ParseQuantity on both sides of the bound: it
// parses every accepted value as resource.ParseQuantity does, refuses the
// rest with ErrQuantityBound quoting the value, and never takes long.
func TestParseQuantity(t *testing.T) {
	for _, s := range crdtest.QuantityAccepted {
		q, err := parseWithin(t, s)
		if err != nil {
			t.Errorf("ParseQuantity(%q) = %v, want it accepted", s, err)
			continue
		}
		if want := resource.MustParse(s); q.Cmp(want) != 0 {
			t.Errorf("ParseQuantity(%q) = %s, want %s", s, q.String(), want.String())
		}
	}
	for _, s := range crdtest.QuantityRefused {
		_, err := parseWithin(t, s)
		if !errors.Is(err, ErrQuantityBound) {
			t.Errorf("ParseQuantity(%.40q) = %v, want an error wrapping ErrQuantityBound", s, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), fmt.Sprintf("%.80q ", s)) {
			t.Errorf("ParseQuantity(%.40q): the error %.120q does not quote the value", s, err)
		}
	}
}

// parseWithin runs ParseQuantity(s) and fails t when it takes longer than
// quantityParseLimit; a parse that never ends is left running, as the test
// binary ends soon.
func parseWithin(t *testing.T, s string) (resource.Quantity, error) {
	t.Helper()
	type result struct {
		q   resource.Quantity
		err error
	}
	done := make(chan result, 1)
	go func() {
		q, err := ParseQuantity(s)
		done <- result{q, err}
	}()
	select {
	case r := <-done:
		return r.q, r.err
	case <-time.After(quantityParseLimit):
		t.Fatalf("ParseQuantity(%.40q) took longer than %s", s, quantityParseLimit)
		return resource.Quantity{}, nil
	}
}

// TestQuantityPatternIsKubernetesSyntax checks that QuantityPattern only
// narrows Kubernetes' syntax: whatever it accepts, Kubernetes' own pattern
// (the one controller-gen writes into every CRD) accepts too.
func TestQuantityPatternIsKubernetesSyntax(t *testing.T) {
	kube := regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)
	for _, s := range append(append([]string{}, crdtest.QuantityAccepted...), crdtest.QuantityRefused...) {
		if quantityPattern.MatchString(s) && !kube.MatchString(s) {
			t.Errorf("QuantityPattern accepts %q, Kubernetes' syntax does not", s)
		}
	}
	if strings.Contains(QuantityPattern, `\`) || strings.Contains(QuantityPattern, `'`) {
		t.Errorf("QuantityPattern %q holds a backslash or quote; it must stand in a CEL string literal unchanged", QuantityPattern)
	}
}

// FuzzQuantityBound checks on arbitrary strings that ParseQuantity is quick
// and that what it accepts resource.ParseQuantity parses to the same value,
// within 2^63-1 and not negative.
func FuzzQuantityBound(f *testing.F) {
	for _, s := range crdtest.QuantityAccepted {
		f.Add(s)
	}
	for _, s := range crdtest.QuantityRefused {
		if len(s) < 100 {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := parseWithin(t, s)
		if err != nil {
			return
		}
		want, err := resource.ParseQuantity(s)
		if err != nil || q.Cmp(want) != 0 {
			t.Fatalf("ParseQuantity(%q) = %s, resource.ParseQuantity = %s, %v", s, q.String(), want.String(), err)
		}
		if q.Sign() < 0 || q.Cmp(quantityMaximum) > 0 {
			t.Fatalf("ParseQuantity(%q) = %s, outside 0 to %s", s, q.String(), QuantityMaximum)
		}
	})
}
