package interoperator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// A careless plan, as Service Fabrik plans are often written: no schema, a
// parameter's value and the keys of a parameter map interpolated without
// quoting.
const carelessUnquoted = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  greeting: {{ .instance.spec.parameters.greeting }}
{{- range $k, $v := .instance.spec.parameters.labels }}
  {{ $k }}: {{ $v | quote }}
{{- end }}
`

// A plan that quotes the value, but whose bind template interpolates a
// binding parameter without quoting.
const (
	carelessQuoted = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  greeting: {{ .instance.spec.parameters.greeting | quote }}
`
	carelessBind = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "binding-%s" .binding.metadata.name | quote }}
data:
  note: {{ .binding.spec.parameters.note }}
`
)

// TestAttackYAMLInjection is issue #32's attack "YAML injection through OSB
// parameters": a tenant provisions and binds through the real broker, in
// front of the real inter-operator, with parameters holding quotes,
// newlines, "{{ … }}", and "---" followed by a ClusterRoleBinding to
// cluster-admin and a ConfigMap in kube-system, in a value and in a map key.
//
//   - The sample plan "small" (a schema that restricts its parameters):
//     every such provision and update is refused by the broker with 400
//     naming the schema, and nothing is stored; bind parameters, which it
//     has no schema for and does not render, change nothing.
//   - A careless plan without a schema that interpolates unquoted: the
//     operation fails with RenderedObjectRefused (last_operation "failed",
//     naming the rule), nothing is applied; a value that stays one YAML
//     scalar lands verbatim as data, its "{{ … }}" never executed.
//   - A plan that quotes: the whole value lands verbatim as data. Its
//     careless bind template is refused the same way.
//
// Finally every object on the target cluster that mentions the attack's
// marker is one of the two expected ConfigMaps, in their instances' own
// namespaces: no parameter became a second object or template code.
func TestAttackYAMLInjection(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	run := randomHex(t, 4)
	marker := "inj" + run
	id := func(n int) string { return fmt.Sprintf("6f1e2d3c-0000-4000-8000-%04d%s", n, run) }
	refusedID, smallID, valueID, keyID, scalarID, quotedID := id(1), id(2), id(3), id(4), id(5), id(6)
	var watched []string
	for _, i := range []string{valueID, keyID, scalarID, quotedID} {
		watched = append(watched, sf.InstanceNamespace(i))
	}
	e := newEnv(t, envOptions{namespace: sf.InstanceNamespace(smallID), namespaces: watched})
	applySamplePlanSmall(t, e)
	svc := e.createService(t, "careless")
	e.createPlan(t, "careless-unquoted", svc.Spec.ID, []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, carelessUnquoted)},
		func(p *osbv1alpha1.SFPlan) { p.Spec.Manager = &runtime.RawExtension{Raw: []byte(`{"async":true}`)} })
	e.createPlan(t, "careless-quoted", svc.Spec.ID, []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, carelessQuoted), gotemplate(osbv1alpha1.ActionBind, carelessBind)})
	osb := startBroker(t, e.catalog, "platform", randomHex(t, 24), logr.Discard())
	waitFor(t, "the careless plans in the broker's catalog", func() bool {
		code, body := osb.call(http.MethodGet, "/v2/catalog", nil)
		return code == http.StatusOK && bytes.Contains(body, []byte(`"careless-quoted"`)) && bytes.Contains(body, []byte(`"careless-unquoted"`))
	})
	ctx := context.Background()

	crb := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + marker + "-admin\n" +
		"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n" +
		"subjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: system:authenticated"
	kubeSystem := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + marker + "-cm\n  namespace: kube-system\ndata:\n  x: injected"
	documents := marker + "\n---\n" + crb + "\n---\n" + kubeSystem
	braces := `{{ .cluster.caData }} {{ env "HOME" }} {{ template "x" }}`
	everything := "it's \"quoted\" \\ \t é\n" + braces + "\n" + documents + "\n---\n"

	provision := func(serviceID, planID string, params map[string]any) map[string]any {
		return map[string]any{"service_id": serviceID, "plan_id": planID, "organization_guid": "org-1", "space_guid": "space-1", "parameters": params}
	}
	deprovision := func(instanceID, serviceID, planID string) {
		t.Cleanup(func() {
			code, body := osb.call(http.MethodDelete, "/v2/service_instances/"+instanceID+"?accepts_incomplete=true&service_id="+serviceID+"&plan_id="+planID, nil)
			if code != http.StatusOK && code != http.StatusAccepted && code != http.StatusGone {
				t.Errorf("deprovision %s: %d %s", instanceID, code, body)
			}
		})
	}

	t.Run("SchemaRefuses", func(t *testing.T) {
		for name, params := range map[string]map[string]any{
			"DocumentsInCPU":       {"cpu": "1\n---\n" + crb},
			"TrailingNewline":      {"memory": "4Gi\n"},
			"TemplateInPods":       {"pods": braces},
			"TemplateInCPU":        {"cpu": `1"}}` + braces},
			"UnknownKey":           {"greeting": documents},
			"DocumentsInKey":       {"cpu\n---\n" + crb: "1"},
			"QuotesAndNewlines":    {"memory": "4Gi\"\nrequests.cpu: \"1000"},
			"EverythingEverywhere": {"cpu": everything, "memory": everything, "pods": everything},
		} {
			code, body := osb.call(http.MethodPut, "/v2/service_instances/"+refusedID, provision(sampleServiceID, samplePlanSmall, params))
			if code != http.StatusBadRequest || !strings.Contains(string(body), "schema") {
				t.Errorf("%s: provision answered %d %s, want 400 naming the plan's schema", name, code, body)
			}
		}
		if err := onboarding.Client.Get(ctx, sf.InstanceKey(refusedID), &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
			t.Errorf("an instance was stored for refused provisions: %v", err)
		}
	})

	t.Run("SampleBindParametersChangeNothing", func(t *testing.T) {
		osb.expect(http.MethodPut, "/v2/service_instances/"+smallID, provision(sampleServiceID, samplePlanSmall, map[string]any{"cpu": "1", "pods": 3}), http.StatusCreated)
		deprovision(smallID, sampleServiceID, samplePlanSmall)
		before := brokerInstance(t, smallID)
		code, body := osb.call(http.MethodPatch, "/v2/service_instances/"+smallID, map[string]any{"service_id": sampleServiceID, "parameters": map[string]any{"memory": "1Gi\n---\n" + crb}})
		if code != http.StatusBadRequest || !strings.Contains(string(body), "schema") {
			t.Errorf("update with documents in memory: %d %s, want 400 naming the schema", code, body)
		}
		if after := brokerInstance(t, smallID); after.Generation != before.Generation {
			t.Errorf("a refused update changed the instance: generation %d, was %d", after.Generation, before.Generation)
		}
		bid := "7a2b3c4d-0000-4000-8000-0001" + run
		osb.expect(http.MethodPut, "/v2/service_instances/"+smallID+"/service_bindings/"+bid,
			map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall, "parameters": map[string]any{"note": everything, "cpu": documents}}, http.StatusCreated)
		b := brokerBinding(t, smallID, bid)
		want := []string{"RoleBinding/binding-" + bid, "Secret/binding-" + bid + "-token", "ServiceAccount/binding-" + bid}
		var got []string
		for _, r := range b.Status.Resources {
			got = append(got, r.Kind+"/"+r.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("the binding's objects are %v, want exactly the plan's %v", got, want)
		}
	})

	// The careless plan, asynchronous: the failure is read from
	// last_operation, as a platform does.
	failed := func(t *testing.T, instanceID string, params map[string]any) {
		t.Helper()
		body := osb.expect(http.MethodPut, "/v2/service_instances/"+instanceID+"?accepts_incomplete=true",
			provision(svc.Spec.ID, "careless-unquoted", params), http.StatusAccepted)
		deprovision(instanceID, svc.Spec.ID, "careless-unquoted")
		var op struct {
			Operation string `json:"operation"`
		}
		must(t, json.Unmarshal(body, &op))
		var last struct {
			State       string `json:"state"`
			Description string `json:"description"`
		}
		waitFor(t, "last_operation of "+instanceID+" to settle", func() bool {
			code, body := osb.call(http.MethodGet, "/v2/service_instances/"+instanceID+"/last_operation?operation="+op.Operation, nil)
			must(t, json.Unmarshal(body, &last))
			return code == http.StatusOK && last.State != "in progress"
		})
		if last.State != "failed" || !strings.Contains(last.Description, "refused by the render policy") || !strings.Contains(last.Description, apply.RuleNamespacedKinds) {
			t.Errorf("last_operation: %+v, want failed, naming the render policy's rule %s", last, apply.RuleNamespacedKinds)
		}
		inst := waitBrokerInstance(t, instanceID, osbv1alpha1.StateFailed)
		if c := readyCondition(inst.Status.Conditions); c == nil || c.Reason != string(provisioner.ReasonRenderedObjectRefused) {
			t.Errorf("Ready of %s = %+v, want reason %s", instanceID, c, provisioner.ReasonRenderedObjectRefused)
		}
		if len(inst.Status.Resources) != 0 {
			t.Errorf("status.resources of %s = %+v, want none: a refused render applies nothing", instanceID, inst.Status.Resources)
		}
	}
	t.Run("UnquotedValueRefused", func(t *testing.T) {
		failed(t, valueID, map[string]any{"greeting": documents})
	})
	t.Run("UnquotedKeyRefused", func(t *testing.T) {
		// The template appends `: "<value>"` to the key: the key ends
		// where the last injected document wants a value.
		key := "a: b\n---\n" + crb + "\n---\n" + strings.TrimSuffix(kubeSystem, ": injected")
		failed(t, keyID, map[string]any{"greeting": "hi", "labels": map[string]any{key: "y"}})
	})
	t.Run("UnquotedScalarIsData", func(t *testing.T) {
		// A value that stays one YAML scalar is data, "{{" and all.
		value := marker + " " + braces + ` it's "quoted"`
		body := osb.expect(http.MethodPut, "/v2/service_instances/"+scalarID+"?accepts_incomplete=true",
			provision(svc.Spec.ID, "careless-unquoted", map[string]any{"greeting": value}), http.StatusAccepted)
		deprovision(scalarID, svc.Spec.ID, "careless-unquoted")
		var op struct {
			Operation string `json:"operation"`
		}
		must(t, json.Unmarshal(body, &op))
		waitBrokerInstance(t, scalarID, osbv1alpha1.StateSucceeded)
		expectGreeting(t, sf.InstanceNamespace(scalarID), value)
	})
	t.Run("QuotedIsData", func(t *testing.T) {
		osb.expect(http.MethodPut, "/v2/service_instances/"+quotedID, provision(svc.Spec.ID, "careless-quoted", map[string]any{"greeting": everything}), http.StatusCreated)
		deprovision(quotedID, svc.Spec.ID, "careless-quoted")
		expectGreeting(t, sf.InstanceNamespace(quotedID), everything)

		// The careless bind template: refused, nothing applied.
		bid := "7a2b3c4d-0000-4000-8000-0002" + run
		code, body := osb.call(http.MethodPut, "/v2/service_instances/"+quotedID+"/service_bindings/"+bid,
			map[string]any{"service_id": svc.Spec.ID, "plan_id": "careless-quoted", "parameters": map[string]any{"note": documents}})
		if code != http.StatusInternalServerError || !strings.Contains(string(body), "refused by the render policy") {
			t.Errorf("bind with documents in an unquoted parameter: %d %s, want 500 with the render policy's refusal", code, body)
		}
		if b := brokerBinding(t, quotedID, bid); len(b.Status.Resources) != 0 {
			t.Errorf("the refused binding applied %+v", b.Status.Resources)
		}
		if err := target.Client.Get(ctx, client.ObjectKey{Namespace: sf.InstanceNamespace(quotedID), Name: "binding-" + sf.ObjectName(bid)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused binding's ConfigMap exists (%v)", err)
		}
	})

	// Nothing on the target mentions the marker but the two ConfigMaps
	// that hold a value verbatim, each in its instance's own namespace.
	got := objectsMentioning(t, target, marker)
	want := []string{
		"ConfigMap " + sf.InstanceNamespace(quotedID) + "/settings",
		"ConfigMap " + sf.InstanceNamespace(scalarID) + "/settings",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("objects on the target that mention %s: %v, want only %v", marker, got, want)
	}
}

// brokerInstance reads the SFServiceInstance the broker stored for the
// instance id.
func brokerInstance(t *testing.T, id string) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	inst := &osbv1alpha1.SFServiceInstance{}
	must(t, onboarding.Client.Get(context.Background(), sf.InstanceKey(id), inst))
	return inst
}

// waitBrokerInstance waits until the instance the broker stored for id is
// in state for its current generation, and returns it.
func waitBrokerInstance(t *testing.T, id string, state osbv1alpha1.State) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	var inst *osbv1alpha1.SFServiceInstance
	waitFor(t, "instance "+id+" to reach "+string(state), func() bool {
		inst = brokerInstance(t, id)
		return inst.Status.State == state && inst.Status.ObservedGeneration == inst.Generation
	})
	return inst
}

// brokerBinding reads the SFServiceBinding the broker stored for the
// binding bid of the instance id.
func brokerBinding(t *testing.T, id, bid string) *osbv1alpha1.SFServiceBinding {
	t.Helper()
	b := &osbv1alpha1.SFServiceBinding{}
	must(t, onboarding.Client.Get(context.Background(), sf.BindingKey(id, bid), b))
	return b
}

// expectGreeting checks that the ConfigMap "settings" of namespace on the
// target holds value, byte for byte, as its greeting.
func expectGreeting(t *testing.T, namespace, value string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	must(t, target.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "settings"}, cm))
	if got := cm.Data["greeting"]; got != value {
		t.Errorf("greeting in %s/settings = %q, want the parameter verbatim: %q", namespace, got, value)
	}
	if len(cm.Data) != 1 {
		t.Errorf("%s/settings has the keys %v, want only greeting", namespace, slices.Sorted(maps.Keys(cm.Data)))
	}
}

// objectsMentioning lists every object of every listable resource of c
// whose JSON holds s, as "Kind namespace/name", sorted.
func objectsMentioning(t *testing.T, c *testenv.Cluster, s string) []string {
	t.Helper()
	var out []string
	eachObject(t, c, func(kind string, item *unstructured.Unstructured) {
		b, err := json.Marshal(item.Object)
		must(t, err)
		if bytes.Contains(b, []byte(s)) {
			out = append(out, kind+" "+item.GetNamespace()+"/"+item.GetName())
		}
	})
	slices.Sort(out)
	return out
}

// call sends a request as the platform does and returns the status and
// body, whatever they are.
func (c *osbClient) call(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(c.t, err)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, in)
	must(c.t, err)
	req.SetBasicAuth(c.user, c.password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	must(c.t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	must(c.t, err)
	return resp.StatusCode, out
}
