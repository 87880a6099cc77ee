package kcpprovider_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/kcpprovider"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The servers every test of the package shares, started on first use by
// startEnv: the platform API server, where Clusters live, and kcp.
var (
	platform *testenv.Cluster
	kcp      *testenv.KCP
	envOnce  sync.Once
	envErr   error
)

func TestMain(m *testing.M) {
	logf.SetLogger(testenv.Logger())
	code := m.Run()
	if platform != nil {
		_ = platform.Stop()
	}
	if kcp != nil {
		_ = kcp.Stop()
	}
	os.Exit(code)
}

// startEnv starts the platform API server and kcp once, side by side. It
// skips the test under -short.
func startEnv(t *testing.T) {
	t.Helper()
	testenv.SkipIfShort(t)
	envOnce.Do(func() {
		var wg sync.WaitGroup
		var perr, kerr error
		wg.Go(func() { platform, perr = testenv.New(testenv.WithName("platform")) })
		wg.Go(func() { kcp, kerr = testenv.NewKCP() })
		wg.Wait()
		envErr = errors.Join(perr, kerr)
	})
	if envErr != nil {
		t.Fatalf("testenv: %v", envErr)
	}
}

// workspaces is a client of the Workspaces in kcp's root.
func workspaces(t *testing.T) dynamic.NamespaceableResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(kcp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(kcpprovider.WorkspaceGVR)
}

// newNamespace creates a platform namespace for one test.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := platform.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// startManager runs a manager of the platform whose cache sees only
// namespace (and cluster-scoped objects), with the controllers setup
// registers, until the test ends.
func startManager(t *testing.T, namespace string, setup func(mgr ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(platform.Config, ctrl.Options{
		Scheme:                 platform.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := setup(mgr); err != nil {
		t.Fatalf("setup controllers: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// createProfile creates a ClusterProfile named name for provider and
// deletes it when the test ends.
func createProfile(t *testing.T, name, provider string) {
	t.Helper()
	p := &clustersv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clustersv1alpha1.ClusterProfileSpec{
			ProviderRef:       common.LocalObjectReference{Name: provider},
			ProviderConfigRef: common.LocalObjectReference{Name: provider},
			SupportedVersions: []clustersv1alpha1.SupportedK8sVersion{{Version: "1.32.0"}},
		},
	}
	if err := platform.Client.Create(t.Context(), p); err != nil {
		t.Fatalf("create ClusterProfile %s: %v", name, err)
	}
	t.Cleanup(func() { _ = platform.Client.Delete(context.Background(), p) })
}

// createCluster creates a Cluster of profile.
func createCluster(t *testing.T, namespace, name, profile string) *clustersv1alpha1.Cluster {
	t.Helper()
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: clustersv1alpha1.ClusterSpec{
			Profile: profile, Purposes: []string{clustersv1alpha1.PurposeMCP}, Tenancy: clustersv1alpha1.TenancyExclusive,
		},
	}
	if err := platform.Client.Create(t.Context(), cl); err != nil {
		t.Fatalf("create Cluster %s: %v", name, err)
	}
	return cl
}

// eventually polls check until it reports done or timeout passes, then
// fails with what was awaited and what check last said.
func eventually(t *testing.T, what string, timeout time.Duration, check func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		done, msg := check(ctx)
		if done {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last seen: %s", timeout, what, last)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last seen: %s", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// getWorkspace returns the Workspace named name, nil when there is none.
func getWorkspace(ctx context.Context, t *testing.T, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	ws, err := workspaces(t).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return ws, err
}

// waitEvent waits for an event of eventType with reason about obj and
// returns its note.
func waitEvent(t *testing.T, obj client.Object, eventType, reason string, timeout time.Duration) string {
	t.Helper()
	var note string
	eventually(t, fmt.Sprintf("%s event %s about %s", eventType, reason, obj.GetName()), timeout, func(ctx context.Context) (bool, string) {
		list := &eventsv1.EventList{}
		if err := platform.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != obj.GetUID() {
				continue
			}
			if e.Type == eventType && e.Reason == reason {
				note = e.Note
				return true, ""
			}
			seen = append(seen, e.Type+"/"+e.Reason)
		}
		return false, fmt.Sprintf("events about it: %q", seen)
	})
	return note
}
