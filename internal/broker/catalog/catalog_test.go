package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func service(id, name string, mutate ...func(*osbv1alpha1.SFService)) osbv1alpha1.SFService {
	s := osbv1alpha1.SFService{
		ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: "interoperator", Generation: 1},
		Spec:       osbv1alpha1.SFServiceSpec{ID: id, Name: name, Description: "d " + name, Bindable: true},
	}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func plan(id, name, serviceID string, mutate ...func(*osbv1alpha1.SFPlan)) osbv1alpha1.SFPlan {
	p := osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: "interoperator", Generation: 1},
		Spec:       osbv1alpha1.SFPlanSpec{ID: id, Name: name, Description: "d " + name, ServiceID: serviceID, Free: true, Bindable: true},
	}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func raw(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func notReadyCondition(generation int64) []metav1.Condition {
	return []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: generation, Reason: "Invalid"}}
}

// served returns "service: plan plan" per offering of the snapshot's JSON.
func served(t *testing.T, snap *Snapshot) []string {
	t.Helper()
	var c struct {
		Services []struct {
			Name  string `json:"name"`
			Plans []struct {
				Name string `json:"name"`
			} `json:"plans"`
		} `json:"services"`
	}
	if err := json.Unmarshal(snap.JSON, &c); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, s := range c.Services {
		var plans []string
		for _, p := range s.Plans {
			plans = append(plans, p.Name)
		}
		out = append(out, s.Name+": "+strings.Join(plans, " "))
	}
	return out
}

func TestBuild(t *testing.T) {
	tests := map[string]struct {
		reason   string
		services []osbv1alpha1.SFService
		plans    []osbv1alpha1.SFPlan
		want     []string
		problems int
	}{
		"Empty": {
			reason: "An empty catalog is {\"services\":[]}.",
			want:   []string{},
		},
		"Sorted": {
			reason:   "Offerings and plans are sorted by name.",
			services: []osbv1alpha1.SFService{service("s2", "zeta"), service("s1", "alpha")},
			plans:    []osbv1alpha1.SFPlan{plan("p2", "small", "s1"), plan("p1", "large", "s1"), plan("p3", "x", "s2")},
			want:     []string{"alpha: large small", "zeta: x"},
		},
		"ServiceWithoutPlans": {
			reason:   "An offering needs at least one plan.",
			services: []osbv1alpha1.SFService{service("s1", "a"), service("s2", "b")},
			plans:    []osbv1alpha1.SFPlan{plan("p1", "small", "s1")},
			want:     []string{"a: small"},
			problems: 1,
		},
		"PlanOfUnknownService": {
			reason:   "A plan whose service is missing is left out.",
			services: []osbv1alpha1.SFService{service("s1", "a")},
			plans:    []osbv1alpha1.SFPlan{plan("p1", "small", "s1"), plan("p2", "orphan", "nope")},
			want:     []string{"a: small"},
			problems: 1,
		},
		"NotReady": {
			reason:   "Ready=False for the current generation leaves an object out; for an older generation it does not.",
			services: []osbv1alpha1.SFService{service("s1", "a")},
			plans: []osbv1alpha1.SFPlan{
				plan("p1", "small", "s1", func(p *osbv1alpha1.SFPlan) { p.Status.Conditions = notReadyCondition(1) }),
				plan("p2", "large", "s1", func(p *osbv1alpha1.SFPlan) { p.Generation = 2; p.Status.Conditions = notReadyCondition(1) }),
			},
			want:     []string{"a: large"},
			problems: 1,
		},
		"DuplicateIDs": {
			reason:   "Ids are unique: the first object by namespace/name wins.",
			services: []osbv1alpha1.SFService{service("s1", "a"), func() osbv1alpha1.SFService { s := service("s1", "b"); s.Name = "zz"; return s }()},
			plans:    []osbv1alpha1.SFPlan{plan("p1", "small", "s1"), func() osbv1alpha1.SFPlan { p := plan("p1", "other", "s1"); p.Name = "zz"; return p }()},
			want:     []string{"a: small"},
			problems: 2,
		},
		"DuplicatePlanNames": {
			reason:   "Plan names are unique within an offering.",
			services: []osbv1alpha1.SFService{service("s1", "a")},
			plans:    []osbv1alpha1.SFPlan{plan("p1", "small", "s1"), plan("p2", "small", "s1")},
			want:     []string{"a: small"},
			problems: 1,
		},
		"BadSchema": {
			reason:   "A plan whose schema does not compile is left out.",
			services: []osbv1alpha1.SFService{service("s1", "a")},
			plans: []osbv1alpha1.SFPlan{plan("p1", "small", "s1", func(p *osbv1alpha1.SFPlan) {
				p.Spec.Schemas = &osbv1alpha1.ServiceSchemas{Instance: &osbv1alpha1.ServiceInstanceSchema{Create: &osbv1alpha1.Schema{Parameters: raw(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"nonsense"}`)}}}
			}), plan("p2", "large", "s1")},
			want:     []string{"a: large"},
			problems: 1,
		},
		"ExternalReference": {
			reason:   "Schemas must not reference other documents.",
			services: []osbv1alpha1.SFService{service("s1", "a")},
			plans: []osbv1alpha1.SFPlan{plan("p1", "small", "s1", func(p *osbv1alpha1.SFPlan) {
				p.Spec.Schemas = &osbv1alpha1.ServiceSchemas{Binding: &osbv1alpha1.ServiceBindingSchema{Create: &osbv1alpha1.Schema{Parameters: raw(`{"$schema":"http://json-schema.org/draft-04/schema#","$ref":"https://example.com/s.json"}`)}}}
			}), plan("p2", "large", "s1")},
			want:     []string{"a: large"},
			problems: 1,
		},
		"BadManager": {
			reason:   "A plan whose manager cannot be read (async must be a boolean) is left out.",
			services: []osbv1alpha1.SFService{service("s1", "a")},
			plans:    []osbv1alpha1.SFPlan{plan("p1", "small", "s1", func(p *osbv1alpha1.SFPlan) { p.Spec.Manager = raw(`{"async":"sometimes"}`) }), plan("p2", "large", "s1")},
			want:     []string{"a: large"},
			problems: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Build(tc.services, tc.plans)
			if diff := cmp.Diff(tc.want, served(t, snap)); diff != "" {
				t.Errorf("%s\nserved -want, +got:\n%s", tc.reason, diff)
			}
			if len(snap.Problems) != tc.problems {
				t.Errorf("%s\nproblems = %q, want %d", tc.reason, snap.Problems, tc.problems)
			}
			if !json.Valid(snap.JSON) || snap.ETag == "" {
				t.Errorf("%s\ninvalid JSON or no ETag", tc.reason)
			}
		})
	}
}

func TestBuildPlanSettings(t *testing.T) {
	svc := service("s1", "a", func(s *osbv1alpha1.SFService) {
		s.Spec.PlanUpdatable = true
		s.Spec.InstancesRetrievable = true
		// The older spellings bindingRetrievable and redirectURI arrive the
		// way a Service Fabrik manifest sends them: the catalog must honour
		// them although the newer fields are unset.
		older := `{"bindingRetrievable": true, "dashboardClient": {"id": "c", "secret": "s", "redirectURI": "https://r"}}`
		if err := json.Unmarshal([]byte(older), &s.Spec); err != nil {
			t.Fatalf("decode the older spellings: %v", err)
		}
		s.Spec.Metadata = raw(`{"displayName": "A"}`)
	})
	p := plan("p1", "small", "s1", func(p *osbv1alpha1.SFPlan) {
		p.Spec.Manager = raw(`{"async":true,"asyncBinding":"true","requiresApp":false,"settings":{"dashboard_url_template":"aHR0cHM6Ly9kLyR7aW5zdGFuY2UuaWR9","update_predecessors":["p0"]}}`)
		p.Spec.MaintenanceInfo = &osbv1alpha1.MaintenanceInfo{Version: "1.2.3", Description: "x"}
		p.Spec.MaximumPollingDuration = 600
	})
	snap := Build([]osbv1alpha1.SFService{svc}, []osbv1alpha1.SFPlan{p})
	got := *snap.Plan("p1")
	want := Plan{ID: "p1", Name: "small", ServiceID: "s1", Bindable: true, PlanUpdatable: true, Async: true, AsyncBinding: true,
		MaintenanceVersion: "1.2.3", MaintenanceDescription: "x", UpdatePredecessors: []string{"p0"}, DashboardURLTemplate: "https://d/${instance.id}"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Schema{})); diff != "" {
		t.Errorf("plan -want, +got:\n%s", diff)
	}
	s := snap.Service("s1")
	if !s.InstancesRetrievable || !s.BindingsRetrievable || !s.PlanUpdatable {
		t.Errorf("service settings %+v", s)
	}

	var c map[string]any
	if err := json.Unmarshal(snap.JSON, &c); err != nil {
		t.Fatal(err)
	}
	wire := c["services"].([]any)[0].(map[string]any)
	wantService := map[string]any{
		"name": "a", "id": "s1", "description": "d a", "bindable": true, "instances_retrievable": true,
		"bindings_retrievable": true, "allow_context_updates": false, "plan_updateable": true,
		"metadata":         map[string]any{"displayName": "A"},
		"dashboard_client": map[string]any{"id": "c", "secret": "s", "redirect_uri": "https://r"},
		"plans": []any{map[string]any{
			"id": "p1", "name": "small", "description": "d small", "free": true, "bindable": true,
			"maximum_polling_duration": 600.0,
			"maintenance_info":         map[string]any{"version": "1.2.3", "description": "x"},
		}},
	}
	if diff := cmp.Diff(wantService, wire); diff != "" {
		t.Errorf("catalog entry -want, +got:\n%s", diff)
	}
}

func TestSchemaValidate(t *testing.T) {
	s, err := CompileSchema([]byte(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["name"],"properties":{"size":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		in      string
		wantErr []string
	}{
		"Valid":     {in: `{"name":"a","size":1}`},
		"Missing":   {in: `{}`, wantErr: []string{"name"}},
		"Absent":    {in: ``, wantErr: []string{"name"}},
		"WrongType": {in: `{"name":"a","size":"x"}`, wantErr: []string{"/size", "integer"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := s.Validate([]byte(tc.in))
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Fatalf("Validate(%s) = %v, want error %v", tc.in, err, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if err != nil && strings.Contains(err.Error(), schemaURL) {
				t.Errorf("error names the internal schema URL: %q", err)
			}
		})
	}
	if _, err := CompileSchema([]byte(strings.Repeat(" ", MaxSchemaBytes+1))); err == nil {
		t.Error("a schema over 64 kB must be refused")
	}
}
