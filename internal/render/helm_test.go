package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// testChart packages a small chart: two templated resources that use a
// helper from _helpers.tpl, a NOTES.txt, a test hook, a CRD in crds/, and a
// subchart enabled by the value child.enabled.
func testChart(t testing.TB) []byte {
	t.Helper()
	file := func(name, data string) *chart.File { return &chart.File{Name: name, Data: []byte(data)} }
	child := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "child", Version: "0.1.0"},
		Templates: []*chart.File{file("templates/secret.yaml", `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-child
stringData:
  from: {{ .Values.from | default "child-default" }}
`)},
	}
	const values = "replicas: 1\nmessage: default\nchild:\n  enabled: false\n"
	parent := &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion: chart.APIVersionV2, Name: "demo", Version: "0.1.0",
			Dependencies: []*chart.Dependency{{Name: "child", Version: "0.1.0", Condition: "child.enabled"}},
		},
		Raw: []*chart.File{file(chartutil.ValuesfileName, values)},
		Templates: []*chart.File{
			file("templates/_helpers.tpl", `{{- define "demo.fullname" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}`),
			// Named so that file order and Helm's install order differ.
			file("templates/a-deployment.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "demo.fullname" . }}
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.replicas }}
`),
			file("templates/z-configmap.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "demo.fullname" . }}
data:
  message: {{ required "message is required" .Values.message | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
`),
			file("templates/NOTES.txt", "Thank you for installing {{ .Chart.Name }}."),
			file("templates/tests/test-connection.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: {{ include "demo.fullname" . }}-test
  annotations:
    helm.sh/hook: test
spec:
  containers: []
`),
			file("templates/disabled.yaml", "{{- if .Values.never }}\napiVersion: v1\nkind: Never\n{{- end }}\n"),
		},
		Files: []*chart.File{file("crds/widgets.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.org
`)},
	}
	parent.AddDependency(child)
	path, err := chartutil.Save(parent, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type chartServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newChartServer(t *testing.T) *chartServer {
	t.Helper()
	archive := testChart(t)
	s := &chartServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch r.URL.Path {
		case "/demo-0.1.0.tgz":
			_, _ = w.Write(archive)
		case "/not-a-chart.tgz":
			_, _ = w.Write([]byte("this is not gzip"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func helmTemplate(url, content string) osbv1alpha1.TemplateSpec {
	return osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeHelm, URL: url, Content: content}
}

// kindsAndNames lists "Kind/name" of objects, in order.
func kindsAndNames(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestRenderHelm(t *testing.T) {
	srv := newChartServer(t)
	r := New()
	release := ReleaseName(testInstanceName)
	const values = `message: {{ .instance.metadata.name }}
child:
  enabled: {{ .instance.spec.parameters.child | default false }}
  from: {{ .plan.spec.context.x }}`

	render := func(t *testing.T, params string) []*unstructured.Unstructured {
		t.Helper()
		inst := testInstance()
		inst.Spec.Parameters = raw(params)
		vals, err := Values(testService(), testPlan(), inst, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := r.RenderObjects(context.Background(), Input{Template: helmTemplate(srv.URL+"/demo-0.1.0.tgz", values), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}

	t.Run("ValuesOverrideDefaults", func(t *testing.T) {
		objs := render(t, `{}`)
		want := []string{
			"CustomResourceDefinition/widgets.example.org", // crds/ first
			"ConfigMap/" + release + "-demo",               // then Helm's install order
			"Deployment/" + release + "-demo",
		}
		if diff := cmp.Diff(want, kindsAndNames(objs)); diff != "" {
			t.Fatalf("objects (-want +got); NOTES.txt and the test hook must be left out:\n%s", diff)
		}
		cm, deploy := objs[1], objs[2]
		if diff := cmp.Diff(map[string]any{"message": testInstanceName, "kube": DefaultKubeVersion}, cm.Object["data"]); diff != "" {
			t.Errorf("ConfigMap data (-want +got): values from the template's content must override the chart's:\n%s", diff)
		}
		if replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas"); replicas != 1 {
			t.Errorf("replicas = %d, want the chart default 1", replicas)
		}
		if deploy.GetNamespace() != testNamespace {
			t.Errorf(".Release.Namespace = %q, want the instance's namespace %q", deploy.GetNamespace(), testNamespace)
		}
		if cm.GetNamespace() != "" {
			t.Errorf("the ConfigMap template sets no namespace, but it has %q", cm.GetNamespace())
		}
	})

	t.Run("SubchartPerRender", func(t *testing.T) {
		// The cached chart must not remember what an earlier render enabled.
		if got := kindsAndNames(render(t, `{"child": true}`)); !contains(got, "Secret/"+release+"-child") {
			t.Errorf("child.enabled=true: objects %v lack the subchart's Secret", got)
		}
		if got := kindsAndNames(render(t, `{"child": false}`)); contains(got, "Secret/"+release+"-child") {
			t.Errorf("child.enabled=false: objects %v hold the subchart's Secret", got)
		}
		objs := render(t, `{"child": true}`)
		for _, o := range objs {
			if o.GetKind() == "Secret" {
				if from, _, _ := unstructured.NestedString(o.Object, "stringData", "from"); from != "from-plan" {
					t.Errorf("subchart value from = %q, want from-plan", from)
				}
			}
		}
	})

	t.Run("Cached", func(t *testing.T) {
		if got := r.Stats().ChartLoads; got != 1 {
			t.Errorf("chart loads = %d after several renders of one archive, want 1", got)
		}
		if got := srv.hits.Load(); got != 1 {
			t.Errorf("chart server saw %d requests, want 1 (the url cache)", got)
		}
	})
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

func TestReleaseName(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want string
	}{
		"Instance": {in: Input{Values: provisionValues(t)}, want: ReleaseName(testInstanceName)},
		"Binding":  {in: Input{Values: bindValues(t)}, want: ReleaseName(testBindingName)},
		"Explicit": {in: Input{Values: bindValues(t), ReleaseID: "other"}, want: ReleaseName("other")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReleaseName(releaseID(tc.in)); got != tc.want {
				t.Errorf("release name = %q, want %q", got, tc.want)
			}
		})
	}
	// The rule Service Fabrik documents for templates.
	out, err := New().RenderString(context.Background(), Input{
		Template: gotemplate(osbv1alpha1.ActionClusterSelector, `{{ printf "in-%s" (adler32sum .instance.metadata.name) }}`),
		Values:   provisionValues(t),
	})
	if err != nil || out != ReleaseName(testInstanceName) {
		t.Errorf("template computes %q (%v), ReleaseName gives %q", out, err, ReleaseName(testInstanceName))
	}
	if got := ReleaseName("a"); got != "in-6422626" { // adler32("a") = 0x00620062
		t.Errorf("ReleaseName(a) = %q, want in-6422626", got)
	}
}

func TestRenderHelmErrors(t *testing.T) {
	srv := newChartServer(t)
	chartURL := srv.URL + "/demo-0.1.0.tgz"
	cases := map[string]struct {
		limits   Limits
		template osbv1alpha1.TemplateSpec
		want     string
	}{
		"NoURL": {
			template: helmTemplate("", "a: b"),
			want:     "provision template (helm): source: a helm template needs url",
		},
		"ChartNotFound": {
			template: helmTemplate(srv.URL+"/missing.tgz", ""),
			want:     "provision template (helm from " + srv.URL + "/missing.tgz): source: HTTP 404",
		},
		"NotAnArchive": {
			template: helmTemplate(srv.URL+"/not-a-chart.tgz", ""),
			want:     "provision template (helm from " + srv.URL + "/not-a-chart.tgz): parse: load chart:",
		},
		"ChartTooLarge": {
			limits:   Limits{MaxChartBytes: 100},
			template: helmTemplate(chartURL, ""),
			want:     "larger than the size limit of 100 bytes",
		},
		"ValuesTemplateFails": {
			template: helmTemplate(chartURL, `message: {{ fail "no message" }}`),
			want:     "provision template (helm from content): execute: values: template: provision:1:12: executing \"provision\" at <fail \"no message\">: error calling fail: no message",
		},
		"ValuesNotMapping": {
			template: helmTemplate(chartURL, `- a`),
			want:     "provision template (helm from content): decode: values are not a YAML mapping",
		},
		"ChartTemplateFails": {
			template: helmTemplate(chartURL, `message: ""`),
			want:     "provision template (helm from " + chartURL + "): execute: execution error at (demo/templates/z-configmap.yaml:6:14): message is required",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(WithLimits(tc.limits)).RenderObjects(context.Background(), Input{Template: tc.template, Values: provisionValues(t)})
			checkErr(t, err, tc.want)
			if IsTransient(err) {
				t.Errorf("error %v must not be transient", err)
			}
		})
	}
}

func TestRenderHelmValuesOnlyContentEncoded(t *testing.T) {
	srv := newChartServer(t)
	tpl := helmTemplate(srv.URL+"/demo-0.1.0.tgz", "")
	tpl.ContentEncoded = "bWVzc2FnZTogZW5jb2RlZA==" // "message: encoded"
	objs, err := New().RenderObjects(context.Background(), Input{Template: tpl, Values: provisionValues(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			if msg, _, _ := unstructured.NestedString(o.Object, "data", "message"); msg != "encoded" {
				t.Errorf("message = %q, want the value from contentEncoded", msg)
			}
			return
		}
	}
	t.Errorf("no ConfigMap in %v", kindsAndNames(objs))
}

// BenchmarkRenderHelm renders the test chart with a values template, as a
// helm plan's provision does: the chart cached, its render in a warm
// worker process.
func BenchmarkRenderHelm(b *testing.B) {
	archive := testChart(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	r := New()
	in := Input{Template: helmTemplate(srv.URL+"/demo-0.1.0.tgz", "message: {{ .instance.metadata.name }}"), Values: provisionValues(b)}
	ctx := context.Background()
	if _, err := r.RenderObjects(ctx, in); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		objs, err := r.RenderObjects(ctx, in)
		if err != nil || len(objs) != 3 {
			b.Fatalf("%v %d", err, len(objs))
		}
	}
}
