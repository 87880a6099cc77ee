package common

import (
	"errors"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The bound of every quantity (resource.Quantity) field. Kubernetes' own
// syntax, which the API server checks on such a field, lets through values on
// which resource.ParseQuantity, and with it the decoding of the whole object
// list of an informer, takes practically forever (negative exponents such as
// 1E-99999999, exponents past int32 such as 2E6024865272343;
// kubernetes/kubernetes#131063), values whose sums and comparisons do
// (1e999999999 parses at once, but Cmp and Add compute 10^999999999), values
// of a million digits (seconds to parse) and values that do not decode at all
// (1e2.5: the pattern allows a fraction in the exponent, the parser does not).
// The bound keeps each value short, its exponent small and its magnitude
// within what Kubernetes documents a quantity to hold, so that parsing and
// arithmetic take microseconds.
const (
	// QuantityMaxLength bounds the text of a quantity: sign, 19 digits, a
	// point, 9 decimals and a suffix take 32 characters; leading zeros and
	// further decimals get the rest.
	QuantityMaxLength = 64
	// QuantityPattern is the accepted form of a quantity written as a
	// string: Kubernetes' syntax without a minus sign, with a decimal
	// exponent of at most two digits. It has no backslash, so that it can
	// stand in a CEL string literal unchanged.
	QuantityPattern = `^[+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?$`
	// QuantityMaximum is the largest quantity: 2^63-1, the magnitude
	// Kubernetes documents as the limit of any quantity.
	QuantityMaximum = "9223372036854775807"
	// QuantityRule is the CEL rule every quantity field carries in its CRD
	// (hack/crdbounds puts it there: controller-gen writes Kubernetes' own
	// schema for resource.Quantity, which no marker reaches). A JSON
	// integer arrives as an int (a float or an integer beyond int64 is
	// refused before the rule); a string must match QuantityPattern before
	// quantity() parses it, so the API server never parses an unbounded one
	// (&& stops at the first false; the rule runs even when the schema's
	// own pattern failed).
	QuantityRule = "type(self) == int ? self >= 0 : self.matches('" + QuantityPattern + "') && quantity(self).compareTo(quantity('" + QuantityMaximum + "')) <= 0"
	// QuantityMessage is the rule's message; the API server puts the
	// field's path in front of it.
	QuantityMessage = "must be a quantity such as 2, 500m, 1.5Gi or 129e6: not negative, at most 9223372036854775807 (2^63-1), " +
		"an exponent (e or E) of at most two digits, at most 64 characters"
)

var (
	quantityPattern = regexp.MustCompile(QuantityPattern)
	quantityMaximum = resource.MustParse(QuantityMaximum)
)

// ErrQuantityBound is the error ParseQuantity wraps for a value outside the
// bound.
var ErrQuantityBound = errors.New(QuantityMessage)

// ParseQuantity parses s as a quantity within the bound of QuantityRule:
// what the API server accepts in a quantity field parses, and the rest is an
// error that quotes s and wraps ErrQuantityBound, found before
// resource.ParseQuantity sees s. Readers of quantities from free-form input
// (a plan's spec.context.requests) use it instead of resource.ParseQuantity.
func ParseQuantity(s string) (resource.Quantity, error) {
	if len(s) > QuantityMaxLength || !quantityPattern.MatchString(s) {
		return resource.Quantity{}, fmt.Errorf("%.80q %w", s, ErrQuantityBound)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q %w: %w", s, ErrQuantityBound, err)
	}
	if q.Cmp(quantityMaximum) > 0 {
		return resource.Quantity{}, fmt.Errorf("%q %w", s, ErrQuantityBound)
	}
	return q, nil
}
