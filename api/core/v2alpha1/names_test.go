package v2alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestStableNamespace(t *testing.T) {
	// The expected values come from an independent implementation of RFC
	// 4122 version 5 (Python's uuid.uuid5(uuid.NAMESPACE_URL, ...)). They pin
	// the mapping: changing it would move existing MCPs to new namespaces.
	cases := map[string]struct {
		namespace, name string
		want            string
	}{
		"typical": {
			namespace: "tenant-a", name: "team-blue",
			want: "mcp--97ec12a7-3db4-50b7-af31-b21f096984f8",
		},
		"short": {
			namespace: "a", name: "b",
			want: "mcp--91410e86-9161-5317-9576-be5c7660f085",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := StableMCPNamespace(tc.namespace, tc.name)
			if got != tc.want {
				t.Errorf("StableMCPNamespace(%q, %q) = %q, want %q", tc.namespace, tc.name, got, tc.want)
			}
			if again := StableMCPNamespace(tc.namespace, tc.name); again != got {
				t.Errorf("StableNamespace is not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestStableNamespaceIsAValidDistinctName(t *testing.T) {
	long := strings.Repeat("x", 253)
	inputs := [][2]string{
		{"tenant-a", "team-blue"},
		{"tenant-b", "team-blue"},
		{"tenant-a", "team-red"},
		// Shifting characters between namespace and name must not collide.
		{"tenant-a", "b"},
		{"tenant", "a-b"},
		{"tenant-ab", ""},
		{long[:63], long},
		{"ns", "name.with.dots"},
	}
	seen := map[string][2]string{}
	for _, in := range inputs {
		got := StableMCPNamespace(in[0], in[1])
		if len(got) > 63 {
			t.Errorf("StableMCPNamespace(%q, %q) = %q is %d characters long, want at most 63", in[0], in[1], got, len(got))
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("StableMCPNamespace(%q, %q) = %q is not a valid namespace name: %v", in[0], in[1], got, errs)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("StableMCPNamespace(%q, %q) = StableMCPNamespace(%q, %q) = %q", in[0], in[1], other[0], other[1], got)
		}
		seen[got] = in
	}
}
