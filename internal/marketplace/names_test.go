package marketplace

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestImageVersion(t *testing.T) {
	cases := map[string]struct {
		image, want string
	}{
		"tag":                {"registry.example.com/p/widgets:v1.2.3", "v1.2.3"},
		"port, tag":          {"registry.example.com:5000/widgets:v2", "v2"},
		"port, no tag":       {"registry.example.com:5000/widgets", ""},
		"digest":             {"registry.example.com/widgets@sha256:abc", "sha256:abc"},
		"tag and digest":     {"registry.example.com/widgets:v3@sha256:abc", "v3"},
		"short name, no tag": {"widgets", ""},
	}
	for name, tc := range cases {
		if got := imageVersion(tc.image); got != tc.want {
			t.Errorf("%s: imageVersion(%q) = %q, want %q", name, tc.image, got, tc.want)
		}
	}
}

func TestOfferingNames(t *testing.T) {
	if got := serviceProviderOfferingName("crossplane"); got != "sp-crossplane" {
		t.Errorf("sp name = %q", got)
	}
	if got := sfServiceOfferingName("interoperator", "postgres"); got != "sf-interoperator-postgres" {
		t.Errorf("sf name = %q", got)
	}
	long := strings.Repeat("a", 60)
	a, b := sfServiceOfferingName("ns", long+"x"), sfServiceOfferingName("ns", long+"y")
	for _, n := range []string{a, b, serviceProviderOfferingName(long + ".b")} {
		if len(n) > 63 || len(validation.IsDNS1123Subdomain(n)) != 0 {
			t.Errorf("name %q (%d) is not a valid name of at most 63 characters", n, len(n))
		}
	}
	if a == b {
		t.Errorf("two long names shorten to the same %q", a)
	}
}
