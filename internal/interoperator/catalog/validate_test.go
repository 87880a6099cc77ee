package catalog

import (
	"encoding/base64"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func service(name, id string) osbv1alpha1.SFService {
	return osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cat"}, Spec: osbv1alpha1.SFServiceSpec{ID: id, Name: name}}
}

func plan(name, id, serviceID string, mutate ...func(*osbv1alpha1.SFPlan)) osbv1alpha1.SFPlan {
	p := osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cat"},
		Spec: osbv1alpha1.SFPlanSpec{ID: id, Name: name, ServiceID: serviceID, Templates: []osbv1alpha1.TemplateSpec{
			{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: "kind: {{ .instance.metadata.name | toYaml }}"},
		}},
	}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func withSchema(raw string) func(*osbv1alpha1.SFPlan) {
	return func(p *osbv1alpha1.SFPlan) {
		p.Spec.Schemas = &osbv1alpha1.ServiceSchemas{Binding: &osbv1alpha1.ServiceBindingSchema{
			Create: &osbv1alpha1.Schema{Parameters: &runtime.RawExtension{Raw: []byte(raw)}}}}
	}
}

func withTemplate(t osbv1alpha1.TemplateSpec) func(*osbv1alpha1.SFPlan) {
	return func(p *osbv1alpha1.SFPlan) { p.Spec.Templates = append(p.Spec.Templates, t) }
}

func TestValidatePlan(t *testing.T) {
	services := []osbv1alpha1.SFService{service("svc", "svc-id")}
	tests := map[string]struct {
		reason  string
		plan    osbv1alpha1.SFPlan
		others  []osbv1alpha1.SFPlan
		want    Reason
		message string
	}{
		"Valid": {
			reason: "A plan of an existing service, with unique ids, is valid; Service Fabrik's extra functions parse.",
			plan:   plan("p", "p-id", "svc-id"),
			others: []osbv1alpha1.SFPlan{plan("q", "q-id", "svc-id")},
		},
		"UnknownService": {
			reason:  "serviceId must name a service of the namespace.",
			plan:    plan("p", "p-id", "other"),
			want:    ReasonServiceNotFound,
			message: `"other"`,
		},
		"DuplicateID": {
			reason:  "Plan ids are unique in the namespace.",
			plan:    plan("p", "p-id", "svc-id"),
			others:  []osbv1alpha1.SFPlan{plan("q", "p-id", "svc-id")},
			want:    ReasonDuplicateID,
			message: "SFPlan q",
		},
		"DuplicateName": {
			reason: "Plan names are unique within their service.",
			plan:   plan("p", "p-id", "svc-id"),
			others: []osbv1alpha1.SFPlan{plan("p-copy", "q-id", "svc-id", func(p *osbv1alpha1.SFPlan) { p.Spec.Name = "p" })},
			want:   ReasonDuplicateName,
		},
		"DeletedDuplicate": {
			reason: "A plan being deleted does not count.",
			plan:   plan("p", "p-id", "svc-id"),
			others: []osbv1alpha1.SFPlan{plan("q", "p-id", "svc-id", func(p *osbv1alpha1.SFPlan) { p.DeletionTimestamp = &metav1.Time{} })},
		},
		"SchemaNotJSONSchema": {
			reason:  "A schema must compile.",
			plan:    plan("p", "p-id", "svc-id", withSchema(`{"$schema":"http://json-schema.org/draft-04/schema#","type":12}`)),
			want:    ReasonInvalidSchema,
			message: "service_binding.create",
		},
		"SchemaWithoutVersion": {
			reason:  "OSB requires $schema.",
			plan:    plan("p", "p-id", "svc-id", withSchema(`{"type":"object"}`)),
			want:    ReasonInvalidSchema,
			message: "$schema",
		},
		"SchemaExternalRef": {
			reason:  "OSB forbids external references; nothing is fetched.",
			plan:    plan("p", "p-id", "svc-id", withSchema(`{"$schema":"http://json-schema.org/draft-06/schema#","$ref":"https://example.com/s.json"}`)),
			want:    ReasonInvalidSchema,
			message: "must not reference other documents",
		},
		"SchemaTooLarge": {
			reason: "OSB limits schemas to 64 kB.",
			plan: plan("p", "p-id", "svc-id", withSchema(`{"$schema":"http://json-schema.org/draft-06/schema#","description":"`+
				strings.Repeat("x", MaxSchemaBytes)+`"}`)),
			want: ReasonInvalidSchema,
		},
		"SchemaDraft04": {
			reason: "Draft-04 schemas, which platforms must support, compile without fetching the meta-schema.",
			plan:   plan("p", "p-id", "svc-id", withSchema(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"string"}}}`)),
		},
		"TemplateDoesNotParse": {
			reason:  "Inline gotemplates must parse.",
			plan:    plan("p", "p-id", "svc-id", withTemplate(osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionStatus, Type: osbv1alpha1.TypeGoTemplate, Content: "{{ if }}"})),
			want:    ReasonInvalidTemplate,
			message: "spec.templates[1] (status)",
		},
		"UnknownFunction": {
			reason: "A function that does not exist is a parse error.",
			plan:   plan("p", "p-id", "svc-id", withTemplate(osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionBind, Type: osbv1alpha1.TypeGoTemplate, Content: "{{ nosuchfunc }}"})),
			want:   ReasonInvalidTemplate,
		},
		"ConstantLoopBomb": {
			reason:  "A loop over a constant that repeats a trillion times is refused, naming the loop (issue #32).",
			plan:    plan("p", "p-id", "svc-id", withTemplate(osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionBind, Type: osbv1alpha1.TypeGoTemplate, Content: "{{- range 1000000000000 }}{{- end }}"})),
			want:    ReasonInvalidTemplate,
			message: "spec.templates[1] (bind): template: bind:1:10: range 1000000000000 repeats its body 1000000000000 times",
		},
		"ContentEncodedDoesNotParse": {
			reason: "contentEncoded is decoded and parsed too.",
			plan: plan("p", "p-id", "svc-id", withTemplate(osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionBind, Type: osbv1alpha1.TypeGoTemplate,
				ContentEncoded: base64.StdEncoding.EncodeToString([]byte("{{ end }}"))})),
			want: ReasonInvalidTemplate,
		},
		"NoProvisionTemplate": {
			reason: "A plan needs a provision template.",
			plan: plan("p", "p-id", "svc-id", func(p *osbv1alpha1.SFPlan) {
				p.Spec.Templates = []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionBind, Type: osbv1alpha1.TypeGoTemplate, Content: "x"}}
			}),
			want:    ReasonInvalidTemplate,
			message: "no provision template",
		},
		"HelmURLNotFetched": {
			reason: "Templates named by url are not fetched to validate them.",
			plan: plan("p", "p-id", "svc-id", func(p *osbv1alpha1.SFPlan) {
				p.Spec.Templates = []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeHelm, URL: "https://charts.invalid/c.tgz", Content: "{{ .instance.metadata.name }}"}}
			}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plans := append([]osbv1alpha1.SFPlan{tc.plan}, tc.others...)
			got := ValidatePlan(&tc.plan, services, plans)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("%s\nValidatePlan() = %+v, want valid", tc.reason, got)
			case tc.want != "" && (got == nil || got.Reason != tc.want):
				t.Errorf("%s\nValidatePlan() = %+v, want reason %s", tc.reason, got, tc.want)
			case got != nil && !strings.Contains(got.Message, tc.message):
				t.Errorf("%s\nmessage %q does not mention %q", tc.reason, got.Message, tc.message)
			}
		})
	}
}

func TestValidateService(t *testing.T) {
	tests := map[string]struct {
		reason   string
		services []osbv1alpha1.SFService
		want     Reason
	}{
		"Unique":    {reason: "Distinct ids are valid.", services: []osbv1alpha1.SFService{service("a", "a-id"), service("b", "b-id")}},
		"Duplicate": {reason: "Service ids are unique.", services: []osbv1alpha1.SFService{service("a", "a-id"), service("b", "a-id")}, want: ReasonDuplicateID},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ValidateService(&tc.services[0], tc.services)
			if (got == nil) != (tc.want == "") || (got != nil && got.Reason != tc.want) {
				t.Errorf("%s\nValidateService() = %+v, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestSpecHash(t *testing.T) {
	a := plan("p", "p-id", "svc-id")
	b := plan("p", "p-id", "svc-id")
	if SpecHash(&a) != SpecHash(&b) || SpecHash(&a) == "" {
		t.Errorf("equal specs hash to %q and %q, want one non-empty hash", SpecHash(&a), SpecHash(&b))
	}
	b.Spec.Templates[0].Content += " "
	if SpecHash(&a) == SpecHash(&b) {
		t.Error("a changed template does not change the hash")
	}
	b = plan("p", "p-id", "svc-id")
	b.Status.SpecHash = "x"
	b.Labels = map[string]string{"a": "b"}
	if SpecHash(&a) != SpecHash(&b) {
		t.Error("status and metadata change the hash; only the spec may")
	}
}
