package landscape_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestReadTree reads the tree from a real API server holding a few objects
// of each kind the tree shows, and checks the lines drawn from it. One API
// server stands for the platform, onboarding and workload clusters (each
// role reads only its own kinds, so every object appears once), which
// keeps the test to one kube-apiserver; the test process stands for the
// landscape's processes (it is alive, as they would be).
func TestReadTree(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.WithCRDs(append(all, sampleCRD())...))
	kubeconfig, err := env.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	host, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(host.Port())
	if err != nil {
		t.Fatal(err)
	}
	self, err := controlplane.Self()
	if err != nil {
		t.Fatal(err)
	}
	// operator-0 is this process and logged that it leads; operator-1 is
	// a record of a process that is gone.
	opLog := filepath.Join(t.TempDir(), "operator-0.log")
	lease := fmt.Sprintf("I1125 01:02:03.000000 %d leaderelection.go:1] \"Successfully acquired lease\" lock=\"x\"\n", self.PID)
	if err := os.WriteFile(opLog, []byte(lease), 0o600); err != nil {
		t.Fatal(err)
	}
	op0, op1 := *self, controlplane.Process{Name: "operator-1", Binary: "/nonexistent/marketplane-operator", PID: 1 << 22}
	op0.Name, op0.Log = "operator-0", opLog
	st := &controlplane.State{
		Phase:      controlplane.PhaseReady,
		Supervisor: self,
		Clusters:   map[string]*controlplane.Cluster{},
		Processes:  map[string]*controlplane.Process{"operator-0": &op0, "operator-1": &op1, "broker": self},
		Endpoints:  map[string]string{"broker": "http://127.0.0.1:1"},
	}
	for _, name := range []string{landscape.ClusterPlatform, landscape.ClusterOnboarding, landscape.ClusterWorkload} {
		st.Clusters[name] = &controlplane.Cluster{Name: name, Port: port, Kubeconfig: kubeconfig, APIServer: self}
	}
	// A cluster the local cluster provider created, whose API server is
	// gone: it is shown, not read.
	st.Clusters["mcp-abc"] = &controlplane.Cluster{Name: "mcp-abc", Port: 1, Request: &controlplane.RequestRef{Namespace: "tenant-a", Name: "mcp1"}}

	ctx := t.Context()
	c := env.Client
	create := func(obj map[string]any, status map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if status != nil {
			u.Object["status"] = status
			if err := c.Status().Update(ctx, u); err != nil {
				t.Fatalf("status of %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	namespace := func(name string) {
		t.Helper()
		create(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}, nil)
	}
	for _, ns := range []string{"tenant-a", "tenant-b", "catalog", "sf-0", "sf-1", "sf-2", "sf-3"} {
		namespace(ns)
	}
	sampleGVK := map[string]any{"group": "sample.services.openmcp.cloud", "version": "v1alpha1", "kind": "Sample"}
	create(map[string]any{"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider", "metadata": map[string]any{"name": "sample"},
		"spec": map[string]any{"image": "marketplane.local/sample:dev"}},
		map[string]any{"phase": "Ready", "observedGeneration": int64(1), "resources": []any{sampleGVK}})
	create(map[string]any{"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider", "metadata": map[string]any{"name": "broken"},
		"spec": map[string]any{"image": "registry.example.com/acme/broken@sha256:0123"}}, nil)
	// A provider whose init's request the policy denied.
	create(map[string]any{"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider", "metadata": map[string]any{"name": "denied"},
		"spec": map[string]any{"image": "registry.example.com/acme/denied:v1"}},
		map[string]any{"phase": "Progressing", "observedGeneration": int64(1), "conditions": []any{
			map[string]any{"type": "Initialized", "status": "True", "reason": "InitCompleted", "message": "init completed", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)},
			map[string]any{"type": "RequestsGranted", "status": "False", "reason": "RequestDenied", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
				"message": deniedMessage}}})
	create(map[string]any{"apiVersion": "core.openmcp.cloud/v2alpha1", "kind": "ManagedControlPlane", "metadata": map[string]any{"name": "mcp1", "namespace": "tenant-a"}, "spec": map[string]any{"iam": map[string]any{}}},
		map[string]any{"phase": "Ready", "observedGeneration": int64(1)})
	sample := func(ns, name string) map[string]any {
		return map[string]any{"apiVersion": "sample.services.openmcp.cloud/v1alpha1", "kind": "Sample", "metadata": map[string]any{"name": name, "namespace": ns}}
	}
	create(sample("tenant-a", "mcp1"), map[string]any{"phase": "Progressing"})
	create(sample("tenant-b", "loose"), nil)
	create(map[string]any{"apiVersion": "resource.servicefabrik.io/v1alpha1", "kind": "SFCluster", "metadata": map[string]any{"name": "workload", "namespace": "catalog"},
		"spec": map[string]any{"secretRef": "workload"}},
		map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reachable", "message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}})
	create(map[string]any{"apiVersion": "osb.servicefabrik.io/v1alpha1", "kind": "SFPlan", "metadata": map[string]any{"name": "small", "namespace": "catalog"},
		"spec": map[string]any{"id": "plan-small-id", "name": "small", "serviceId": "svc", "description": "d", "free": true, "bindable": true,
			"templates": []any{}, "context": map[string]any{}, "manager": map[string]any{}}}, nil)
	for i := range 4 {
		create(map[string]any{"apiVersion": "osb.servicefabrik.io/v1alpha1", "kind": "SFServiceInstance",
			"metadata": map[string]any{"name": strconv.Itoa(i), "namespace": "sf-" + strconv.Itoa(i)},
			"spec":     map[string]any{"serviceId": "svc", "planId": "plan-small-id", "clusterId": "workload"}},
			map[string]any{"state": "succeeded", "phase": "Ready"})
	}
	for i := range 2 {
		create(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "node-" + strconv.Itoa(i)}}, nil)
	}

	tree := landscape.ReadTree(ctx, &landscape.Status{Dir: "/state", State: st, Running: true})
	api := "https://127.0.0.1:" + strconv.Itoa(port)
	want := []string{
		"landscape /state (Ready, 5/6 processes running)",
		"├── platform    " + api + "  ready",
		"│   ├── operator                    1/2 replicas running  leader operator-0",
		"│   ├── process broker              running  http://127.0.0.1:1",
		"│   ├── ServiceProvider broken      no status yet  sha256:0123",
		"│   ├── ServiceProvider denied      Progressing  v1",
		"│   │   └── condition RequestsGranted  False (RequestDenied)  " + deniedMessage,
		"│   ├── ServiceProvider sample      Ready  dev",
		"│   └── SFCluster catalog/workload  Ready  4 instances",
		"├── onboarding  " + api + "  ready",
		"│   ├── ManagedControlPlane tenant-a/mcp1  Ready",
		"│   │   └── Sample tenant-a/mcp1  Progressing",
		"│   ├── Sample tenant-b/loose              no status yet",
		"│   ├── SFServiceInstance sf-0/0           succeeded  plan small, on workload",
		"│   ├── SFServiceInstance sf-1/1           succeeded  plan small, on workload",
		"│   ├── SFServiceInstance sf-2/2           succeeded  plan small, on workload",
		"│   └── … and 1 more SFServiceInstance",
		"├── workload    " + api + "  ready  2 nodes",
		"└── mcp-abc     https://127.0.0.1:1  API server not running  for ClusterRequest tenant-a/mcp1",
	}
	got := tree.Lines(3)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tree: -want +got:\n%s\ngot:\n%s", diff, strings.Join(got, "\n"))
	}

	// The plain status names the denial too.
	var out strings.Builder
	(&landscape.Status{Dir: "/state", State: st, Running: true}).Print(ctx, &out, true)
	for _, line := range []string{
		"Providers:\n",
		"  ServiceProvider denied: Progressing\n    RequestsGranted=False (RequestDenied): " + deniedMessage + "\n",
		"  ServiceProvider sample: Ready\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("status does not print %q:\n%s", line, out.String())
		}
	}
}

// deniedMessage is the RequestsGranted message of a provider whose init's
// AccessRequest the access policy denied, as the operator writes it.
const deniedMessage = `AccessRequest sp-denied/denied--onboarding-init Denied (PolicyViolation): rule "permissions within the ceiling": token.permissions[0]: * */* not allowed on onboarding clusters`

// sampleCRD is a minimal CRD of the sample provider's Sample kind, a
// service object kind a ServiceProvider registers.
func sampleCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "samples.sample.services.openmcp.cloud"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "sample.services.openmcp.cloud",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "samples", Singular: "sample", Kind: "Sample", ListKind: "SampleList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}
