package apply

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCheckQuantities(t *testing.T) {
	quota := func(cpu string) *unstructured.Unstructured {
		o := obj("v1", "ResourceQuota", "tenant", "q")
		o.Object["spec"] = map[string]any{"hard": map[string]any{"cpu": cpu, "pods": "10"}}
		return o
	}
	container := func(memory string) *unstructured.Unstructured {
		o := obj("apps/v1", "Deployment", "tenant", "d")
		o.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "c", "resources": map[string]any{"limits": map[string]any{"memory": memory}}},
		}}}}
		return o
	}
	configMap := func(v string) *unstructured.Unstructured {
		o := obj("v1", "ConfigMap", "tenant", "c")
		o.Object["data"] = map[string]any{"x": v}
		o.SetAnnotations(map[string]string{"note": v})
		return o
	}
	tests := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		path   string // the path the refusal names; "" when accepted
	}{
		"Ordinary":         {reason: "Ordinary quantities pass.", obj: quota("500m")},
		"TwoDigitExponent": {reason: "An exponent of two digits parses at once.", obj: quota("1e18")},
		"NegativeExponent": {reason: "1E-99999999 is parsed practically forever.", obj: quota("1E-99999999"), path: "spec.hard.cpu"},
		"HugeExponent":     {reason: "1e999999999 parses, then every comparison takes forever.", obj: quota("1e999999999"), path: "spec.hard.cpu"},
		"ThreeDigits":      {reason: "The bound is three digits.", obj: quota("1e+100"), path: "spec.hard.cpu"},
		"LeadingZeros":     {reason: "Leading zeros do not count.", obj: quota("1e0018")},
		"InAList":          {reason: "The path names list items.", obj: container("2E6024865272343"), path: "spec.template.spec.containers[0].resources.limits.memory"},
		"ConfigMapData":    {reason: "The data of a ConfigMap and annotations are not parsed.", obj: configMap("1e999999999")},
		"NotAQuantity":     {reason: "Other strings pass.", obj: quota("version-1e999")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkQuantities(tc.obj)
			var refused *RefusedError
			switch {
			case tc.path == "" && err != nil:
				t.Errorf("%s\nerr = %v, want none", tc.reason, err)
			case tc.path != "" && (!errors.As(err, &refused) || refused.Rule != RuleBoundedQuantities):
				t.Errorf("%s\nerr = %v, want rule %s", tc.reason, err, RuleBoundedQuantities)
			case tc.path != "" && !strings.Contains(refused.Problem, tc.path+" is "):
				t.Errorf("%s\nproblem = %q, want it to name %s", tc.reason, refused.Problem, tc.path)
			}
		})
	}
}
