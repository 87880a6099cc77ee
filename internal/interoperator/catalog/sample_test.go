package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render"
)

const sampleDir = "../../../examples/catalog"

// varInstanceID is the provisioner's template variable .instanceId
// (provisioner.VarInstanceID, which this package cannot import): the
// tests set what the provisioner would.
const varInstanceID = "instanceId"

func readSample[T any](t *testing.T, file string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sampleDir, file))
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return out
}

// TestSampleCatalogValid checks that the sample catalog passes the
// catalog's validation.
func TestSampleCatalogValid(t *testing.T) {
	svc := readSample[osbv1alpha1.SFService](t, "service.yaml")
	small := readSample[osbv1alpha1.SFPlan](t, "plan-small.yaml")
	helm := readSample[osbv1alpha1.SFPlan](t, "plan-helm.yaml")
	services := []osbv1alpha1.SFService{*svc}
	plans := []osbv1alpha1.SFPlan{*small, *helm}
	if p := ValidateService(svc, services); p != nil {
		t.Errorf("service: %+v", p)
	}
	for _, plan := range plans {
		if p := ValidatePlan(&plan, services, plans); p != nil {
			t.Errorf("plan %s: %+v", plan.Name, p)
		}
	}
	if _, file, err := ChartArchive(filepath.Join(sampleDir, "charts", "namespace-quota")); err != nil || file != "namespace-quota-0.1.0.tgz" {
		t.Errorf("ChartArchive() = %q, %v; want namespace-quota-0.1.0.tgz, the key plan-helm.yaml names", file, err)
	}
}

// TestSampleCatalogRenders renders the templates of the sample plan
// "small": the provision objects with and without parameters, and the bind
// response from a token Secret.
func TestSampleCatalogRenders(t *testing.T) {
	svc := readSample[osbv1alpha1.SFService](t, "service.yaml")
	plan := readSample[osbv1alpha1.SFPlan](t, "plan-small.yaml")
	r := render.New()
	ctx := context.Background()
	instance := func(params string) *osbv1alpha1.SFServiceInstance {
		// Where the broker puts instance i1: its .instanceId is i1.
		i := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "i1", Namespace: "sf-i1"},
			Spec: osbv1alpha1.SFServiceInstanceSpec{ServiceID: svc.Spec.ID, PlanID: plan.Spec.ID}}
		if params != "" {
			i.Spec.Parameters = &runtime.RawExtension{Raw: []byte(params)}
		}
		return i
	}
	tmpl := func(a osbv1alpha1.TemplateAction) osbv1alpha1.TemplateSpec {
		tt, ok := plan.Template(a)
		if !ok {
			t.Fatalf("the sample plan has no %s template", a)
		}
		return tt
	}

	quotas := map[string]struct {
		params string
		want   map[string]any
	}{
		"Defaults":   {"", map[string]any{"requests.cpu": "2", "requests.memory": "4Gi", "pods": "10"}},
		"Parameters": {`{"cpu":"500m","memory":"1Gi","pods":3}`, map[string]any{"requests.cpu": "500m", "requests.memory": "1Gi", "pods": "3"}},
	}
	for name, tc := range quotas {
		t.Run("Provision"+name, func(t *testing.T) {
			vals, err := render.Values(svc, plan, instance(tc.params), nil)
			if err != nil {
				t.Fatal(err)
			}
			vals[varInstanceID] = "i1"
			objs, err := r.RenderObjects(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionProvision), Values: vals})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"Namespace//sf-i1", "ResourceQuota/sf-i1/quota", "Namespace//" + credentialsNamespaceI1}, objectKeys(objs)); diff != "" {
				t.Errorf("objects, -want +got:\n%s", diff)
			}
			hard, _, _ := unstructured.NestedMap(objs[1].Object, "spec", "hard")
			if diff := cmp.Diff(tc.want, hard); diff != "" {
				t.Errorf("quota, -want +got:\n%s", diff)
			}
		})
	}

	t.Run("BindStatus", func(t *testing.T) {
		binding := &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "tenant"}}
		vals, err := render.Values(svc, plan, instance(""), binding)
		if err != nil {
			t.Fatal(err)
		}
		vals[varInstanceID] = "i1"
		vals["cluster"] = map[string]any{"name": "c", "server": "https://api.example.com", "caData": "Q0E="}
		srcs, err := r.RenderMap(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionSources), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		refs, err := render.ParseSources(srcs)
		if err != nil {
			t.Fatal(err)
		}
		if refs["token"].Name != "binding-b1-token" || refs["token"].Namespace != credentialsNamespaceI1 {
			t.Errorf("token source = %+v, want the bind template's Secret in the credentials namespace", refs["token"])
		}
		objs, err := r.RenderObjects(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionBind), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"ServiceAccount/" + credentialsNamespaceI1 + "/binding-b1", "Secret/" + credentialsNamespaceI1 + "/binding-b1-token", "RoleBinding/sf-i1/binding-b1"}
		if diff := cmp.Diff(want, objectKeys(objs)); diff != "" {
			t.Errorf("bind objects, -want +got:\n%s", diff)
		}
		for name, tc := range map[string]struct {
			token string
			want  osbv1alpha1.State
		}{"TokenPending": {"", osbv1alpha1.StateInProgress}, "TokenIssued": {"s3cr3t", osbv1alpha1.StateSucceeded}} {
			t.Run(name, func(t *testing.T) {
				secret := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{}}}
				if tc.token != "" {
					secret.Object["data"] = map[string]any{"token": base64.StdEncoding.EncodeToString([]byte(tc.token))}
				}
				out, err := r.RenderMap(ctx, render.Input{Template: tmpl(osbv1alpha1.ActionStatus),
					Values: render.WithSources(vals, map[string]*unstructured.Unstructured{"token": secret})})
				if err != nil {
					t.Fatal(err)
				}
				st, err := render.ParseStatus(out, render.OperationBind)
				if err != nil {
					t.Fatal(err)
				}
				if st.State != tc.want {
					t.Fatalf("state = %q, want %q", st.State, tc.want)
				}
				if tc.token == "" {
					return
				}
				var got map[string]map[string]string
				if err := json.Unmarshal(st.Response, &got); err != nil {
					t.Fatal(err)
				}
				want := map[string]map[string]string{"credentials": {"apiServer": "https://api.example.com", "caData": "Q0E=", "token": "s3cr3t", "namespace": "sf-i1"}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("bind response, -want +got:\n%s", diff)
				}
			})
		}
	})
}

// credentialsNamespaceI1 is the sample plan's namespace of the binding
// service accounts of instance i1: sfb- and the first 40 hex digits of the
// SHA-256 of the instance name.
var credentialsNamespaceI1 = func() string {
	sum := sha256.Sum256([]byte("i1"))
	return "sfb-" + hex.EncodeToString(sum[:])[:40]
}()

// objectKeys returns kind/namespace/name of each object.
func objectKeys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}
