package render

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// fuzzLimits keep one fuzzed render small and short, so that the fuzzer
// explores inputs rather than waits on loops the guard stops.
var fuzzLimits = Limits{Timeout: 2 * time.Second, MaxOutputBytes: 64 << 10, MaxWorkBytes: 256 << 10, MaxTemplateBytes: 64 << 10}

// FuzzRender renders fuzzed gotemplates (what a plan author writes) with
// fuzzed parameters (what a tenant sends, decoded from JSON as the broker
// does) through the three ways a template is rendered: objects (provision,
// bind), a map (sources, status) and a string (clusterSelector). Whatever
// the input, a render must not panic, must end within its timeout (with a
// margin), and must fail only with a *render.Error; the objects it returns
// have a kind and an apiVersion, and no output exceeds the output limit.
//
// go test ./internal/render -run '^$' -fuzz FuzzRender -fuzztime 60s
func FuzzRender(f *testing.F) {
	seeds := []struct{ template, params string }{
		{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .instance.metadata.name }}\ndata:\n  size: {{ .instance.spec.parameters.size | quote }}\n", `{"size":"2Gi"}`},
		{"{{ range $i, $e := until 5 }}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{{ $i }}\n{{ end }}", `{}`},
		{"{{ $p := .instance.spec.parameters }}{{ toYaml $p }}", `{"a":[1,2,{"b":null}],"c":"x"}`},
		{"provision:\n  state: {{ if .gate }}succeeded{{ else }}in progress{{ end }}\n", `null`},
		{"{{ .instance.spec.parameters.n | int | mul 1000 | repeat 10 \"x\" }}", `{"n":99999999}`},
		{"plan={{ .instance.spec.planId }}", `{}`},
		{"{{ fromJson .instance.spec.parameters.raw | toJson }}", `{"raw":"{\"a\":"}`},
		{"{{ b64dec .instance.spec.parameters.s }}", `{"s":"%%%"}`},
		{"{{ template \"x\" }}{{ define \"x\" }}{{ template \"x\" }}{{ end }}", `{}`},
	}
	for _, s := range seeds {
		f.Add(s.template, []byte(s.params))
	}
	// The repository's own plans are seeds too.
	for _, path := range []string{"../../examples/catalog/plan-small.yaml", "../../examples/catalog/plan-helm.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		var plan osbv1alpha1.SFPlan
		if err := yaml.Unmarshal(data, &plan); err != nil {
			f.Fatalf("%s: %v", path, err)
		}
		for _, t := range plan.Spec.Templates {
			if t.Type == osbv1alpha1.TypeGoTemplate && t.Content != "" {
				f.Add(t.Content, []byte(`{"size":"1Gi"}`))
			}
		}
	}
	r := New(WithLimits(fuzzLimits))
	f.Fuzz(func(t *testing.T, content string, params []byte) {
		var p any
		if json.Unmarshal(params, &p) != nil {
			p = string(params)
		}
		vals := map[string]any{
			VarInstance: map[string]any{
				"metadata": map[string]any{"name": "inst", "namespace": "ns"},
				"spec":     map[string]any{"planId": "plan", "parameters": p},
			},
			VarPlan:    map[string]any{"spec": map[string]any{"id": "plan", "context": map[string]any{}}},
			VarService: map[string]any{"spec": map[string]any{"id": "svc"}},
		}
		in := Input{Template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: content}, Values: vals, Namespace: "ns"}
		ctx := context.Background()
		check := func(what string, start time.Time, err error) {
			t.Helper()
			if took := time.Since(start); took > fuzzLimits.Timeout+5*time.Second {
				t.Fatalf("%s took %s; the limit is %s", what, took, fuzzLimits.Timeout)
			}
			var rerr *Error
			if err != nil && !errors.As(err, &rerr) {
				t.Fatalf("%s failed with %T %v, want a *render.Error", what, err, err)
			}
		}
		start := time.Now()
		objs, err := r.RenderObjects(ctx, in)
		check("RenderObjects", start, err)
		for _, o := range objs {
			if o.GetKind() == "" || o.GetAPIVersion() == "" {
				t.Fatalf("RenderObjects returned an object without kind or apiVersion: %v", o.Object)
			}
		}
		start = time.Now()
		_, err = r.RenderMap(ctx, in)
		check("RenderMap", start, err)
		start = time.Now()
		s, err := r.RenderString(ctx, in)
		check("RenderString", start, err)
		if int64(len(s)) > fuzzLimits.MaxOutputBytes {
			t.Fatalf("RenderString returned %d bytes; the limit is %d", len(s), fuzzLimits.MaxOutputBytes)
		}
	})
}
