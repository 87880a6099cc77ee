package v2alpha1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestStableMCPNamespace(t *testing.T) {
	// The expected values come from openMCP's own function
	// (openmcp-operator/lib v1.3.0 utils.StableMCPNamespace, called as
	// (name, namespace) in a throwaway module). The first is the vector of
	// issue #11. They pin the mapping: providers built on openMCP's
	// libraries look for an MCP's ClusterRequest exactly there.
	cases := map[string]struct {
		namespace, name string
		want            string
	}{
		"issue 11 vector": {
			namespace: "default", name: "test-controlplane",
			want: "mcp--be2cbc6e-13da-83b4-90ea-c21fccf8022c",
		},
		"typical": {
			namespace: "tenant-a", name: "team-blue",
			want: "mcp--cd300aa8-5629-8c0d-84a1-6dc09261dad0",
		},
		"short": {
			namespace: "a", name: "b",
			want: "mcp--2e3da8c2-fc42-827a-b23e-5dab3fd2e59e",
		},
		"quickstart": {
			namespace: "tenant-a", name: "demo",
			want: "mcp--4326eb93-2f40-87ab-b6f3-0f363f3848fd",
		},
		"dotted name": {
			namespace: "ns", name: "name.with.dots",
			want: "mcp--5a633455-2ff4-8321-ba96-77b0590e1d02",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := StableMCPNamespace(tc.namespace, tc.name); got != tc.want {
				t.Errorf("StableMCPNamespace(%q, %q) = %q, want openMCP's %q", tc.namespace, tc.name, got, tc.want)
			}
		})
	}
}

func TestLegacyMCPNamespace(t *testing.T) {
	// The expected values come from an independent implementation of RFC
	// 4122 version 5 (Python's uuid.uuid5(uuid.NAMESPACE_URL, ...)). They
	// pin the namespaces earlier versions created: changing them would lose
	// the requests of existing control planes.
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
			if got := LegacyMCPNamespace(tc.namespace, tc.name); got != tc.want {
				t.Errorf("LegacyMCPNamespace(%q, %q) = %q, want %q", tc.namespace, tc.name, got, tc.want)
			}
		})
	}
}

func TestPlatformNamespace(t *testing.T) {
	obj := func(annotation string) *metav1.ObjectMeta {
		m := &metav1.ObjectMeta{Namespace: "tenant-a", Name: "team-blue"}
		if annotation != "" {
			m.Annotations = map[string]string{PlatformNamespaceAnnotation: annotation}
		}
		return m
	}
	stable, legacy := StableMCPNamespace("tenant-a", "team-blue"), LegacyMCPNamespace("tenant-a", "team-blue")
	cases := map[string]struct {
		reason     string
		annotation string
		want       string
	}{
		"no annotation": {
			reason: "a new control plane gets openMCP's namespace",
			want:   stable,
		},
		"legacy annotation": {
			reason:     "a control plane of an earlier version keeps its namespace",
			annotation: legacy, want: legacy,
		},
		"stable annotation": {
			reason:     "the annotation of a new control plane names openMCP's namespace",
			annotation: stable, want: stable,
		},
		"another MCP's namespace": {
			reason:     "a tenant who edits the annotation must not point the controller at another MCP's requests",
			annotation: StableMCPNamespace("tenant-b", "team-blue"), want: stable,
		},
		"a system namespace": {
			reason:     "an annotation naming any other namespace is ignored",
			annotation: "kube-system", want: stable,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := PlatformNamespace(obj(tc.annotation)); got != tc.want {
				t.Errorf("%s: PlatformNamespace with annotation %q = %q, want %q", tc.reason, tc.annotation, got, tc.want)
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
	seen := map[string]string{}
	for _, in := range inputs {
		for fn, f := range map[string]func(string, string) string{"StableMCPNamespace": StableMCPNamespace, "LegacyMCPNamespace": LegacyMCPNamespace} {
			got := f(in[0], in[1])
			if len(got) > 63 {
				t.Errorf("%s(%q, %q) = %q is %d characters long, want at most 63", fn, in[0], in[1], got, len(got))
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%s(%q, %q) = %q is not a valid namespace name: %v", fn, in[0], in[1], got, errs)
			}
			call := fn + "(" + in[0] + ", " + in[1] + ")"
			if other, ok := seen[got]; ok {
				t.Errorf("%s = %s = %q", call, other, got)
			}
			seen[got] = call
		}
	}
}
