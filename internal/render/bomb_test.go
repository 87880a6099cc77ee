package render

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/proctest"
)

// The bombs' render limit: short, so that the tests are quick.
const bombTimeout = 200 * time.Millisecond

// Quiet means: less than maxIdleCPU of CPU time (the process and its
// children) in the idleWindow after the failure.
const (
	idleWindow = time.Second
	maxIdleCPU = 200 * time.Millisecond
)

// nestedTree returns {"x": {"x": ... {}}} with depth levels: data on which a
// template that calls itself twice per level makes 2^depth calls.
func nestedTree(depth int) string {
	return strings.Repeat(`{"x": `, depth) + "{}" + strings.Repeat("}", depth)
}

// bombChart packages a chart whose one template is bomb, with values.
func bombChart(t *testing.T, name, bomb, values string) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: "0.1.0"},
		Raw:       []*chart.File{{Name: chartutil.ValuesfileName, Data: []byte(values)}},
		Templates: []*chart.File{{Name: "templates/bomb.yaml", Data: []byte(bomb)}},
	}
	if values != "" {
		v, err := chartutil.ReadValues([]byte(values))
		if err != nil {
			t.Fatal(err)
		}
		ch.Values = v
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// serveCharts serves archives by path.
func serveCharts(t *testing.T, archives map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := archives[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBombsStop renders the CPU and memory bombs of issue #32, as plan
// templates (gotemplate) and as Helm charts: a loop over a huge integer, a
// template that calls itself twice per level of the data, and huge values
// built with until and repeat. Each must fail with a clear error within its
// limit, and then really stop: the goroutines go back to what they were and
// the process, with its children, is idle in the second after the failure.
// Before the guard in every loop and template, and before Helm renders ran
// in worker processes that are killed, the renders went on spinning (or
// allocating) after their failure.
func TestBombsStop(t *testing.T) {
	tree := nestedTree(40)
	charts := map[string][]byte{
		"/ok.tgz":        bombChart(t, "ok", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n", ""),
		"/range.tgz":     bombChart(t, "range", "{{- range 1000000000000 }}{{- end }}", ""),
		"/recursion.tgz": bombChart(t, "recursion", `{{- define "a" }}{{ with .x }}{{ include "a" . }}{{ include "a" . }}{{ end }}{{ end }}{{- include "a" .Values.tree }}`, "tree: "+tree+"\n"),
		"/until.tgz":     bombChart(t, "until", `{{- range $i := until 1000000 }}{{ $x := until 10000000 }}{{ end }}`, ""),
		"/repeat.tgz":    bombChart(t, "repeat", `{{- $x := repeat 1500000000 "x" }}`, ""),
	}
	srv := serveCharts(t, charts)
	helm := func(path string) osbv1alpha1.TemplateSpec { return helmTemplate(srv.URL+path, "") }

	cases := map[string]struct {
		reason   string
		template osbv1alpha1.TemplateSpec
		params   string
		limits   Limits
		wantIs   error
		want     string
	}{
		"GotemplateIntegerRange": {
			reason:   "A tenant's parameter sets the count of a range over an integer: no function call, no output.",
			template: gotemplate(osbv1alpha1.ActionProvision, `{{- range .instance.spec.parameters.n }}{{- end }}`),
			params:   `{"n": 1000000000000}`,
			wantIs:   ErrTimeLimit,
			want:     "provision template (gotemplate from content): execute: template exceeded its time limit (200ms)",
		},
		"GotemplateRecursion": {
			reason:   "A template calls itself twice per level of a tenant's nested parameter: 2^40 calls, none of a function.",
			template: gotemplate(osbv1alpha1.ActionProvision, `{{- define "a" }}{{ with .x }}{{ template "a" . }}{{ template "a" . }}{{ end }}{{ end }}{{- template "a" .instance.spec.parameters.tree }}`),
			params:   `{"tree": ` + tree + `}`,
			wantIs:   ErrTimeLimit,
			want:     "execute: template exceeded its time limit (200ms)",
		},
		"GotemplateHugeUntil": {
			reason:   "until is refused before it allocates (this held before issue #32).",
			template: gotemplate(osbv1alpha1.ActionProvision, `{{- $x := until 1000000000 }}`),
			wantIs:   ErrSizeLimit,
			want:     "until would produce about 8000000000 bytes",
		},
		"GotemplateRepeatLoop": {
			reason:   "Each repeat is admitted, but together they exhaust the work budget (this held before issue #32).",
			template: gotemplate(osbv1alpha1.ActionProvision, `{{- range .instance.spec.parameters.n }}{{ $x := repeat 1000000 "x" }}{{ end }}`),
			params:   `{"n": 1000000}`,
			limits:   Limits{Timeout: time.Minute},
			wantIs:   ErrSizeLimit,
			want:     "repeat would produce about 1000000 bytes: template exceeded its size limit",
		},
		"HelmIntegerRange": {
			reason:   "Helm's engine has no guard: its worker process is killed.",
			template: helm("/range.tgz"),
			wantIs:   ErrTimeLimit,
			want:     "provision template (helm from " + srv.URL + "/range.tgz): execute: template exceeded its time limit (200ms)",
		},
		"HelmRecursion": {
			reason:   "include is Helm's own function: 2^40 calls, each within Helm's depth limit.",
			template: helm("/recursion.tgz"),
			wantIs:   ErrTimeLimit,
			want:     "execute: template exceeded its time limit (200ms)",
		},
		"HelmUntilLoop": {
			reason:   "Helm's until allocates 80 MB per iteration, a million times.",
			template: helm("/until.tgz"),
			wantIs:   ErrTimeLimit,
			want:     "execute: template exceeded its time limit (200ms)",
		},
		"HelmHugeRepeat": {
			reason:   "Helm's repeat builds a 1.5 GB string: the worker is killed at its memory ceiling, long before the time limit.",
			template: helm("/repeat.tgz"),
			limits:   Limits{Timeout: time.Minute, MaxHelmMemoryBytes: 256 << 20},
			wantIs:   ErrSizeLimit,
			want:     "execute: the chart's render used more than 256 MiB of memory",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			limits := tc.limits
			if limits.Timeout == 0 {
				limits.Timeout = bombTimeout
			}
			r := New(WithLimits(limits))
			ctx := context.Background()
			inst := testInstance()
			if tc.params != "" {
				inst.Spec.Parameters = raw(tc.params)
			}
			vals, err := Values(testService(), testPlan(), inst, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n, _, _ := unstructured.NestedFieldNoCopy(vals, VarInstance, "spec", "parameters", "n"); tc.params != "" && n != nil {
				if _, ok := n.(int64); !ok {
					t.Fatalf("parameter n is a %T, want int64: the bomb would not loop", n)
				}
			}
			// A harmless render first: the Helm worker is started (and
			// counted in the baseline), and the chart server's connection
			// is open.
			if _, err := r.RenderObjects(ctx, Input{Template: helm("/ok.tgz"), Values: vals}); err != nil {
				t.Fatal(err)
			}
			baseline := runtime.NumGoroutine()

			start := time.Now()
			_, err = r.RenderObjects(ctx, Input{Template: tc.template, Values: vals})
			failed := proctest.Now(t, proctest.ProcessTree)
			took := time.Since(start)
			if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s\nerror = %v\nwant one that wraps %v and contains %q", tc.reason, err, tc.wantIs, tc.want)
			}
			if IsTransient(err) {
				t.Errorf("error %v must not be transient: the plan must change", err)
			}
			if limit := limits.Timeout + 5*time.Second; took > limit {
				t.Errorf("the render failed after %s; the limit is %s", took, limits.Timeout)
			}

			cpu := proctest.CPUInWindow(t, failed, idleWindow)
			if cpu > maxIdleCPU {
				t.Errorf("%s\nthe process and its children used %s of CPU in the %s after the failure, want less than %s: the bomb goes on",
					tc.reason, cpu, idleWindow, maxIdleCPU)
			}
			proctest.WaitGoroutines(t, baseline, 10*time.Second)
			t.Logf("failed after %s; CPU in the %s after: %s; goroutines %d, %d before",
				took.Round(time.Millisecond), idleWindow, cpu.Round(time.Millisecond), runtime.NumGoroutine(), baseline)
		})
	}
}

// TestConstantLoopsRefused checks that loops over constants that would
// repeat their body more than MaxConstantIterations times do not parse,
// with an error that names the loop, and that loops within the bound do.
func TestConstantLoopsRefused(t *testing.T) {
	cases := map[string]struct {
		content string
		want    string // empty: the template parses
	}{
		"IntegerRange": {
			content: "{{- range 1000000000000 }}{{- end }}",
			want:    "template: provision:1:10: range 1000000000000 repeats its body 1000000000000 times; loops over constants may repeat a body at most 100000 times",
		},
		"IntegerRangeWithVariable": {
			content: "{{ range $i := 200000 }}{{ $i }}{{ end }}",
			want:    "range $i := 200000 repeats its body 200000 times",
		},
		"Until": {
			content: "{{ range until 1000001 }}x{{ end }}",
			want:    "range until 1000001 repeats its body 1000001 times",
		},
		"UntilStep": {
			content: "{{ range (untilStep 0 10000000 2) }}x{{ end }}",
			want:    "range (untilStep 0 10000000 2) repeats its body 5000000 times",
		},
		"Nested": {
			content: "apiVersion: v1\n{{ range 1000 }}{{ if true }}{{ range until 1000 }}x{{ end }}{{ end }}{{ end }}",
			want:    "template: provision:2:9: range 1000 and the loops over constants inside it repeat their innermost body 1000000 times",
		},
		"NestedThroughTemplates": {
			content: `{{ define "inner" }}{{ range 1000 }}x{{ end }}{{ end }}{{ define "outer" }}{{ range 1000 }}{{ template "inner" }}{{ end }}{{ end }}{{ template "outer" }}`,
			want:    "range 1000 and the loops over constants inside it repeat their innermost body 1000000 times",
		},
		"WithinTheBound": {
			content: "{{ range 100 }}{{ range until 1000 }}x{{ end }}{{ end }}{{ range $i, $e := until 100000 }}{{ end }}",
		},
		"Recursive": {
			content: `{{ define "a" }}{{ range 10 }}{{ template "a" }}{{ end }}{{ end }}`,
		},
		"OverVariables": {
			content: "{{ $n := 1000000000000 }}{{ range $n }}{{ end }}{{ range until .n }}{{ end }}",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Check("provision", tc.content)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v, want none", err)
				}
				return
			}
			if !errors.Is(err, ErrConstantLoop) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v\nwant ErrConstantLoop containing %q", err, tc.want)
			}
			_, err = New().RenderObjects(context.Background(), Input{Template: gotemplate(osbv1alpha1.ActionProvision, tc.content), Values: provisionValues(t)})
			var re *Error
			if !errors.As(err, &re) || re.Stage != StageParse || !errors.Is(err, ErrConstantLoop) {
				t.Errorf("render error = %v, want a parse error that wraps ErrConstantLoop", err)
			}
		})
	}
}

// TestFunctionBombsRefused renders templates whose single function calls
// would crash the process, allocate far beyond the limits, or run for
// hours, whatever the time limit: a value that contains itself (printing it
// recursed until the stack overflowed, a fatal error no recover catches),
// values built from shared parts that print exponentially large, values
// nested thousands of levels deep, printf padding, regular expression
// replacements that multiply their input, and uniq's pairwise comparisons.
// Each is refused by the guard before (or, for what a value contains, as
// soon as) the function returns.
func TestFunctionBombsRefused(t *testing.T) {
	cases := map[string]struct {
		content string
		wantIs  error
		want    string
	}{
		"SetSelf": {
			content: `{{ $d := dict }}{{ $_ := set $d "self" $d }}{{ $d }}`,
			wantIs:  ErrSizeLimit,
			want:    "set: the value nests deeper than 1000 levels, or contains itself",
		},
		"MergeCycle": {
			content: `{{ $d := dict "a" 1 }}{{ $_ := merge $d (dict "b" (list $d)) }}{{ toJson $d }}`,
			wantIs:  ErrSizeLimit,
			want:    "error calling merge:",
		},
		"SharedParts": {
			content: `{{ $d := dict }}{{ range until 40 }}{{ $d = dict "a" $d "b" $d }}{{ end }}{{ toJson $d | len }}`,
			wantIs:  ErrSizeLimit,
			want:    "dict produced",
		},
		"DeepNesting": {
			content: `{{ $x := list }}{{ range until 2000 }}{{ $x = list $x }}{{ end }}{{ toJson $x | len }}`,
			wantIs:  ErrSizeLimit,
			want:    "list: the value nests deeper than 1000 levels",
		},
		"PrintfPadding": {
			content: `{{ printf "%1000000d%1000000d%1000000d%1000000d%*d" 1 2 3 4 1000000 5 }}`,
			wantIs:  ErrSizeLimit,
			want:    "printf would produce about 5000039 bytes",
		},
		"RegexReplaceMultiplies": {
			content: `{{ regexReplaceAll "" (repeat 1000 "x") (repeat 10000 "y") | len }}`,
			wantIs:  ErrSizeLimit,
			want:    "regexReplaceAll would produce about 10011000 bytes",
		},
		"UniqQuadratic": {
			content: `{{ uniq (until 500000) | len }}`,
			wantIs:  ErrTimeLimit,
			want:    "uniq would compare about 125000000000 pairs of elements",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := New().RenderString(context.Background(), Input{Template: gotemplate(osbv1alpha1.ActionClusterSelector, tc.content), Values: provisionValues(t)})
			if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant one that wraps %v and contains %q", err, tc.wantIs, tc.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("refused after %s", took)
			}
			t.Log(err)
		})
	}
	// What stays allowed: values built from shared parts as far as they
	// print small, printf with ordinary widths, uniq of a short list.
	for _, ok := range []string{
		`{{ $d := dict "a" 1 }}{{ $l := list $d $d $d }}{{ $_ := set $d "b" (list 1 2) }}{{ toJson $l }}`,
		`{{ printf "%-10s|%5.2f|%*d" "a" 3.14159 4 7 }}`,
		`{{ uniq (list 1 2 2 3) | toJson }}`,
		`{{ regexReplaceAll "[^a-z0-9]+" "Hello World 42" "-" | lower }}`,
	} {
		if _, err := New().RenderString(context.Background(), Input{Template: gotemplate(osbv1alpha1.ActionClusterSelector, ok), Values: provisionValues(t)}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
