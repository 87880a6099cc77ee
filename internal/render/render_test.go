package render

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render/source"
)

// seed05Provision is the provision template of the SFPlan example in seed 05,
// verbatim, including its indentation slip: "name:" is not indented under
// "metadata:".
const seed05Provision = `{{- $name := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
apiVersion: kubedb.com/v1alpha1
kind: Postgres
metadata:
name: kdb-{{ $name }}-pg
spec:
  version: 10.2-v1
  storageType: Durable
  storage:
    storageClassName: default
    accessModes:
    - ReadWriteOnce
    resources:
      requests:
        storage: 50Mi
  terminationPolicy: WipeOut`

func TestSeed05Provision(t *testing.T) {
	spec := map[string]any{
		"version":     "10.2-v1",
		"storageType": "Durable",
		"storage": map[string]any{
			"storageClassName": "default",
			"accessModes":      []any{"ReadWriteOnce"},
			"resources":        map[string]any{"requests": map[string]any{"storage": "50Mi"}},
		},
		"terminationPolicy": "WipeOut",
	}
	cases := map[string]struct {
		reason  string
		content string
		want    map[string]any
	}{
		"Verbatim": {
			reason:  "The seed's template renders name at the top level and an empty metadata: that is what Service Fabrik produced from it too.",
			content: seed05Provision,
			want: map[string]any{
				"apiVersion": "kubedb.com/v1alpha1", "kind": "Postgres",
				"metadata": nil, "name": "kdb-" + testInstanceName + "-pg", "spec": spec,
			},
		},
		"IndentationFixed": {
			reason:  "With name indented under metadata the Postgres is named after the instance.",
			content: strings.Replace(seed05Provision, "\nname:", "\n  name:", 1),
			want: map[string]any{
				"apiVersion": "kubedb.com/v1alpha1", "kind": "Postgres",
				"metadata": map[string]any{"name": "kdb-" + testInstanceName + "-pg"}, "spec": spec,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := New().RenderObjects(context.Background(), Input{
				Template: gotemplate(osbv1alpha1.ActionProvision, tc.content),
				Values:   provisionValues(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 1 {
				t.Fatalf("%s\nrendered %d objects, want 1", tc.reason, len(objs))
			}
			if diff := cmp.Diff(tc.want, objs[0].Object); diff != "" {
				t.Errorf("%s\nobject (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRenderObjects(t *testing.T) {
	cases := map[string]struct {
		reason  string
		content string
		want    []map[string]any
	}{
		"MultiDocument": {
			reason: "Several YAML documents render several objects, in order; empty and comment-only documents are skipped.",
			content: `---
# leading comment document
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .instance.metadata.namespace }}
---

---
{{- range $i := until 2 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm-{{ $i }}
  namespace: {{ $.instance.metadata.namespace }}
data:
  x: {{ $.plan.spec.context.x | quote }}
{{- end }}
--- # trailing
`,
			want: []map[string]any{
				{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": testNamespace}},
				{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm-0", "namespace": testNamespace}, "data": map[string]any{"x": "from-plan"}},
				{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm-1", "namespace": testNamespace}, "data": map[string]any{"x": "from-plan"}},
			},
		},
		"PlanContextAndSprig": {
			reason: ".plan.spec.context is reachable, numbers stay integers, and Sprig's upper, default, dict and toJson work.",
			content: `apiVersion: example.org/v1
kind: Thing
metadata:
  name: {{ .instance.spec.organizationGuid | upper }}
spec:
  replicas: {{ .plan.spec.context.replicas }}
  image: {{ .plan.spec.context.operator.image }}
  tier: {{ .plan.spec.context.tier | default "standard" }}
  labels: {{ dict "plan" .plan.spec.id "service" .service.spec.name | toJson }}
  params: {{ .instance.spec.parameters | toJson }}`,
			want: []map[string]any{{
				"apiVersion": "example.org/v1", "kind": "Thing",
				"metadata": map[string]any{"name": "ORG-GUID"},
				"spec": map[string]any{
					"replicas": int64(3), "image": "blueprint", "tier": "standard",
					"labels": map[string]any{"plan": "plan-id", "service": "postgresql"},
					"params": map[string]any{"foo": "bar"},
				},
			}},
		},
		"EmptyBind": {
			reason:  `Service Fabrik's documented "no resources" bind template renders nothing.`,
			content: "---",
			want:    []map[string]any{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := New().RenderObjects(context.Background(), Input{
				Template: gotemplate(osbv1alpha1.ActionProvision, tc.content),
				Values:   provisionValues(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]map[string]any, 0, len(objs))
			for _, o := range objs {
				got = append(got, o.Object)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nobjects (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFunctions(t *testing.T) {
	cases := map[string]struct {
		content string
		want    string
		wantErr string
	}{
		"b64enc":              {content: `{{ b64enc "user:pass" }}`, want: "dXNlcjpwYXNz"},
		"b64dec":              {content: `{{ b64dec "dXNlcjpwYXNz" }}`, want: "user:pass"},
		"b64decFails":         {content: `{{ b64dec "%%%" }}`, wantErr: "b64dec: illegal base64"},
		"unmarshalJSON":       {content: `{{ (unmarshalJSON "{\"a\":{\"b\":1}}").a.b }}`, want: "1"},
		"unmarshalJSONFails":  {content: `{{ unmarshalJSON "not json" }}`, wantErr: "unmarshalJSON: input is not a JSON object"},
		"marshalJSON":         {content: `{{ marshalJSON (dict "a" 1 "b" (list "x")) }}`, want: `{"a":1,"b":["x"]}`},
		"marshalJSONFails":    {content: `{{ marshalJSON (dict "f" (list 1.5 (float64 "NaN"))) }}`, wantErr: "marshalJSON: json: unsupported value: NaN"},
		"toToml":              {content: `{{ toToml (dict "name" "pg" "port" 5432) }}`, want: "name = \"pg\"\nport = 5432"},
		"toTomlReturnsError":  {content: `{{ toToml (dict "a" (list nil)) }}`, want: "toml: cannot encode array with nil element"},
		"toYaml":              {content: `{{ toYaml (dict "b" (list 1 2) "a" "x") }}`, want: "a: x\nb:\n- 1\n- 2"},
		"toYamlObject":        {content: `{{ toYaml .instance.spec.parameters }}`, want: "foo: bar"},
		"fromYaml":            {content: `{{ (fromYaml "a:\n  b: c").a.b }}`, want: "c"},
		"fromYamlSwallows":    {content: `{{ (fromYaml "a: [").Error | contains "error converting YAML" }}`, want: "true"},
		"toJson":              {content: `{{ toJson (dict "a" (list 1 "two")) }}`, want: `{"a":[1,"two"]}`},
		"toJsonSwallows":      {content: `[{{ toJson (float64 "NaN") }}]`, want: "[]"},
		"fromJson":            {content: `{{ (fromJson "{\"a\":[1,2]}").a | len }}`, want: "2"},
		"fromJsonSwallows":    {content: `{{ (fromJson "nope").Error }}`, want: "invalid character 'o' in literal null (expecting 'u')"},
		"SprigUpper":          {content: `{{ upper "abc" }}`, want: "ABC"},
		"SprigDefault":        {content: `{{ .instance.spec.nothing | default "dflt" }}`, want: "dflt"},
		"SprigDictToJson":     {content: `{{ dict "k" "v" | toJson }}`, want: `{"k":"v"}`},
		"SprigAdler32":        {content: `{{ adler32sum .instance.metadata.name }}`, want: strings.TrimPrefix(ReleaseName(testInstanceName), "in-")},
		"SprigSha256":         {content: `{{ sha256sum "x" }}`, want: "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"},
		"EnvUndefined":        {content: `[{{ env "HOME" }}]`, wantErr: `function "env" not defined`},
		"ExpandenvUndefined":  {content: `[{{ expandenv "$HOME" }}]`, wantErr: `function "expandenv" not defined`},
		"GetHostByNameUndef":  {content: `{{ getHostByName "localhost" }}`, wantErr: `function "getHostByName" not defined`},
		"PrintfBuiltin":       {content: `{{ printf "%s-%d" "a" 1 }}`, want: "a-1"},
		"PlanContext":         {content: `{{ .plan.spec.context.x }}`, want: "from-plan"},
		"ClusterSelector":     {content: "\n  plan={{ .instance.spec.planId }}\n", want: "plan=plan-id"},
		"InstanceKindFilled":  {content: `{{ .instance.apiVersion }} {{ .instance.kind }}`, want: "osb.servicefabrik.io/v1alpha1 SFServiceInstance"},
		"ManagedFieldsDroped": {content: `{{ hasKey .instance.metadata "managedFields" }}`, want: "false"},
		"NoBinding":           {content: `{{ hasKey . "binding" }}`, want: "false"},
	}
	r := New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.RenderString(context.Background(), Input{
				Template: gotemplate(osbv1alpha1.ActionClusterSelector, tc.content),
				Values:   provisionValues(t),
			})
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("output = %q, want %q", got, tc.want)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
}

const sourcesTemplate = `{{- $name := .instance.metadata.name }}
{{- $namespace := .instance.metadata.namespace }}
postgresql:
  apiVersion: kubedb.com/v1alpha1
  kind: Postgres
  name: kdb-{{ $name }}-pg
  namespace: {{ $namespace }}
secret:
  apiVersion: v1
  kind: Secret
  name: kdb-{{ $name }}-auth
  namespace: {{ $namespace }}`

const statusTemplate = `{{- $state := "in progress" }}
{{- $desc := "waiting for postgres" }}
{{- with .postgresql }}{{ with .status }}{{ if eq .phase "Running" }}{{ $state = "succeeded" }}{{ $desc = "postgres is running" }}{{ end }}{{ end }}{{ end }}
{{- $pass := "" }}
{{- with .secret }}{{ $pass = b64dec .data.password }}{{ end }}
provision:
  state: {{ $state }}
  response: {{ $desc | quote }}
  dashboardUrl: https://dash.example.org/{{ .instance.metadata.name }}
  instanceUsable: true
bind:
  state: {{ if $pass }}succeeded{{ else }}in progress{{ end }}
  response: {{ dict "credentials" (dict "username" "postgres" "password" $pass) | mustToJson | squote }}
deprovision:
  state: {{ with .postgresql }}in progress{{ else }}succeeded{{ end }}`

func TestStatusWithSources(t *testing.T) {
	r := New()
	ctx := context.Background()
	rendered, err := r.RenderMap(ctx, Input{Template: gotemplate(osbv1alpha1.ActionSources, sourcesTemplate), Values: provisionValues(t)})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := ParseSources(rendered)
	if err != nil {
		t.Fatal(err)
	}
	wantRefs := map[string]osbv1alpha1.Source{
		"postgresql": {APIVersion: "kubedb.com/v1alpha1", Kind: "Postgres", Name: "kdb-" + testInstanceName + "-pg", Namespace: testNamespace},
		"secret":     {APIVersion: "v1", Kind: "Secret", Name: "kdb-" + testInstanceName + "-auth", Namespace: testNamespace},
	}
	if diff := cmp.Diff(wantRefs, refs); diff != "" {
		t.Fatalf("sources (-want +got):\n%s", diff)
	}

	postgres := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubedb.com/v1alpha1", "kind": "Postgres",
		"metadata": map[string]any{"name": refs["postgresql"].Name},
		"status":   map[string]any{"phase": "Running"},
	}}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": refs["secret"].Name},
		"data":     map[string]any{"password": base64.StdEncoding.EncodeToString([]byte("s3cr3t"))},
	}}

	cases := map[string]struct {
		reason  string
		sources map[string]*unstructured.Unstructured
		op      Operation
		want    Status
	}{
		"ProvisionSucceeded": {
			reason:  "A running Postgres source makes the provision section succeed.",
			sources: map[string]*unstructured.Unstructured{"postgresql": postgres, "secret": secret},
			op:      OperationProvision,
			want: Status{State: osbv1alpha1.StateSucceeded, Description: "postgres is running",
				DashboardURL: "https://dash.example.org/" + testInstanceName, InstanceUsable: "true"},
		},
		"SourcesMissing": {
			reason:  "Missing sources are unset; the template guards them with 'with' and still renders.",
			sources: map[string]*unstructured.Unstructured{"postgresql": nil},
			op:      OperationProvision,
			want: Status{State: osbv1alpha1.StateInProgress, Description: "waiting for postgres",
				DashboardURL: "https://dash.example.org/" + testInstanceName, InstanceUsable: "true"},
		},
		"BindResponse": {
			reason:  "The bind response is the JSON string of the OSB bind body, built from a source.",
			sources: map[string]*unstructured.Unstructured{"secret": secret},
			op:      OperationBind,
			want:    Status{State: osbv1alpha1.StateSucceeded, Response: []byte(`{"credentials":{"password":"s3cr3t","username":"postgres"}}`)},
		},
		"DeprovisionDone": {
			reason: "Deprovision succeeds once the source is gone.",
			op:     OperationDeprovision,
			want:   Status{State: osbv1alpha1.StateSucceeded},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := r.RenderMap(ctx, Input{
				Template: gotemplate(osbv1alpha1.ActionStatus, statusTemplate),
				Values:   WithSources(bindValues(t), tc.sources),
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStatus(out, tc.op)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatus (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	cases := map[string]struct {
		rendered string
		op       Operation
		want     Status
		wantErr  string
	}{
		"AllFields": {
			rendered: "provision:\n  state: failed\n  error: disk full\n  response: could not grow\n  dashboardUrl: https://d\n  instanceUsable: false\n  updateRepeatable: \"true\"",
			op:       OperationProvision,
			want:     Status{State: osbv1alpha1.StateFailed, Error: "disk full", Description: "could not grow", DashboardURL: "https://d", InstanceUsable: "false", UpdateRepeatable: "true"},
		},
		"DescriptionWhenNoResponse": {
			rendered: "provision:\n  state: in progress\n  description: creating",
			op:       OperationProvision,
			want:     Status{State: osbv1alpha1.StateInProgress, Description: "creating"},
		},
		"BindResponseMapping": {
			rendered: "bind:\n  state: succeeded\n  response:\n    credentials:\n      uri: pg://x",
			op:       OperationBind,
			want:     Status{State: osbv1alpha1.StateSucceeded, Response: []byte(`{"credentials":{"uri":"pg://x"}}`)},
		},
		"BindResponseNotJSON": {
			rendered: "bind:\n  state: succeeded\n  response: 'password=hunter2'",
			op:       OperationBind,
			wantErr:  "bind.response is not valid JSON",
		},
		"UnbindNoResponse": {
			rendered: "unbind:\n  state: succeeded",
			op:       OperationUnbind,
			want:     Status{State: osbv1alpha1.StateSucceeded},
		},
		"StateMissing": {
			rendered: "provision:\n  error: x",
			op:       OperationProvision,
			wantErr:  "provision.state is required",
		},
		"StateUnknown": {
			// A misspelt state is the mistake this case is about.
			rendered: "provision:\n  state: succeded", //nolint:misspell // the misspelling is the input under test
			op:       OperationProvision,
			wantErr:  `provision.state "succeded" is not one of`, //nolint:misspell // the misspelling is the input under test
		},
		"SectionMissing": {
			rendered: "provision:\n  state: succeeded",
			op:       OperationBind,
			wantErr:  "renders no bind section",
		},
		"SectionNotMapping": {
			rendered: "provision: succeeded",
			op:       OperationProvision,
			wantErr:  "provision section of the status template is not a mapping",
		},
		"FieldNotScalar": {
			rendered: "provision:\n  state: succeeded\n  error: [a]",
			op:       OperationProvision,
			wantErr:  "provision.error: not a string",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := decodeMap(tc.rendered)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStatus(m, tc.op)
			checkErr(t, err, tc.wantErr)
			if strings.Contains(fmt.Sprint(err), "hunter2") {
				t.Errorf("error %v quotes the response", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusDoesNotPrintResponse(t *testing.T) {
	s := Status{State: osbv1alpha1.StateSucceeded, Response: []byte(`{"credentials":{"password":"hunter2"}}`)}
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), fmt.Sprintf("%+v", s.MarshalLog())} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("printed status shows the response: %s", out)
		}
	}
}

func TestParseSources(t *testing.T) {
	cases := map[string]struct {
		rendered string
		wantErr  string
	}{
		"ClusterScoped":    {rendered: "ns:\n  apiVersion: v1\n  kind: Namespace\n  name: x"},
		"NoName":           {rendered: "pg:\n  apiVersion: v1\n  kind: Secret"}, // skipped, as in Service Fabrik (TestParseSourcesAsServiceFabrik)
		"NotMapping":       {rendered: "pg: secret/x", wantErr: `source "pg" is not a mapping`},
		"ReservedName":     {rendered: "instance:\n  apiVersion: v1\n  kind: Secret\n  name: x"}, // replaces .instance when found, as in Service Fabrik
		"NameNotString":    {rendered: "pg:\n  apiVersion: v1\n  kind: Secret\n  name: [x]", wantErr: `source "pg": name is not a string`},
		"EmptyIsNoSources": {rendered: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := decodeMap(tc.rendered)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParseSources(m)
			checkErr(t, err, tc.wantErr)
		})
	}
}

func TestTemplateSources(t *testing.T) {
	const tpl = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .instance.metadata.name }}\n"
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/provision.yaml":
			_, _ = w.Write([]byte(tpl))
		case "/huge.yaml":
			_, _ = w.Write([]byte(tpl + "# " + strings.Repeat("x", 2000) + "\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "provision.yaml"), []byte(tpl), 0o600); err != nil {
		t.Fatal(err)
	}
	configMaps := source.ConfigMapGetterFunc(func(_ context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		if namespace == "interoperator" && name == "templates" {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"provision.yaml": tpl}}, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	})
	r := New(
		WithFetcher(source.New(source.WithFileRoots(dir), source.WithConfigMapGetter(configMaps))),
		WithLimits(Limits{MaxTemplateBytes: 1024}),
	)

	spec := func(mod func(*osbv1alpha1.TemplateSpec)) osbv1alpha1.TemplateSpec {
		s := osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate}
		mod(&s)
		return s
	}
	cases := map[string]struct {
		spec          osbv1alpha1.TemplateSpec
		wantErr       string
		wantTransient bool
	}{
		"ContentWins": {spec: spec(func(s *osbv1alpha1.TemplateSpec) {
			s.Content, s.ContentEncoded, s.URL = tpl, "!!!", srv.URL+"/missing"
		})},
		"ContentEncoded": {spec: spec(func(s *osbv1alpha1.TemplateSpec) {
			s.ContentEncoded = base64.StdEncoding.EncodeToString([]byte(tpl))
		})},
		"ContentEncodedWrapped": {spec: spec(func(s *osbv1alpha1.TemplateSpec) {
			e := base64.StdEncoding.EncodeToString([]byte(tpl))
			s.ContentEncoded = e[:20] + "\n  " + e[20:]
		})},
		"ContentEncodedInvalid": {
			spec:    spec(func(s *osbv1alpha1.TemplateSpec) { s.ContentEncoded = "not base64 at all!" }),
			wantErr: "provision template (gotemplate from contentEncoded): source: not valid base64",
		},
		"URL":  {spec: spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = srv.URL + "/provision.yaml" })},
		"File": {spec: spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = "file://" + filepath.Join(dir, "provision.yaml") })},
		"FileOutsideRoots": {
			spec:    spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = "file:///etc/hostname" }),
			wantErr: "provision template (gotemplate from file:///etc/hostname): source:",
		},
		"ConfigMap": {spec: spec(func(s *osbv1alpha1.TemplateSpec) {
			s.URL = "configmap://interoperator/templates/provision.yaml"
		})},
		"ConfigMapMissing": {
			spec:    spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = "configmap://interoperator/nope/provision.yaml" }),
			wantErr: "ConfigMap interoperator/nope not found",
		},
		"URLNotFound": {
			spec:    spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = srv.URL + "/missing?token=abc" }),
			wantErr: "provision template (gotemplate from " + srv.URL + "/missing): source: HTTP 404",
		},
		"URLTooLarge": {
			spec:    spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = srv.URL + "/huge.yaml" }),
			wantErr: "larger than the size limit of 1024 bytes",
		},
		"URLUnreachable": {
			spec:          spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = "http://127.0.0.1:1/x.yaml" }),
			wantErr:       "connection refused",
			wantTransient: true,
		},
		"NoText": {
			spec:    spec(func(*osbv1alpha1.TemplateSpec) {}),
			wantErr: "the template has no text: set content, contentEncoded or url",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := r.RenderObjects(context.Background(), Input{Template: tc.spec, Values: provisionValues(t)})
			checkErr(t, err, tc.wantErr)
			if IsTransient(err) != tc.wantTransient {
				t.Errorf("IsTransient(%v) = %v, want %v", err, IsTransient(err), tc.wantTransient)
			}
			if err == nil && (len(objs) != 1 || objs[0].GetName() != testInstanceName) {
				t.Errorf("want one ConfigMap named %s, got %v", testInstanceName, objs)
			}
			if err != nil && strings.Contains(err.Error(), "abc") {
				t.Errorf("error %v shows the url's query", err)
			}
		})
	}

	t.Run("URLCached", func(t *testing.T) {
		before := hits.Load()
		s := spec(func(s *osbv1alpha1.TemplateSpec) { s.URL = srv.URL + "/provision.yaml" })
		for range 3 {
			if _, err := r.RenderObjects(context.Background(), Input{Template: s, Values: provisionValues(t)}); err != nil {
				t.Fatal(err)
			}
		}
		// The URL case above already fetched it once with the same Fetcher.
		if n := hits.Load() - before; n != 0 {
			t.Errorf("server saw %d more requests for a cached url, want 0", n)
		}
	})
}

func TestRenderErrors(t *testing.T) {
	cases := map[string]struct {
		reason  string
		limits  Limits
		action  osbv1alpha1.TemplateAction
		content string
		want    string
		wantIs  error
	}{
		"Unparsable": {
			content: "kind: {{ .instance.metadata.name ",
			want:    "provision template (gotemplate from content): parse: template: provision:1: unclosed action",
		},
		"UnknownFunction": {
			content: "kind: {{ frobnicate 1 }}",
			want:    `provision template (gotemplate from content): parse: template: provision:1: function "frobnicate" not defined`,
		},
		"Fail": {
			action:  osbv1alpha1.ActionBind,
			content: "{{ fail \"boom\" }}",
			want:    "bind template (gotemplate from content): execute: template: bind:1:3: executing \"bind\" at <fail \"boom\">: error calling fail: boom",
		},
		"FieldOfString": {
			content: "{{ .instance.metadata.name.first }}",
			want:    "execute: template: provision:1:12: executing \"provision\" at <.instance.metadata.name.first>: can't evaluate field first in type interface {}",
		},
		"PanicInFunction": {
			reason:  "randInt 5 5 panics in math/rand; the panic becomes an error.",
			content: "{{ randInt 5 5 }}",
			want:    "error calling randInt: invalid argument to Intn",
		},
		"NoKind": {
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}",
			want:    "provision template (gotemplate from content): decode: document 2 (v1) has no kind",
		},
		"NoAPIVersion": {
			content: "kind: ConfigMap",
			want:    "decode: document 1 has no apiVersion",
		},
		"NotAMapping": {
			content: "- a\n- b",
			want:    "decode: document 1 is not a mapping but a []interface {}",
		},
		"InvalidYAML": {
			content: "apiVersion: v1\nkind: [",
			want:    "decode: document 1: yaml: line 2: did not find expected node content",
		},
		"HugeOutput": {
			limits:  Limits{MaxOutputBytes: 1 << 10},
			content: "kind: {{ repeat 2000 \"x\" }}",
			want:    "execute:",
			wantIs:  ErrSizeLimit,
		},
		"EndlessOutput": {
			reason:  "A loop that writes output stops at the output limit.",
			content: "{{ $n := 1000 }}{{ range $i := until $n }}{{ range $j := until $n }}line {{ $i }} {{ $j }}\n{{ end }}{{ end }}",
			want:    "output is larger than 4194304 bytes",
			wantIs:  ErrSizeLimit,
		},
		"HugeList": {
			reason:  "until is refused before it allocates its list.",
			content: "{{ $l := until 100000000 }}",
			want:    "until would produce about 800000000 bytes",
			wantIs:  ErrSizeLimit,
		},
		"GrowingString": {
			reason:  "A string doubled in a loop exhausts the work budget.",
			content: "{{ $s := \"xx\" }}{{ range until 64 }}{{ $s = cat $s $s }}{{ end }}",
			wantIs:  ErrSizeLimit,
			want:    "cat produced",
		},
		"EndlessLoop": {
			reason:  "A loop that only calls functions stops at the time limit.",
			limits:  Limits{Timeout: 100 * time.Millisecond},
			content: "{{ $n := 100000 }}{{ range until $n }}{{ range until $n }}{{ $x := upper \"a\" }}{{ end }}{{ end }}",
			want:    "provision template (gotemplate from content): execute: template exceeded its time limit (100ms)",
			wantIs:  ErrTimeLimit,
		},
		"EndlessRecursion": {
			reason: "A template that includes itself stops at text/template's depth limit.",
			// The depth limit, not the timeout, must stop it: 100,000 calls
			// took 3.7 s at load average 14.
			limits:  Limits{Timeout: 2 * time.Minute},
			content: `{{ define "again" }}{{ template "again" . }}{{ end }}{{ template "again" . }}`,
			want:    "exceeded maximum template depth (100000)",
		},
		"RenderMapNotMapping": {
			action:  osbv1alpha1.ActionStatus,
			content: "just text",
			want:    "status template (gotemplate from content): decode: the output is not a mapping but a string",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			action := tc.action
			if action == "" {
				action = osbv1alpha1.ActionProvision
			}
			r := New(WithLimits(tc.limits))
			in := Input{Template: gotemplate(action, tc.content), Values: provisionValues(t)}
			var err error
			start := time.Now()
			if action == osbv1alpha1.ActionStatus {
				_, err = r.RenderMap(context.Background(), in)
			} else {
				_, err = r.RenderObjects(context.Background(), in)
			}
			// No render outlives its timeout (plus the time a loaded
			// machine takes to schedule the return).
			timeout := tc.limits.Timeout
			if timeout <= 0 {
				timeout = DefaultTimeout
			}
			if elapsed := time.Since(start); elapsed > timeout+30*time.Second {
				t.Errorf("render took %s, its timeout is %s", elapsed, timeout)
			}
			checkErr(t, err, tc.want)
			var re *Error
			if !errors.As(err, &re) || re.Action != action {
				t.Errorf("%s\nerror %v is not a *render.Error for action %s", tc.reason, err, action)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("%s\nerror %v does not wrap %v", tc.reason, err, tc.wantIs)
			}
			if IsTransient(err) {
				t.Errorf("error %v must not be transient", err)
			}
		})
	}
}

func TestRenderAbandonsEndlessTemplate(t *testing.T) {
	// A billion calls of a function whose result costs nothing against the
	// work budget: only the time limit can end it early.
	const endless = "{{ $l := until 1000 }}{{ range $l }}{{ range $l }}{{ range $l }}{{ $x := add 1 1 }}{{ end }}{{ end }}{{ end }}"
	r := New(WithLimits(Limits{Timeout: 50 * time.Millisecond}))
	in := Input{Template: gotemplate(osbv1alpha1.ActionProvision, endless), Values: provisionValues(t)}
	baseline := runtime.NumGoroutine()

	if _, err := r.RenderObjects(context.Background(), in); !errors.Is(err, ErrTimeLimit) {
		t.Fatalf("error = %v, want ErrTimeLimit", err)
	}
	if got := r.Stats().Abandoned; got != 1 {
		t.Errorf("Abandoned = %d, want 1", got)
	}

	// The abandoned execution stops at its next function call: its
	// goroutine goes away although the loop has billions of steps left.
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return runtime.NumGoroutine() <= baseline, nil })
	if err != nil {
		t.Errorf("the abandoned execution is still running: %d goroutines, %d before", runtime.NumGoroutine(), baseline)
	}

	// Its stopped clone is never handed to a later render.
	p, err := r.parse(in.Template, originContent, endless)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.g.check(); err != nil {
		t.Errorf("the pool handed out the abandoned clone, stopped with %v", err)
	}
}

func TestRenderHonoursCallerContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New().RenderObjects(ctx, Input{
		Template: gotemplate(osbv1alpha1.ActionProvision, "{{ $n := 100000 }}{{ range until $n }}{{ range until $n }}{{ $x := upper \"a\" }}{{ end }}{{ end }}"),
		Values:   provisionValues(t),
	})
	if !errors.Is(err, context.Canceled) || !IsTransient(err) {
		t.Fatalf("error = %v, want a transient context.Canceled", err)
	}
}

func TestParseCache(t *testing.T) {
	r := New()
	ctx := context.Background()
	render := func(content string) {
		t.Helper()
		if _, err := r.RenderString(ctx, Input{Template: gotemplate(osbv1alpha1.ActionClusterSelector, content), Values: provisionValues(t)}); err != nil {
			t.Fatal(err)
		}
	}
	render("plan={{ .instance.spec.planId }}")
	render("plan={{ .instance.spec.planId }}")
	if got := r.Stats().TemplateParses; got != 1 {
		t.Errorf("parses after rendering one text twice = %d, want 1", got)
	}
	render("plan={{ .plan.spec.id }}")
	if got := r.Stats().TemplateParses; got != 2 {
		t.Errorf("parses after a second text = %d, want 2", got)
	}

	// Concurrent renders of one cached template share it safely (run with
	// -race) and each sees its own variables.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := provisionValues(t)
			if err := unstructured.SetNestedField(v, fmt.Sprint(i), VarInstance, "spec", "planId"); err != nil {
				errs <- err
				return
			}
			out, err := r.RenderString(ctx, Input{Template: gotemplate(osbv1alpha1.ActionClusterSelector, "plan={{ .instance.spec.planId }}"), Values: v})
			if err == nil && out != fmt.Sprintf("plan=%d", i) {
				err = fmt.Errorf("render %d got %q", i, out)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := r.Stats().TemplateParses; got != 2 {
		t.Errorf("parses after concurrent renders of a cached text = %d, want 2", got)
	}
}

func TestRenderDoesNotChangeValues(t *testing.T) {
	// Service Fabrik's bind templates edit a source with set/unset and print
	// it; the caller's variables must stay as they were.
	vals := WithSources(bindValues(t), map[string]*unstructured.Unstructured{
		"postgresql": {Object: map[string]any{"apiVersion": "kubedb.com/v1alpha1", "kind": "Postgres",
			"metadata": map[string]any{"name": "pg"}, "spec": map[string]any{"users": map[string]any{}}}},
	})
	const bind = `{{- $users := .postgresql.spec.users }}
{{- $_ := set $users .binding.metadata.name (list "superuser") }}
{{ toYaml .postgresql }}`
	objs, err := New().RenderObjects(context.Background(), Input{Template: gotemplate(osbv1alpha1.ActionBind, bind), Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	users, _, _ := unstructured.NestedMap(objs[0].Object, "spec", "users")
	if diff := cmp.Diff(map[string]any{testBindingName: []any{"superuser"}}, users); diff != "" {
		t.Errorf("rendered users (-want +got):\n%s", diff)
	}
	if users, _, _ := unstructured.NestedMap(vals, "postgresql", "spec", "users"); len(users) != 0 {
		t.Errorf("the render changed the caller's variables: %v", users)
	}
}

func TestValues(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "u"}}}
	vals, err := Values(nil, testPlan(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := vals[VarService]; ok {
		t.Error("a nil service must leave .service unset")
	}
	if err := unstructured.SetNestedField(vals, "changed", VarInstance, "metadata", "name"); err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "u" {
		t.Error("Values must copy an unstructured object, not share it")
	}
	want := map[string]any{"x": "from-plan", "size": "10Gi", "replicas": int64(3), "operator": map[string]any{"image": "blueprint"}}
	got, _, _ := unstructured.NestedMap(vals, VarPlan, "spec", "context")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf(".plan.spec.context (-want +got):\n%s", diff)
	}
}

func TestWrongTypeForAction(t *testing.T) {
	_, err := New().RenderMap(context.Background(), Input{
		Template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionStatus, Type: osbv1alpha1.TypeHelm, URL: "http://x/c.tgz"},
	})
	checkErr(t, err, "status template (helm): source: a helm template cannot render status output")
}

// typicalProvision is a one-object provision template with a few Sprig
// calls, as plans usually have.
const typicalProvision = `{{- $name := printf "pg-%s" (.instance.metadata.name | trunc 40) }}
apiVersion: kubedb.com/v1alpha1
kind: Postgres
metadata:
  name: {{ $name }}
  namespace: {{ .instance.metadata.namespace }}
  labels:
    plan: {{ .plan.spec.id | quote }}
    org: {{ .instance.spec.organizationGuid | upper | quote }}
spec:
  version: {{ .plan.spec.context.version | default "16.2" | quote }}
  replicas: {{ .plan.spec.context.replicas | default 1 }}
  storage:
    resources:
      requests:
        storage: {{ .plan.spec.context.size | default "1Gi" }}
  parameters: {{ .instance.spec.parameters | toJson }}
`

func BenchmarkRenderTypical(b *testing.B) {
	r := New()
	in := Input{Template: gotemplate(osbv1alpha1.ActionProvision, typicalProvision), Values: provisionValues(b)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		objs, err := r.RenderObjects(ctx, in)
		if err != nil || len(objs) != 1 {
			b.Fatalf("%v %d", err, len(objs))
		}
	}
}

// BenchmarkRenderLoop renders a template whose loop runs 1,000 times over
// a tenant's list: what a guard on every loop iteration costs.
func BenchmarkRenderLoop(b *testing.B) {
	const loop = `apiVersion: v1
kind: ConfigMap
metadata:
  name: loop
data:
  items: "{{ range $i, $e := .instance.spec.parameters.items }}{{ $i }}={{ $e }},{{ end }}"
`
	inst := testInstance()
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprint("item-", i))
	}
	inst.Spec.Parameters = raw(`{"items":[` + strings.Join(items, ",") + `]}`)
	vals, err := Values(testService(), testPlan(), inst, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := New()
	in := Input{Template: gotemplate(osbv1alpha1.ActionProvision, loop), Values: vals}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if objs, err := r.RenderObjects(ctx, in); err != nil || len(objs) != 1 {
			b.Fatalf("%v %d", err, len(objs))
		}
	}
}
