package render

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestParseSourcesAsServiceFabrik(t *testing.T) {
	pg := map[string]any{"apiVersion": "acid.zalan.do/v1", "kind": "postgresql", "name": "pg-1"}
	cases := map[string]struct {
		reason   string
		rendered map[string]any
		want     map[string]osbv1alpha1.Source
		wantErr  string
	}{
		"Complete": {
			reason:   "An entry with apiVersion, kind, name and namespace is a source.",
			rendered: map[string]any{"postgresql": map[string]any{"apiVersion": "acid.zalan.do/v1", "kind": "postgresql", "name": "pg-1", "namespace": "ns"}},
			want:     map[string]osbv1alpha1.Source{"postgresql": {APIVersion: "acid.zalan.do/v1", Kind: "postgresql", Name: "pg-1", Namespace: "ns"}},
		},
		"EmptyName": {
			reason: "Service Fabrik looks up only entries with a name: its director sample names the binding's object, which has no name at provision.",
			rendered: map[string]any{
				"director":     map[string]any{"apiVersion": "deployment.servicefabrik.io/v1alpha1", "kind": "Director", "name": "i-1", "namespace": "default"},
				"directorbind": map[string]any{"apiVersion": "bind.servicefabrik.io/v1alpha1", "kind": "DirectorBind", "name": "", "namespace": "default"},
			},
			want: map[string]osbv1alpha1.Source{"director": {APIVersion: "deployment.servicefabrik.io/v1alpha1", Kind: "Director", Name: "i-1", Namespace: "default"}},
		},
		"NoName": {
			reason:   "A missing name is an empty one.",
			rendered: map[string]any{"secret": map[string]any{"apiVersion": "v1", "kind": "Secret"}},
			want:     map[string]osbv1alpha1.Source{},
		},
		"NoKind": {
			reason:   "Service Fabrik's look-up of an entry without kind fails, and it ignores the failure: the source stays unset.",
			rendered: map[string]any{"secret": map[string]any{"apiVersion": "v1", "name": "s"}, "postgresql": pg},
			want:     map[string]osbv1alpha1.Source{"postgresql": {APIVersion: "acid.zalan.do/v1", Kind: "postgresql", Name: "pg-1"}},
		},
		"NoAPIVersion": {
			reason:   "The same for an entry without apiVersion.",
			rendered: map[string]any{"secret": map[string]any{"kind": "Secret", "name": "s"}},
			want:     map[string]osbv1alpha1.Source{},
		},
		"EmptyEntry": {
			reason:   "An entry without fields decodes to an empty reference in Service Fabrik, which it skips.",
			rendered: map[string]any{"nothing": nil, "postgresql": pg},
			want:     map[string]osbv1alpha1.Source{"postgresql": {APIVersion: "acid.zalan.do/v1", Kind: "postgresql", Name: "pg-1"}},
		},
		"VariableName": {
			reason:   "A source may be named like a variable: Service Fabrik's postgres sample names a Service \"service\".",
			rendered: map[string]any{"service": map[string]any{"apiVersion": "v1", "kind": "Service", "name": "pg-1"}},
			want:     map[string]osbv1alpha1.Source{"service": {APIVersion: "v1", Kind: "Service", Name: "pg-1"}},
		},
		"NotAMapping": {
			reason:   "An entry that is not a mapping does not decode in Service Fabrik either.",
			rendered: map[string]any{"secret": "s"},
			wantErr:  `source "secret" is not a mapping`,
		},
		"NotAString": {
			reason:   "A field that is not a string does not decode in Service Fabrik either.",
			rendered: map[string]any{"secret": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": int64(5)}},
			wantErr:  `source "secret": name is not a string`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSources(tc.rendered)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nParseSources(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParseSources(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParseSources(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWithSources(t *testing.T) {
	k8sService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "pg-1", "managedFields": []any{map[string]any{"manager": "x"}}},
	}}
	cases := map[string]struct {
		reason  string
		sources map[string]*unstructured.Unstructured
		// want is the kind of .service and whether .postgresql is set.
		wantServiceKind string
		wantPostgresql  bool
	}{
		"VariableReplaced": {
			reason:          "A source named like a variable replaces it when the object exists, as in Service Fabrik, where the sources go into the same map after the variables.",
			sources:         map[string]*unstructured.Unstructured{"service": k8sService},
			wantServiceKind: "Service",
		},
		"VariableKept": {
			reason:          "When the object does not exist the variable keeps its value.",
			sources:         map[string]*unstructured.Unstructured{"service": nil},
			wantServiceKind: "SFService",
		},
		"Added": {
			reason:          "Other sources are added by their names.",
			sources:         map[string]*unstructured.Unstructured{"postgresql": {Object: map[string]any{"kind": "postgresql"}}},
			wantServiceKind: "SFService",
			wantPostgresql:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vals := provisionValues(t)
			got := WithSources(vals, tc.sources)
			if kind, _, _ := unstructured.NestedString(got, VarService, "kind"); kind != tc.wantServiceKind {
				t.Errorf("%s\n.service.kind = %q, want %q", tc.reason, kind, tc.wantServiceKind)
			}
			if _, ok := got["postgresql"]; ok != tc.wantPostgresql {
				t.Errorf("%s\n.postgresql set = %v, want %v", tc.reason, ok, tc.wantPostgresql)
			}
			if kind, _, _ := unstructured.NestedString(vals, VarService, "kind"); kind != "SFService" {
				t.Errorf("WithSources changed its input: .service.kind = %q", kind)
			}
			if md, ok := got[VarService].(map[string]any)["metadata"].(map[string]any); ok && md["managedFields"] != nil {
				t.Errorf("managedFields of a source reach the template")
			}
		})
	}
}

// pgBind is a bind template written the way Service Fabrik's
// zalando-postgres plan's is: it reads the postgresql object from the
// sources, adds the binding's user with get/set and renders the spec with
// toYaml.
const pgBind = `{{- $name := "" }}
{{- with .instance.metadata.name }}{{ $name = . }}{{ end }}
{{- $user := "" }}
{{- with .binding.metadata.name }}{{ $user = printf "u%s" (trunc 8 .) }}{{ end }}
{{- $spec := "" }}
{{- with .postgresql }}{{ $spec = .spec }}{{ end }}
{{- $users := get $spec "users" }}
{{- $_ := set $users $user (list "login") }}
apiVersion: acid.zalan.do/v1
kind: postgresql
metadata:
  name: pg-{{ $name }}
spec:
{{ toYaml $spec | indent 2 }}`

func TestBindTemplateReadsSources(t *testing.T) {
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "acid.zalan.do/v1", "kind": "postgresql",
		"metadata": map[string]any{"name": "pg-" + testInstanceName},
		"spec":     map[string]any{"teamId": "sf", "users": map[string]any{"admin": []any{"superuser"}}},
	}}
	r := New()
	in := Input{Template: gotemplate(osbv1alpha1.ActionBind, pgBind), Values: WithSources(bindValues(t), map[string]*unstructured.Unstructured{"postgresql": pg})}
	objs, err := r.RenderObjects(context.Background(), in)
	if err != nil {
		t.Fatalf("With the postgresql source, the bind template must render: %v", err)
	}
	if len(objs) != 1 {
		t.Fatalf("rendered %d objects, want 1", len(objs))
	}
	users, _, _ := unstructured.NestedMap(objs[0].Object, "spec", "users")
	want := map[string]any{"admin": []any{"superuser"}, "u" + testBindingName[:8]: []any{"login"}}
	if diff := cmp.Diff(want, users); diff != "" {
		t.Errorf("the bind template adds the binding's user to the source's users: -want, +got:\n%s", diff)
	}
	if got, _, _ := unstructured.NestedMap(pg.Object, "spec", "users"); len(got) != 1 {
		t.Errorf("the render changed the source object itself: users %v", got)
	}

	// Without the source, the template fails as it does in Service Fabrik:
	// the error this test guards against when sources are not passed.
	in.Values = bindValues(t)
	if _, err := r.RenderObjects(context.Background(), in); err == nil || !strings.Contains(err.Error(), "wrong type") {
		t.Errorf("without the source the bind template must fail with a wrong type error, got %v", err)
	}
}
