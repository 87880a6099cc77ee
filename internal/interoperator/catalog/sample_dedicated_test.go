package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render"
)

// TestSampleDedicatedClusterPlan validates the sample's dedicated-cluster
// service and plan and renders their templates: the ClusterRequest and
// AccessRequest names come from the ids only and ids that are not DNS
// labels fail the render (so that "<instance>.<binding>" names one pair);
// the status follows the requests' phases; the bind response carries the
// granted kubeconfig. The landscape test TestDedicatedClusterPlan runs it
// for real.
func TestSampleDedicatedClusterPlan(t *testing.T) {
	svc := readSample[osbv1alpha1.SFService](t, "service-dedicated-cluster.yaml")
	plan := readSample[osbv1alpha1.SFPlan](t, "plan-dedicated-cluster.yaml")
	services := []osbv1alpha1.SFService{*svc}
	if p := ValidateService(svc, services); p != nil {
		t.Errorf("service: %+v", p)
	}
	if p := ValidatePlan(plan, services, []osbv1alpha1.SFPlan{*plan}); p != nil {
		t.Errorf("plan: %+v", p)
	}
	r := render.New()
	ctx := context.Background()
	tmpl := func(a osbv1alpha1.TemplateAction) osbv1alpha1.TemplateSpec {
		tt, ok := plan.Template(a)
		if !ok {
			t.Fatalf("the dedicated-cluster plan has no %s template", a)
		}
		return tt
	}
	values := func(t *testing.T, instance, binding string) map[string]any {
		t.Helper()
		i := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: instance, Namespace: "tenant"},
			Spec: osbv1alpha1.SFServiceInstanceSpec{ServiceID: svc.Spec.ID, PlanID: plan.Spec.ID}}
		var b *osbv1alpha1.SFServiceBinding
		if binding != "" {
			b = &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: binding, Namespace: "tenant"}}
		}
		vals, err := render.Values(svc, plan, i, b)
		if err != nil {
			t.Fatal(err)
		}
		// The plan checks the id it is given: the name, as for an
		// instance the broker made.
		vals[varInstanceID] = instance
		return vals
	}

	t.Run("ClusterSelector", func(t *testing.T) {
		got, err := r.RenderString(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionClusterSelector), Values: values(t, "c1", "")})
		if err != nil || strings.TrimSpace(got) != "sfcluster.marketplane.io/serves=cluster-requests" {
			t.Errorf("clusterSelector = %q, %v; want the label of the SFCluster dedicated-clusters", got, err)
		}
	})

	t.Run("NamesFromIDs", func(t *testing.T) {
		vals := values(t, "c1", "b1")
		objs, err := r.RenderObjects(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionProvision), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"ClusterRequest/dedicated-clusters/c1"}, objectKeys(objs)); diff != "" {
			t.Errorf("provision objects, -want +got:\n%s", diff)
		}
		if p, _, _ := unstructured.NestedString(objs[0].Object, "spec", "purpose"); p != "mcp" {
			t.Errorf("purpose %q, want mcp (Exclusive: a cluster of the tenant's own)", p)
		}
		objs, err = r.RenderObjects(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionBind), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"AccessRequest/dedicated-clusters/c1.b1"}, objectKeys(objs)); diff != "" {
			t.Errorf("bind objects, -want +got:\n%s", diff)
		}
		if ref, _, _ := unstructured.NestedStringMap(objs[0].Object, "spec", "requestRef"); ref["name"] != "c1" || ref["namespace"] != "dedicated-clusters" {
			t.Errorf("requestRef %v, want the instance's ClusterRequest dedicated-clusters/c1", ref)
		}
		srcs, err := r.RenderMap(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionSources), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		refs, err := render.ParseSources(srcs)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for k, ref := range refs {
			got[k] = ref.Kind + "/" + ref.Namespace + "/" + ref.Name
		}
		want := map[string]string{
			"request":    "ClusterRequest/dedicated-clusters/c1",
			"access":     "AccessRequest/dedicated-clusters/c1.b1",
			"kubeconfig": "Secret/dedicated-clusters/c1.b1.kubeconfig",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("sources, -want +got:\n%s", diff)
		}
	})

	// Ids that would let one pair's names reach another's: dots make
	// "a.b"+"c" and "a"+"b.c" the same AccessRequest; upper case, other
	// characters and long ids are no DNS labels.
	for name, tc := range map[string]struct{ instance, binding string }{
		"InstanceWithDot":  {"a.b", "c"},
		"BindingWithDot":   {"a", "b.c"},
		"InstanceTooLong":  {strings.Repeat("a", 64), "b"},
		"BindingUpperCase": {"a", "B"},
		"InstanceEdgeDash": {"-a", "b"},
	} {
		t.Run("Refuses"+name, func(t *testing.T) {
			vals := values(t, tc.instance, tc.binding)
			action := osbv1alpha1.ActionBind
			if strings.HasPrefix(name, "Instance") {
				action = osbv1alpha1.ActionProvision
			}
			_, err := r.RenderObjects(ctx, render.Input{Template: tmpl(action), Values: vals})
			if err == nil || !strings.Contains(err.Error(), "must be DNS labels") && !strings.Contains(err.Error(), "must be a DNS label") {
				t.Errorf("%s with instance %q, binding %q: %v; want it refused for not being a DNS label", action, tc.instance, tc.binding, err)
			}
			srcs, err := r.RenderMap(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionSources), Values: vals})
			if err != nil {
				t.Fatalf("sources: %v; want no error (deprovision must still work)", err)
			}
			refs, err := render.ParseSources(srcs)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := refs["access"]; ok {
				t.Errorf("sources %v name an AccessRequest for invalid ids", refs)
			}
		})
	}

	request := func(phase string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
			"phase":   phase,
			"cluster": map[string]any{"name": "mcp-0123456789", "namespace": "marketplane-system"},
			"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "PolicyViolation",
				"message": "rule \"at most maxExclusiveClusters exclusive clusters\""}},
		}}}
	}
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: []\n"
	for name, tc := range map[string]struct {
		op              render.Operation
		sources         map[string]*unstructured.Unstructured
		want            osbv1alpha1.State
		wantText        string
		wantCredentials bool
		binding         string
	}{
		"ProvisionPending": {op: render.OperationProvision, sources: nil, want: osbv1alpha1.StateInProgress, wantText: "Waiting"},
		"ProvisionGranted": {op: render.OperationProvision, sources: map[string]*unstructured.Unstructured{"request": request("Granted")}, want: osbv1alpha1.StateSucceeded, wantText: "mcp-0123456789"},
		"ProvisionDenied":  {op: render.OperationProvision, sources: map[string]*unstructured.Unstructured{"request": request("Denied")}, want: osbv1alpha1.StateFailed, wantText: "maxExclusiveClusters"},
		"BindPending": {op: render.OperationBind, binding: "b1", want: osbv1alpha1.StateInProgress,
			sources: map[string]*unstructured.Unstructured{"request": request("Granted"), "access": request("Pending")}},
		"BindGrantedNoSecretYet": {op: render.OperationBind, binding: "b1", want: osbv1alpha1.StateInProgress,
			sources: map[string]*unstructured.Unstructured{"request": request("Granted"), "access": request("Granted")}},
		"BindDenied": {op: render.OperationBind, binding: "b1", want: osbv1alpha1.StateFailed, wantText: "maxExclusiveClusters",
			sources: map[string]*unstructured.Unstructured{"request": request("Granted"), "access": request("Denied")}},
		"BindGranted": {op: render.OperationBind, binding: "b1", want: osbv1alpha1.StateSucceeded, wantCredentials: true,
			sources: map[string]*unstructured.Unstructured{"request": request("Granted"), "access": request("Granted"),
				"kubeconfig": {Object: map[string]any{"data": map[string]any{"kubeconfig": base64.StdEncoding.EncodeToString([]byte(kubeconfig))}}}}},
	} {
		t.Run("Status"+name, func(t *testing.T) {
			out, err := r.RenderMap(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionStatus), Values: render.WithSources(values(t, "c1", tc.binding), tc.sources)})
			if err != nil {
				t.Fatal(err)
			}
			st, err := render.ParseStatus(out, tc.op)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tc.want || !strings.Contains(st.Description+st.Error, tc.wantText) {
				t.Errorf("state %q, description %q, error %q; want %q saying %q", st.State, st.Description, st.Error, tc.want, tc.wantText)
			}
			if !tc.wantCredentials {
				return
			}
			var got struct {
				Credentials map[string]string `json:"credentials"`
			}
			if err := json.Unmarshal(st.Response, &got); err != nil {
				t.Fatalf("bind response %s: %v", st.Response, err)
			}
			if want := map[string]string{"kubeconfig": kubeconfig, "cluster": "mcp-0123456789"}; !cmp.Equal(want, got.Credentials) {
				t.Errorf("credentials, -want +got:\n%s", cmp.Diff(want, got.Credentials))
			}
		})
	}
}
