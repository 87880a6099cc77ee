package provider

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	shortnames "github.com/marketplane/marketplane/pkg/names"
)

func TestNewNames(t *testing.T) {
	cases := map[string]struct {
		reason string
		prefix string
		name   string
		want   names
	}{
		"Short": {
			reason: "A short name is used as it is, as docs/operator.md lists.",
			prefix: "sp",
			name:   "example-service",
			want: names{
				Namespace:       "sp-example-service",
				Init:            "sp-example-service-init",
				Run:             "sp-example-service",
				MetricsService:  "sp-example-service-metrics",
				InitClusterRole: "marketplane:sp-example-service-init",
				RunClusterRole:  "marketplane:sp-example-service",
				TenantViewRole:  "marketplane:sp-example-service:view",
				TenantEditRole:  "marketplane:sp-example-service:edit",
				LabelValue:      "example-service",
			},
		},
		"Dotted": {
			reason: "Dots are not allowed in namespace and Service names; the name gets a hash so that a.b and a-b differ.",
			prefix: "cp",
			name:   "a.b",
			want: names{
				Namespace:       "cp-a-b-" + hash("cp-a.b"),
				Init:            "cp-a-b-init-" + hash("cp-a.b-init"),
				Run:             "cp-a-b-" + hash("cp-a.b"),
				MetricsService:  "cp-a-b-metrics-" + hash("cp-a.b-metrics"),
				InitClusterRole: "marketplane:cp-a.b-init",
				RunClusterRole:  "marketplane:cp-a.b",
				TenantViewRole:  "marketplane:cp-a.b:view",
				TenantEditRole:  "marketplane:cp-a.b:edit",
				LabelValue:      "a.b",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := newNames(tc.prefix, tc.name)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(names{})); diff != "" {
				t.Errorf("%s\nnewNames(%q, %q): -want +got:\n%s", tc.reason, tc.prefix, tc.name, diff)
			}
		})
	}
}

func TestNewNamesLong(t *testing.T) {
	long := strings.Repeat("very-long-provider-name.", 10) + "x" // 241 bytes, a valid object name
	other := strings.Repeat("very-long-provider-name.", 10) + "y"
	if errs := validation.IsDNS1123Subdomain(long); len(errs) > 0 {
		t.Fatalf("test name is not a valid object name: %v", errs)
	}
	n, m := newNames("ps", long), newNames("ps", other)
	for what, pair := range map[string][2]string{
		"Namespace":       {n.Namespace, m.Namespace},
		"Init":            {n.Init, m.Init},
		"Run":             {n.Run, m.Run},
		"MetricsService":  {n.MetricsService, m.MetricsService},
		"TenantViewRole":  {n.TenantViewRole, m.TenantViewRole},
		"TenantEditRole":  {n.TenantEditRole, m.TenantEditRole},
		"InitClusterRole": {n.InitClusterRole, m.InitClusterRole},
		"RunClusterRole":  {n.RunClusterRole, m.RunClusterRole},
		"LabelValue":      {n.LabelValue, m.LabelValue},
	} {
		if pair[0] == pair[1] {
			t.Errorf("%s: names %q and %q differ only at the end but share %q", what, long, other, pair[0])
		}
	}
	for what, errs := range map[string][]string{
		"Namespace":       validation.IsDNS1035Label(n.Namespace),
		"Init":            validation.IsDNS1035Label(n.Init),
		"Run":             validation.IsDNS1035Label(n.Run),
		"MetricsService":  validation.IsDNS1035Label(n.MetricsService),
		"InitClusterRole": validation.IsDNS1123Subdomain(strings.ReplaceAll(n.InitClusterRole, ":", "-")),
		"RunClusterRole":  validation.IsDNS1123Subdomain(strings.ReplaceAll(n.RunClusterRole, ":", "-")),
		"LabelValue":      validation.IsValidLabelValue(n.LabelValue),
	} {
		if len(errs) > 0 {
			t.Errorf("%s: %v", what, errs)
		}
	}
	if !strings.HasPrefix(n.Init, "ps-very-long-provider-name-") {
		t.Errorf("Init = %q: a shortened name should still start like the full one", n.Init)
	}
}

func hash(s string) string {
	return shortnames.WithHash("", s, 100)[1:]
}
