package catalog

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

const widgetSchema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}}}`

func offering(name string, mutate ...func(*marketplacev1alpha1.Offering)) marketplacev1alpha1.Offering {
	o := marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: marketplacev1alpha1.OfferingSpec{
			Source:      marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceServiceProvider, Name: strings.TrimPrefix(name, "sp-")},
			Description: "d " + name,
			Ready:       true,
			OSB: &marketplacev1alpha1.OSBSettings{Enabled: true, BindingRules: []rbacv1.PolicyRule{{
				APIGroups: []string{"example.org"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}}},
			Kinds: []marketplacev1alpha1.OfferedKind{{Group: "example.org", Version: "v1", Kind: "Widget", Plural: "widgets",
				Scope: "Namespaced", Schema: &apiextensionsv1.JSON{Raw: []byte(widgetSchema)}}},
		},
	}
	for _, m := range mutate {
		m(&o)
	}
	return o
}

// TestBuildCode: only opted-in, Ready ServiceProvider offerings with a
// namespaced kind whose schema compiles are served; what is left out is
// said.
func TestBuildCode(t *testing.T) {
	cases := map[string]struct {
		reason   string
		offering marketplacev1alpha1.Offering
		served   bool
		problem  string
	}{
		"Served":     {reason: "opted in and Ready", offering: offering("sp-a"), served: true},
		"NotOptedIn": {reason: "no spec.osb", offering: offering("sp-a", func(o *marketplacev1alpha1.Offering) { o.Spec.OSB = nil })},
		"Disabled": {reason: "bad binding rules: not served, said why", problem: "not a list",
			offering: offering("sp-a", func(o *marketplacev1alpha1.Offering) {
				o.Spec.OSB = &marketplacev1alpha1.OSBSettings{Message: "not a list"}
			})},
		"NotReady": {reason: "a provider that is not Ready", problem: "not Ready",
			offering: offering("sp-a", func(o *marketplacev1alpha1.Offering) { o.Spec.Ready = false })},
		"SFService": {reason: "an SF offering is the SF catalog's",
			offering: offering("sf-a", func(o *marketplacev1alpha1.Offering) { o.Spec.Source.Kind = marketplacev1alpha1.SourceSFService })},
		"ClusterScoped": {reason: "objects must sit next to their MCP", problem: "Cluster-scoped",
			offering: offering("sp-a", func(o *marketplacev1alpha1.Offering) { o.Spec.Kinds[0].Scope = "Cluster" })},
		"NoCRD": {reason: "a kind without CRD has no schema", problem: "CRD",
			offering: offering("sp-a", func(o *marketplacev1alpha1.Offering) { o.Spec.Kinds[0].Schema, o.Spec.Kinds[0].Plural = nil, "" })},
		"ReservedField": {reason: "the spec must not use the reserved parameter", problem: ControlPlaneParameter,
			offering: offering("sp-a", func(o *marketplacev1alpha1.Offering) {
				o.Spec.Kinds[0].Schema.Raw = []byte(`{"type":"object","properties":{"` + ControlPlaneParameter + `":{"type":"string"}}}`)
			})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := BuildCode([]marketplacev1alpha1.Offering{tc.offering})
			svc := c.Service(OfferingServiceID(tc.offering.Name))
			if (svc != nil) != tc.served {
				t.Fatalf("%s: served = %v, want %v (problems %v)", tc.reason, svc != nil, tc.served, c.Problems)
			}
			if tc.problem != "" && !strings.Contains(strings.Join(c.Problems, "\n"), tc.problem) {
				t.Errorf("%s: problems %v do not mention %q", tc.reason, c.Problems, tc.problem)
			}
		})
	}
}

// TestCodeIDs: ids are UUIDs, stable, and differ per offering and kind.
func TestCodeIDs(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	ids := []string{OfferingServiceID("sp-a"), OfferingServiceID("sp-b"), OfferingPlanID("sp-a", "example.org", "Widget"), OfferingPlanID("sp-a", "example.org", "Gadget")}
	seen := map[string]bool{}
	for _, id := range ids {
		if !uuid.MatchString(id) {
			t.Errorf("%s is not a version 8 UUID", id)
		}
		if seen[id] {
			t.Errorf("%s twice", id)
		}
		seen[id] = true
	}
	// Pinned: a change would orphan every platform's instances.
	if got, want := OfferingServiceID("sp-sample"), "2b3415d1-fb99-8921-bfd3-2779a4f34514"; got != want {
		t.Errorf("OfferingServiceID(sp-sample) = %s, want %s", got, want)
	}
	if got, want := OfferingPlanID("sp-sample", "sample.services.openmcp.cloud", "Sample"), "aeeb9d5e-cbc9-8041-87fd-6d07203bf31f"; got != want {
		t.Errorf("OfferingPlanID(sp-sample, Sample) = %s, want %s", got, want)
	}
}

// TestCodeParameters: the plan's schema is the spec's with the control
// plane parameter, refuses unknown fields, and validates values.
func TestCodeParameters(t *testing.T) {
	c := BuildCode([]marketplacev1alpha1.Offering{offering("sp-a")})
	plan := c.Plan(OfferingPlanID("sp-a", "example.org", "Widget"))
	if plan == nil {
		t.Fatalf("no plan: %v", c.Problems)
	}
	for params, ok := range map[string]bool{
		`{}`:           true,
		`{"size":3}`:   true,
		`{"size":0}`:   false,
		`{"size":"3"}`: false,
		`{"sise":3}`:   false,
		`{"` + ControlPlaneParameter + `":{"namespace":"t","name":"m"},"size":1}`: true,
		`{"` + ControlPlaneParameter + `":{"namespace":"t"}}`:                     false,
	} {
		if err := plan.CreateSchema.Validate([]byte(params)); (err == nil) != ok {
			t.Errorf("%s: error %v, want valid=%v", params, err, ok)
		}
	}
}

// TestMerge: the SF part of the body is served unchanged, the code-based
// offerings follow, and a code-based offering whose id or name an SF
// service has is left out with a problem.
func TestMerge(t *testing.T) {
	sf := Build([]osbv1alpha1.SFService{service("svc-1", "one")}, []osbv1alpha1.SFPlan{plan("plan-1", "small", "svc-1")})
	code := BuildCode([]marketplacev1alpha1.Offering{offering("sp-a"), offering("one")})
	merged := Merge(sf, code)
	if diff := cmp.Diff([]string{"one: small", "sp-a: widget"}, served(t, merged)); diff != "" {
		t.Errorf("served -want +got:\n%s", diff)
	}
	if !strings.Contains(strings.Join(merged.Problems, "\n"), `name "one"`) {
		t.Errorf("the name clash is not reported: %v", merged.Problems)
	}
	if merged.Code().Service(OfferingServiceID("one")) != nil || merged.Code().Service(OfferingServiceID("sp-a")) == nil {
		t.Errorf("code services: clash served or valid one missing")
	}
	if merged.Service("svc-1") == nil || !strings.HasPrefix(string(merged.JSON), strings.TrimSuffix(string(sf.JSON), "]}")) {
		t.Errorf("the SF part changed:\n%s\n%s", sf.JSON, merged.JSON)
	}
	if merged.ETag == sf.ETag {
		t.Error("the ETag did not change with the body")
	}
	if m := Merge(sf, BuildCode(nil)); !bytes.Equal(m.JSON, sf.JSON) || m.ETag != sf.ETag {
		t.Error("without code-based offerings the catalog is not the SF one")
	}
}
