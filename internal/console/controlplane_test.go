package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"

	"github.com/marketplane/marketplane/internal/operator/mcp"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
)

// TestOrderFindsControlPlane: a Sample ordered in the console is found by
// the provider runtime's own lookup of its control plane
// (clusteraccess.Manager.Clusters), with the real ManagedControlPlane
// controller running (one API server as onboarding and platform cluster):
// no MCPNotFound, whereas a Sample created alone, as the console did
// before, is MCPNotFound.
func TestOrderFindsControlPlane(t *testing.T) {
	e := setup(t)
	startMCPController(t, e)
	cs := startConsole(t, e, false, nil)
	u := signIn(t, cs, e.tokenA)
	ctx := t.Context()

	resp := u.postForm(t, "/offerings/"+sampleOffering, map[string]string{
		"csrf": u.csrf, "choice": "Sample", "namespace": nsA, "name": "found-a", "p.version": "v1",
	})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("order a Sample: status %d: %s", resp.StatusCode, resp.Body)
	}
	// The control plane controller answers the new ManagedControlPlane with
	// its ClusterRequest, which is what the provider looks for.
	crKey := clusteraccess.MCPClusterRequest(nsA, "found-a")
	waitFor(t, "the ClusterRequest of the ManagedControlPlane found-a", func(ctx context.Context) string {
		if err := e.cluster.Client.Get(ctx, crKey, &clustersv1alpha1.ClusterRequest{}); err != nil {
			return fmt.Sprintf("ClusterRequest %s: %v", crKey, err)
		}
		return ""
	})

	access, err := clusteraccess.New(e.cluster.Client, "sample", nsPlatform)
	if err != nil {
		t.Fatal(err)
	}
	sample := func(name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(schema.GroupVersionKind{Group: "sample.services.openmcp.cloud", Version: "v1alpha1", Kind: "Sample"})
		if err := e.cluster.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: name}, o); err != nil && name == "found-a" {
			t.Fatalf("the ordered Sample: %v", err)
		}
		o.SetNamespace(nsA)
		o.SetName(name)
		return o
	}
	if _, _, err := access.Clusters(ctx, sample("found-a")); errors.Is(err, clusteraccess.ErrMCPNotFound) {
		t.Errorf("the provider runtime does not find the control plane of the ordered Sample: %v", err)
	}
	// The control: a Sample with no control plane of its name.
	lone := sample("lone-a")
	lone.Object["spec"] = map[string]any{"version": "v1"}
	if err := e.cluster.Client.Create(ctx, lone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := access.Clusters(ctx, lone); !errors.Is(err, clusteraccess.ErrMCPNotFound) {
		t.Errorf("a Sample without a control plane: %v, want MCPNotFound (the check would be empty)", err)
	}
}

// startMCPController runs the ManagedControlPlane controller on the shared
// API server, as onboarding and platform cluster at once, until the test
// ends.
func startMCPController(t *testing.T, e *env) {
	t.Helper()
	platform, err := cluster.New(e.cluster.Config, func(o *cluster.Options) { o.Scheme = e.cluster.Scheme })
	if err != nil {
		t.Fatalf("platform cluster: %v", err)
	}
	mgr, err := ctrl.NewManager(e.cluster.Config, ctrl.Options{
		Scheme: e.cluster.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := mgr.Add(platform); err != nil {
		t.Fatalf("add the platform cluster: %v", err)
	}
	r := mcp.NewReconciler(mgr, platform, mcp.WithControllerName("console-test-mcp"),
		mcp.WithControllerOptions(controller.Options{SkipNameValidation: ptr.To(true)}))
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("set up the ManagedControlPlane controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the ManagedControlPlane controller: %v", err)
		}
	})
}
