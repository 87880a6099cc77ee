package apply

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RuleBoundedQuantities is the rule that no rendered string is a quantity
// whose exponent has three or more digits.
const RuleBoundedQuantities = "bounded-quantities"

// quantityBomb matches a string in Kubernetes' quantity syntax whose decimal
// exponent has three or more significant digits. The API server of the
// target cluster parses such a value practically forever where a quantity
// belongs, or computes with it as long: measured on kube-apiserver 1.36, a
// ResourceQuota with hard.cpu "1e999999999" or "1E-99999999" got no answer
// within 8 s, and one such request kept a core of the API server busy for
// the 70 s measured, long after the client and the API server's own request
// timeout had given up (kubernetes/kubernetes#131063). A template that puts a tenant's parameter
// into a resource list, quoted or not, hands the tenant that request. No
// real quantity needs such an exponent: 1e18 is already 10^18.
var quantityBomb = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)[eE][+-]?0*[1-9][0-9]{2,}$`)

// checkQuantities refuses o when one of its strings is a quantity bomb. It
// looks at every string of the object, since which fields are quantities
// depends on the kind (and on CRDs the policy does not know), except where
// strings are data and no API server parses them: metadata (labels and
// annotations) and the data of ConfigMaps and Secrets.
func checkQuantities(o *unstructured.Unstructured) error {
	r := ref(o)
	free := map[string]bool{"metadata": true}
	if o.GroupVersionKind().Group == "" && (o.GetKind() == "ConfigMap" || o.GetKind() == "Secret") {
		free["data"], free["stringData"], free["binaryData"] = true, true, true
	}
	keys := make([]string, 0, len(o.Object))
	for k := range o.Object {
		if !free[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if path, s, found := findQuantityBomb(o.Object[k], k); found {
			return &RefusedError{Ref: r, Rule: RuleBoundedQuantities, Problem: fmt.Sprintf(
				"%s is %.40q, a quantity with an exponent of three or more digits, which Kubernetes parses practically forever; "+
					"write quantities with an exponent of at most two digits", path, s)}
		}
	}
	return nil
}

// findQuantityBomb returns the path and value of the first quantity bomb in
// v (at path), in the order of map keys and list items.
func findQuantityBomb(v any, path string) (string, string, bool) {
	switch v := v.(type) {
	case string:
		if quantityBomb.MatchString(v) {
			return path, v, true
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, s, ok := findQuantityBomb(v[k], path+"."+k); ok {
				return p, s, true
			}
		}
	case []any:
		for i, item := range v {
			if p, s, ok := findQuantityBomb(item, path+"["+strconv.Itoa(i)+"]"); ok {
				return p, s, true
			}
		}
	}
	return "", "", false
}
