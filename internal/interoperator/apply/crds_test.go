package apply

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// widgetCRD is a CRD defining example.org Widget, namespaced, served in v1.
func widgetCRD() *unstructured.Unstructured {
	u := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.org")
	u.Object["spec"] = map[string]any{
		"group": "example.org",
		"scope": "Namespaced",
		"names": map[string]any{"kind": "Widget", "plural": "widgets"},
		"versions": []any{
			map[string]any{"name": "v1", "served": true, "storage": true},
			map[string]any{"name": "v0", "served": false},
		},
	}
	return u
}

func TestPrepareKindOfPendingCRD(t *testing.T) {
	tests := map[string]struct {
		reason   string
		objs     []*unstructured.Unstructured
		crds     []*unstructured.Unstructured
		wantNS   string
		wantFail bool
	}{
		"CRDInRender": {
			reason: "A Widget after the CRD that defines it in the same render is namespaced as the CRD says.",
			objs:   []*unstructured.Unstructured{widgetCRD(), obj("example.org/v1", "Widget", "", "w")},
			wantNS: "tenant",
		},
		"ChartCRD": {
			reason: "A Widget whose CRD a chart's crds/ installs first is namespaced as the CRD says.",
			objs:   []*unstructured.Unstructured{obj("example.org/v1", "Widget", "", "w")},
			crds:   []*unstructured.Unstructured{widgetCRD()},
			wantNS: "tenant",
		},
		"UnservedVersion": {
			reason:   "A version the CRD does not serve stays unknown.",
			objs:     []*unstructured.Unstructured{obj("example.org/v0", "Widget", "", "w")},
			crds:     []*unstructured.Unstructured{widgetCRD()},
			wantFail: true,
		},
		"NoCRD": {
			reason:   "A kind nothing defines is unknown.",
			objs:     []*unstructured.Unstructured{obj("example.org/v1", "Widget", "", "w")},
			wantFail: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := testApplier().Prepare(tc.objs, "tenant", nil, tc.crds...)
			if tc.wantFail {
				var unknown *UnknownKindError
				if !errors.As(err, &unknown) {
					t.Fatalf("%s\nPrepare(): %v, want an *UnknownKindError", tc.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nPrepare(): %v", tc.reason, err)
			}
			w := tc.objs[len(tc.objs)-1]
			if w.GetNamespace() != tc.wantNS {
				t.Errorf("%s\nnamespace = %q, want %q", tc.reason, w.GetNamespace(), tc.wantNS)
			}
		})
	}
}

func TestResourceNotFound(t *testing.T) {
	tests := map[string]struct {
		reason string
		err    error
		want   bool
	}{
		"Resource":  {"The API server's 404 for a path it does not serve.", apierrors.NewNotFound(schema.GroupResource{}, ""), true},
		"Namespace": {"A missing namespace is not a missing kind.", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "tenant"), false},
		"Other":     {"Another error.", apierrors.NewConflict(schema.GroupResource{Resource: "widgets"}, "w", errors.New("changed")), false},
	}
	for name, tc := range tests {
		if got := resourceNotFound(tc.err); got != tc.want {
			t.Errorf("%s: %s\nresourceNotFound() = %v, want %v", name, tc.reason, got, tc.want)
		}
	}
}
