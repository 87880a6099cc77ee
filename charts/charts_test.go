package charts_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/charts"
)

// valueSet is one way to install the chart. Each gets its own release,
// namespace, inter-operator name and catalog namespace, so that all of them
// can be applied to one API server.
type valueSet struct {
	name    string
	release string
	values  map[string]any
	// check looks at the render for what the values must have changed.
	check func(t *testing.T, objs []*unstructured.Unstructured)
}

func (v valueSet) namespace() string { return v.release + "-system" }

// render renders the value set with its release and namespace.
func (v valueSet) render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := charts.Render(charts.WithExampleRegistry(v.values), charts.WithReleaseName(v.release), charts.WithNamespace(v.namespace()))
	if err != nil {
		t.Fatalf("render %s: %v", v.name, err)
	}
	return objs
}

// unique gives a value set's inter-operator a name and catalog namespace of
// its own (cluster-scoped ServiceProvider, ProviderConfig and namespace),
// and its marketplace a name of its own (a cluster-scoped PlatformService).
func unique(release string, values map[string]any) map[string]any {
	mp, _ := values["marketplace"].(map[string]any)
	if mp == nil {
		mp = map[string]any{}
		values["marketplace"] = mp
	}
	if _, ok := mp["name"]; !ok {
		mp["name"] = "mp-" + release
	}
	io, _ := values["interoperator"].(map[string]any)
	if io == nil {
		io = map[string]any{}
		values["interoperator"] = io
	}
	if _, ok := io["name"]; !ok {
		io["name"] = "io-" + release
	}
	if _, ok := io["catalogNamespace"]; !ok {
		io["catalogNamespace"] = "catalog-" + release
	}
	return values
}

// valueSets are the default values and the non-default sets the tests
// render, apply and check.
func valueSets() []valueSet {
	sets := []valueSet{
		{
			name: "defaults", release: "marketplane", values: map[string]any{},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				dep := mustFind(t, objs, "Deployment", "marketplane-operator")
				if got := nested[int64](t, dep, "spec", "replicas"); got != 2 {
					t.Errorf("operator replicas = %d, want 2", got)
				}
				args := containerArgs(t, dep, "operator")
				for _, want := range []string{"run", "--leader-elect", "--deployer=kubernetes", "--health-probe-bind-address=:8081"} {
					if !slices.Contains(args, want) {
						t.Errorf("operator args %v lack %q", args, want)
					}
				}
				if init := initContainerArgs(t, dep, "init"); len(init) == 0 || init[0] != "init" {
					t.Errorf("operator initContainer args = %v, want init first", init)
				}
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--onboarding-kubeconfig") }) {
					t.Errorf("operator args %v pass an onboarding kubeconfig by default", args)
				}
				mustFind(t, objs, "Secret", "marketplane-broker-credentials")
				mustFind(t, objs, "ServiceProvider", "io-marketplane")
				mustFind(t, objs, "PodDisruptionBudget", "marketplane-operator")
				mustFind(t, objs, "PodDisruptionBudget", "marketplane-broker")
				if n := count(objs, "NetworkPolicy"); n != 4 {
					t.Errorf("%d NetworkPolicies, want 4 (default deny, operator, broker, console)", n)
				}
				for _, kind := range []string{"Ingress", "ServiceMonitor"} {
					if n := count(objs, kind); n != 0 {
						t.Errorf("%d %s objects by default, want none", n, kind)
					}
				}
			},
		},
		{
			name: "ingress with TLS", release: "ingress",
			values: map[string]any{"broker": map[string]any{
				"tls": map[string]any{"secretName": "broker-serving"},
				"ingress": map[string]any{
					"enabled": true, "className": "nginx", "host": "broker.example.com",
					"annotations": map[string]any{"example.com/backend-protocol": "HTTPS"},
					"tls":         map[string]any{"enabled": true, "secretName": "broker-example-com"},
				},
			}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				ing := mustFind(t, objs, "Ingress", "ingress-broker")
				tls, _, _ := unstructured.NestedSlice(ing.Object, "spec", "tls")
				if len(tls) != 1 || tls[0].(map[string]any)["secretName"] != "broker-example-com" {
					t.Errorf("Ingress spec.tls = %v, want the host's Secret", tls)
				}
				args := containerArgs(t, mustFind(t, objs, "Deployment", "ingress-broker"), "broker")
				if !slices.Contains(args, "--tls-cert-file=/etc/marketplane/tls/tls.crt") {
					t.Errorf("broker args %v do not serve TLS", args)
				}
			},
		},
		{
			name: "code-based offerings", release: "code",
			values: map[string]any{"broker": map[string]any{"codeOfferings": map[string]any{
				"enabled": true, "accessNamespace": "code-broker-access",
				"kinds": []any{map[string]any{"apiGroup": "sample.services.openmcp.cloud", "resources": []any{"samples"}}},
			}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				args := containerArgs(t, mustFind(t, objs, "Deployment", "code-broker"), "broker")
				if !slices.Contains(args, "--code-offerings-namespace=code-broker-access") {
					t.Errorf("broker args %v do not serve code-based offerings", args)
				}
				mustFind(t, objs, "Namespace", "code-broker-access")
				role := mustFind(t, objs, "Role", "code-broker-access")
				if role.GetNamespace() != "code-broker-access" {
					t.Errorf("access Role in namespace %q, want the access namespace", role.GetNamespace())
				}
				cr := mustFind(t, objs, "ClusterRole", "code-broker")
				rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
				found := false
				for _, r := range rules {
					m := r.(map[string]any)
					if reflect.DeepEqual(m["apiGroups"], []any{"sample.services.openmcp.cloud"}) && reflect.DeepEqual(m["resources"], []any{"samples"}) &&
						reflect.DeepEqual(m["verbs"], []any{"get", "create", "update", "delete"}) {
						found = true
					}
				}
				if !found {
					t.Errorf("the broker's ClusterRole grants nothing on the listed kind: %v", rules)
				}
			},
		},
		{
			name: "existing broker Secret", release: "existing",
			values: map[string]any{"broker": map[string]any{"existingSecret": "my-broker-credentials"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if n := count(objs, "Secret"); n != 0 {
					t.Errorf("%d Secrets rendered with broker.existingSecret, want none", n)
				}
				args := containerArgs(t, mustFind(t, objs, "Deployment", "existing-broker"), "broker")
				if !slices.Contains(args, "--credentials-secret=existing-system/my-broker-credentials") {
					t.Errorf("broker args %v do not name the existing Secret", args)
				}
				role := mustFind(t, objs, "Role", "existing-broker-credentials")
				rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
				if names := rules[0].(map[string]any)["resourceNames"]; !reflect.DeepEqual(names, []any{"my-broker-credentials"}) {
					t.Errorf("credentials Role resourceNames = %v, want the existing Secret", names)
				}
			},
		},
		{
			name: "ServiceMonitor, alerts, dashboard", release: "monitored",
			values: map[string]any{
				"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prometheus"}},
				"metrics": map[string]any{
					"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
					"dashboard":      map[string]any{"enabled": true},
				},
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if n := count(objs, "ServiceMonitor"); n != 4 {
					t.Errorf("%d ServiceMonitors, want 4 (operator, broker, inter-operator, marketplace)", n)
				}
				rule := mustFind(t, objs, "PrometheusRule", "monitored")
				if got := rule.GetLabels()["release"]; got != "prometheus" {
					t.Errorf("PrometheusRule label release = %q, want prometheus", got)
				}
				dash := mustFind(t, objs, "ConfigMap", "monitored-dashboard")
				if got := dash.GetLabels()["grafana_dashboard"]; got != "1" {
					t.Errorf("dashboard ConfigMap label grafana_dashboard = %q, want 1", got)
				}
			},
		},
		{
			name: "no network policies, no broker PDB", release: "open",
			values: map[string]any{
				"networkPolicy": map[string]any{"enabled": false},
				"broker":        map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if n := count(objs, "NetworkPolicy"); n != 0 {
					t.Errorf("%d NetworkPolicies with networkPolicy.enabled=false, want none", n)
				}
				if n := count(objs, "PodDisruptionBudget"); n != 1 {
					t.Errorf("%d PodDisruptionBudgets, want only the operator's", n)
				}
			},
		},
		{
			name: "custom resources, replicas, pull secrets, registry", release: "custom",
			values: map[string]any{
				"global": map[string]any{
					"imageRegistry": "registry.example.com:5000", "imageTag": "v1.2.3",
					"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
				},
				"operator": map[string]any{
					"replicas":     3,
					"image":        map[string]any{"tag": "v1.2.4", "pullPolicy": "Always"},
					"resources":    map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}, "limits": map[string]any{"cpu": "2", "memory": "1Gi"}},
					"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
					"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}},
					"tenancy":      map[string]any{"workload": "Exclusive"},
				},
				"broker": map[string]any{"replicas": 4, "service": map[string]any{"type": "LoadBalancer"}},
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				dep := mustFind(t, objs, "Deployment", "custom-operator")
				if got := nested[int64](t, dep, "spec", "replicas"); got != 3 {
					t.Errorf("operator replicas = %d, want 3", got)
				}
				if got := nested[string](t, dep, "spec", "template", "spec", "containers", "0", "image"); got != "registry.example.com:5000/marketplane/marketplane-operator:v1.2.4" {
					t.Errorf("operator image = %q", got)
				}
				if got := nested[string](t, dep, "spec", "template", "spec", "containers", "0", "resources", "limits", "memory"); got != "1Gi" {
					t.Errorf("operator memory limit = %q, want 1Gi", got)
				}
				if got := nested[string](t, dep, "spec", "template", "spec", "imagePullSecrets", "0", "name"); got != "regcred" {
					t.Errorf("operator imagePullSecrets[0] = %q, want regcred", got)
				}
				if !slices.Contains(containerArgs(t, dep, "operator"), "--tenancy=workload=Exclusive") {
					t.Errorf("operator args lack the tenancy override")
				}
				broker := mustFind(t, objs, "Deployment", "custom-broker")
				if got := nested[string](t, broker, "spec", "template", "spec", "containers", "0", "image"); got != "registry.example.com:5000/marketplane/marketplane-broker:v1.2.3" {
					t.Errorf("broker image = %q", got)
				}
				sp := mustFind(t, objs, "ServiceProvider", "io-custom")
				if got := nested[string](t, sp, "spec", "image"); got != "registry.example.com:5000/marketplane/marketplane-interoperator:v1.2.3" {
					t.Errorf("ServiceProvider image = %q", got)
				}
				if got := nested[string](t, sp, "spec", "imagePullSecrets", "0", "name"); got != "regcred" {
					t.Errorf("ServiceProvider imagePullSecrets[0] = %q, want regcred", got)
				}
			},
		},
		{
			name: "onboarding kubeconfig Secret", release: "onboarding",
			values: map[string]any{"onboarding": map[string]any{"kubeconfigSecret": map[string]any{"name": "onboarding-kubeconfig", "key": "config"}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				dep := mustFind(t, objs, "Deployment", "onboarding-operator")
				want := "--onboarding-kubeconfig=/etc/marketplane/onboarding/config"
				if args := containerArgs(t, dep, "operator"); !slices.Contains(args, want) {
					t.Errorf("operator run args %v lack %s", args, want)
				}
				if args := initContainerArgs(t, dep, "init"); !slices.Contains(args, want) {
					t.Errorf("operator init args %v lack %s", args, want)
				}
				if got := nested[string](t, dep, "spec", "template", "spec", "volumes", "1", "secret", "secretName"); got != "onboarding-kubeconfig" {
					t.Errorf("operator volume 1 Secret = %q, want onboarding-kubeconfig", got)
				}
				if args := containerArgs(t, mustFind(t, objs, "Deployment", "onboarding-broker"), "broker"); !slices.Contains(args, want) {
					t.Errorf("broker args %v lack %s", args, want)
				}
				// The broker then gets no onboarding rights on the platform.
				cr := mustFind(t, objs, "ClusterRole", "onboarding-broker")
				if rules, _, _ := unstructured.NestedSlice(cr.Object, "rules"); len(rules) != 2 {
					t.Errorf("broker ClusterRole has %d rules with an onboarding kubeconfig, want 2 (metrics auth)", len(rules))
				}
			},
		},
		{
			name: "operator only", release: "bare",
			values: map[string]any{"broker": map[string]any{"enabled": false}, "interoperator": map[string]any{"enabled": false}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, kind := range []string{"ServiceProvider", "ProviderConfig", "Secret", "Ingress"} {
					if n := count(objs, kind); n != 0 {
						t.Errorf("%d %s objects with broker and inter-operator off, want none", n, kind)
					}
				}
				mustFind(t, objs, "Deployment", "bare-operator")
			},
		},
	}
	for i := range sets {
		sets[i].values = unique(sets[i].release, sets[i].values)
	}
	return sets
}

// TestRenderAndApply renders every value set, checks what its values change,
// and creates every object on a real API server.
func TestRenderAndApply(t *testing.T) {
	for _, vs := range valueSets() {
		t.Run(vs.name, func(t *testing.T) {
			objs := vs.render(t)
			vs.check(t, objs)
			apply(t, vs.namespace(), objs)
		})
	}
}

// TestRenderCRDsFirst checks that the render starts with every CRD of
// api/crds, in name order, and holds no other CRD.
func TestRenderCRDsFirst(t *testing.T) {
	objs, err := charts.Render(charts.WithExampleRegistry(nil))
	if err != nil {
		t.Fatal(err)
	}
	want, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for i, crd := range want {
		if i >= len(objs) || objs[i].GetKind() != "CustomResourceDefinition" || objs[i].GetName() != crd.Name {
			t.Fatalf("object %d is not the CRD %s", i, crd.Name)
		}
	}
	if n := count(objs, "CustomResourceDefinition"); n != len(want) {
		t.Errorf("%d CRDs rendered, want the %d of api/crds", n, len(want))
	}
}

// TestRenderDeterministic renders twice (with a fixed password: the generated
// one is random) and expects the same objects in the same order.
func TestRenderDeterministic(t *testing.T) {
	values := func() map[string]any {
		return map[string]any{"broker": map[string]any{"credentials": map[string]any{"username": "u", "password": "p"}}}
	}
	a, err := charts.Render(charts.WithExampleRegistry(values()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := charts.Render(charts.WithExampleRegistry(values()))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d objects, then %d", len(a), len(b))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i].Object, b[i].Object) {
			t.Errorf("object %d differs between renders: %s %s, then %s %s", i, a[i].GetKind(), a[i].GetName(), b[i].GetKind(), b[i].GetName())
		}
	}
}

// TestRenderOptions checks the defaults and the options of the release.
func TestRenderOptions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          []charts.RenderOption
		wantNamespace string
		wantOperator  string
	}{
		{name: "defaults", wantNamespace: "marketplane-system", wantOperator: "marketplane-operator"},
		{name: "options", opts: []charts.RenderOption{charts.WithReleaseName("mp"), charts.WithNamespace("platform")}, wantNamespace: "platform", wantOperator: "mp-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := charts.Render(charts.WithExampleRegistry(nil), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			dep := mustFind(t, objs, "Deployment", tc.wantOperator)
			if dep.GetNamespace() != tc.wantNamespace {
				t.Errorf("operator namespace = %q, want %q", dep.GetNamespace(), tc.wantNamespace)
			}
		})
	}
}

// TestSchemaRejectsBadValues checks that values.schema.json turns bad values
// away with a message that names the field.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{name: "replicas of the wrong type", values: map[string]any{"operator": map[string]any{"replicas": "two"}}, want: []string{"/operator/replicas", "want integer"}},
		{name: "negative replicas", values: map[string]any{"broker": map[string]any{"replicas": -1}}, want: []string{"/broker/replicas", "minimum"}},
		{name: "zero replicas", values: map[string]any{"operator": map[string]any{"replicas": 0}}, want: []string{"/operator/replicas", "minimum"}},
		{name: "unknown top-level key", values: map[string]any{"operater": map[string]any{}}, want: []string{"operater", "additional properties"}},
		{name: "unknown nested key", values: map[string]any{"broker": map[string]any{"ingress": map[string]any{"hostname": "x"}}}, want: []string{"/broker/ingress", "hostname"}},
		{name: "bad pull policy", values: map[string]any{"operator": map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}}, want: []string{"/operator/image/pullPolicy", "Always"}},
		{name: "port out of range", values: map[string]any{"broker": map[string]any{"port": 70000}}, want: []string{"/broker/port", "maximum"}},
		{name: "port of the wrong type", values: map[string]any{"operator": map[string]any{"metricsPort": "8080"}}, want: []string{"/operator/metricsPort", "want integer"}},
		{name: "bad image tag", values: map[string]any{"global": map[string]any{"imageTag": "v1 beta"}}, want: []string{"/global/imageTag", "pattern"}},
		{name: "registry in the repository", values: map[string]any{"broker": map[string]any{"image": map[string]any{"repository": "Registry.Example.com:5000/broker"}}}, want: []string{"/broker/image/repository"}},
		{name: "bad verbosity", values: map[string]any{"global": map[string]any{"verbosity": "TRACE"}}, want: []string{"/global/verbosity", "DEBUG"}},
		{name: "bad tenancy", values: map[string]any{"operator": map[string]any{"tenancy": map[string]any{"mcp": "Private"}}}, want: []string{"/operator/tenancy/mcp", "Exclusive"}},
		{name: "ingress without host", values: map[string]any{"broker": map[string]any{"ingress": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "s"}}}}, want: []string{"/broker/ingress/host", "minLength"}},
		{name: "ingress TLS without Secret", values: map[string]any{"broker": map[string]any{"ingress": map[string]any{"enabled": true, "host": "broker.example.com"}}}, want: []string{"/broker/ingress/tls/secretName", "minLength"}},
		{name: "resources of the wrong shape", values: map[string]any{"broker": map[string]any{"resources": map[string]any{"limits": map[string]any{"gpu": 1}}}}, want: []string{"/broker/resources/limits", "gpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := charts.Render(charts.WithExampleRegistry(tc.values))
			if err == nil {
				t.Fatal("Render accepted the values")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
}

// Helpers over rendered objects.

func count(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the render", kind, name)
	return nil
}

// nested returns the field at path; numeric path elements index lists.
func nested[T any](t *testing.T, o *unstructured.Unstructured, path ...string) T {
	t.Helper()
	var cur any = o.Object
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i >= len(c) {
				t.Fatalf("%s %s: no element %s in %v", o.GetKind(), o.GetName(), p, path)
			}
			cur = c[i]
		default:
			t.Fatalf("%s %s: nothing at %v", o.GetKind(), o.GetName(), path)
		}
	}
	v, ok := cur.(T)
	if !ok {
		var zero T
		t.Fatalf("%s %s: %v is %T, want %T", o.GetKind(), o.GetName(), path, cur, zero)
	}
	return v
}

func containerArgs(t *testing.T, dep *unstructured.Unstructured, name string) []string {
	t.Helper()
	return argsOf(t, dep, "containers", name)
}

func initContainerArgs(t *testing.T, dep *unstructured.Unstructured, name string) []string {
	t.Helper()
	return argsOf(t, dep, "initContainers", name)
}

func argsOf(t *testing.T, dep *unstructured.Unstructured, field, name string) []string {
	t.Helper()
	list, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", field)
	for _, c := range list {
		m := c.(map[string]any)
		if m["name"] != name {
			continue
		}
		args, _, _ := unstructured.NestedStringSlice(m, "args")
		return args
	}
	t.Fatalf("%s has no %s %s", dep.GetName(), field, name)
	return nil
}
