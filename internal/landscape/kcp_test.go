package landscape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/localcluster"
	"github.com/marketplane/marketplane/internal/landscape/stack"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/supervisor"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The sample provider's code-based offering (docs/marketplace.md, "OSB for
// code-based offerings") and its DomainServiceAPI.
var (
	sampleOfferingID = catalog.OfferingServiceID("sp-sample")
	samplePlanID     = catalog.OfferingPlanID("sp-sample", "sample.services.openmcp.cloud", "Sample")
	sampleObjects    = schema.GroupVersionResource{Group: "domain.sample.services.openmcp.cloud", Version: "v1alpha1", Resource: "sampleobjects"}
	kcpWorkspaces    = schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"}
)

// backendAnnotation is what the kcp provider sets on its Clusters.
const backendAnnotation = clusters.MarketplaneGroup + "/backend"

// kcpNamespace is the kcp ClusterProvider's namespace and run
// ServiceAccount, where its Clusters and their kubeconfig Secrets are.
const kcpNamespace = "cp-" + landscape.KCPProvider

// TestKCPBackend runs the whole landscape with `up --mcp-backend kcp`, as a
// user does: status names the backend and kcp; through the broker two
// tenants each order the sample provider's offering; each instance's MCP
// is a kcp workspace (its Cluster annotated with the backend) and its
// Sample Ready; the binding of one reads its own SampleObjects and is
// refused in the other's workspace, and so is the other's binding in its
// workspace; deprovision removes the Cluster and the Workspace (read with
// kcp's admin kubeconfig); `stop` ends kcp too and `start` resumes it with
// the other instance's workspace, which its binding still reads.
func TestKCPBackend(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	ctx := t.Context()
	bin := kcpBinaries(t)
	dir := filepath.Join(t.TempDir(), "state")
	t.Cleanup(func() { _ = landscape.Down(context.Background(), dir, nil) })

	begin := time.Now()
	runCLI(t, "landscape", "up", "--state-dir", dir, "--bin-dir", bin, "--start-timeout", startTimeout.String(), "--mcp-backend", landscape.BackendKCP)
	t.Logf("start-up (fresh, 'landscape up --mcp-backend kcp', whole landscape): %s", time.Since(begin).Round(10*time.Millisecond))
	running := readState(t, dir)
	if running.MCPBackend != landscape.BackendKCP || running.KCP == nil || !controlplane.Alive(running.KCP.Process) {
		t.Fatalf("state.json records backend %q and kcp %+v; want kcp, running", running.MCPBackend, running.KCP)
	}
	for _, p := range []int{running.KCP.SecurePort, running.KCP.EtcdClientPort, running.KCP.EtcdPeerPort} {
		if p == 6443 || p == 2379 || p == 2380 {
			t.Errorf("kcp got port %d, one of its defaults", p)
		}
	}
	if rss, err := supervisor.ResidentMemory(running.KCP.Process.PID); err == nil {
		t.Logf("resident memory of kcp right after up: %d MiB", rss>>20)
	}
	if out := runCLI(t, "landscape", "status", "--state-dir", dir); !strings.Contains(out, "MCP backend: kcp (every MCP is a workspace of kcp") {
		t.Errorf("status does not name the kcp backend:\n%s", out)
	}
	var broker stack.BrokerInfo
	raw, err := os.ReadFile(filepath.Join(dir, stack.BrokerCredentialsFile))
	must(t, err)
	must(t, json.Unmarshal(raw, &broker))
	platform := clientFromFile(t, running.Clusters[landscape.ClusterPlatform].Kubeconfig)
	admin := kcpAdmin(t, running.KCP.Kubeconfig)

	type tenant struct{ instance, org, host, workspace string }
	tenants := []*tenant{{instance: "kcp-a", org: "org-a"}, {instance: "kcp-b", org: "org-b"}}
	kubeconfigs := map[string][]byte{}
	for _, tn := range tenants {
		status, answer, err := brokerCall(ctx, broker, http.MethodPut, "/v2/service_instances/"+tn.instance+"?accepts_incomplete=true",
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":%q,"space_guid":"space-1","parameters":{}}`, sampleOfferingID, samplePlanID, tn.org))
		must(t, err)
		if status != http.StatusAccepted {
			t.Fatalf("PUT instance %s: %d %s; want 202", tn.instance, status, answer)
		}
	}
	for _, tn := range tenants {
		states := pollLastOperation(t, broker, "/v2/service_instances/"+tn.instance+"/last_operation", func() string { return logLines(dir, tn.instance, "kcp") })
		if states[len(states)-1] != "succeeded" {
			t.Fatalf("last_operation of %s: %v; want succeeded (its Sample Ready)", tn.instance, states)
		}
		kubeconfigs[tn.instance] = bindSample(t, broker, tn.instance)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfigs[tn.instance])
		must(t, err)
		tn.host = cfg.Host
		_, path, ok := strings.Cut(cfg.Host, "/clusters/root:")
		if !ok || !strings.HasPrefix(cfg.Host, fmt.Sprintf("https://127.0.0.1:%d/", running.KCP.SecurePort)) {
			t.Fatalf("the binding of %s points at %s; want a workspace of kcp (https://127.0.0.1:%d/clusters/root:...)", tn.instance, cfg.Host, running.KCP.SecurePort)
		}
		tn.workspace = path
	}
	a, b := tenants[0], tenants[1]
	if a.workspace == b.workspace {
		t.Fatalf("both instances got workspace %s", a.workspace)
	}

	t.Run("each MCP is a Cluster of the kcp backend, a Workspace of kcp", func(t *testing.T) {
		for _, tn := range tenants {
			c := clusterServing(t, platform, tn.host)
			if c.Annotations[backendAnnotation] != landscape.BackendKCP || c.Spec.Profile != landscape.KCPProfile {
				t.Errorf("Cluster %s of %s: annotations %v, profile %q; want %s=%s and profile %s", c.Name, tn.instance, c.Annotations, c.Spec.Profile,
					backendAnnotation, landscape.BackendKCP, landscape.KCPProfile)
			}
			ws, err := admin.Resource(kcpWorkspaces).Get(ctx, tn.workspace, metav1.GetOptions{})
			must(t, err)
			if phase, _, _ := unstructured.NestedString(ws.Object, "status", "phase"); phase != "Ready" {
				t.Errorf("Workspace %s: phase %q; want Ready", tn.workspace, phase)
			}
		}
	})

	t.Run("the kcp provider reads its Clusters' Secrets and no others", func(t *testing.T) {
		// As the provider's run ServiceAccount, with the rights the
		// operator gave it and nothing the landscape added.
		cfg, err := clientcmd.BuildConfigFromFlags("", running.Clusters[landscape.ClusterPlatform].Kubeconfig)
		must(t, err)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + kcpNamespace + ":" + kcpNamespace}
		provider, err := client.New(cfg, client.Options{Scheme: platform.Scheme()})
		must(t, err)
		own := clusterServing(t, platform, b.host)
		if own.Namespace != kcpNamespace {
			t.Errorf("Cluster %s of %s is in namespace %s; want the provider's %s", own.Name, b.instance, own.Namespace, kcpNamespace)
		}
		if err := provider.Get(ctx, client.ObjectKey{Namespace: own.Namespace, Name: own.Annotations[clusters.KubeconfigSecretAnnotation]}, &corev1.Secret{}); err != nil {
			t.Errorf("the kcp provider gets the kubeconfig Secret of its Cluster %s/%s: %v; want allowed", own.Namespace, own.Name, err)
		}
		onboarding := client.ObjectKey{Namespace: landscape.Namespace, Name: landscape.ClusterOnboarding + localcluster.SecretSuffix}
		if err := provider.Get(ctx, onboarding, &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Errorf("the kcp provider gets the onboarding cluster's admin kubeconfig %s: %v; want Forbidden", onboarding, err)
		}
		for _, ns := range []string{landscape.Namespace, "sp-sample"} {
			if err := provider.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
				t.Errorf("the kcp provider lists the Secrets of namespace %s: %v; want Forbidden", ns, err)
			}
		}
	})

	t.Run("a binding reads its own workspace and is refused in the other's", func(t *testing.T) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "domain.sample.services.openmcp.cloud/v1alpha1", "kind": "SampleObject",
			"metadata": map[string]any{"name": "only-in-a"}, "spec": map[string]any{},
		}}
		ca := bindingDynamic(t, kubeconfigs[a.instance], "")
		_, err := ca.Resource(sampleObjects).Namespace(corev1.NamespaceDefault).Create(ctx, obj, metav1.CreateOptions{})
		must(t, err)
		list, err := ca.Resource(sampleObjects).Namespace(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		must(t, err)
		if len(list.Items) != 1 || list.Items[0].GetName() != "only-in-a" {
			t.Errorf("A's binding lists %d SampleObjects in A's workspace; want only-in-a", len(list.Items))
		}
		// A's token, sent to B's workspace; B's, to A's.
		for _, c := range []struct {
			who, kubeconfig, host string
		}{{a.instance, string(kubeconfigs[a.instance]), b.host}, {b.instance, string(kubeconfigs[b.instance]), a.host}} {
			_, err := bindingDynamic(t, []byte(c.kubeconfig), c.host).Resource(sampleObjects).Namespace(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
				t.Errorf("the binding of %s lists SampleObjects at %s: %v; want 403 or 401", c.who, c.host, err)
			}
		}
		list, err = bindingDynamic(t, kubeconfigs[b.instance], "").Resource(sampleObjects).Namespace(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		must(t, err)
		if len(list.Items) != 0 {
			t.Errorf("B's binding lists %d SampleObjects in B's workspace; want none (A's object is in A's)", len(list.Items))
		}
		// The Sample's deletion waits for the tenant's SampleObjects.
		must(t, ca.Resource(sampleObjects).Namespace(corev1.NamespaceDefault).Delete(ctx, "only-in-a", metav1.DeleteOptions{}))
	})

	t.Run("status --tree shows kcp and its workspaces", func(t *testing.T) {
		if rss, err := supervisor.ResidentMemory(running.KCP.Process.PID); err == nil {
			t.Logf("resident memory of kcp with two workspaces: %d MiB", rss>>20)
		}
		out := runCLI(t, "landscape", "status", "--state-dir", dir, "--tree")
		t.Logf("status --tree:\n%s", out)
		for _, want := range []string{"kcp", "every MCP is a workspace", "Workspace " + a.workspace, "Workspace " + b.workspace} {
			if !strings.Contains(out, want) {
				t.Errorf("status --tree lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("deprovision removes the Cluster and the Workspace", func(t *testing.T) {
		c := clusterServing(t, platform, a.host)
		status, answer, err := brokerCall(ctx, broker, http.MethodDelete,
			"/v2/service_instances/"+a.instance+fmt.Sprintf("?service_id=%s&plan_id=%s&accepts_incomplete=true", sampleOfferingID, samplePlanID), "")
		must(t, err)
		if status != http.StatusAccepted {
			t.Fatalf("DELETE instance: %d %s; want 202", status, answer)
		}
		// With the operation: a code-based instance that is gone is 410
		// for it, 404 without.
		states := pollLastOperation(t, broker, "/v2/service_instances/"+a.instance+"/last_operation?operation=deprovision", func() string { return logLines(dir, a.instance, c.Name) })
		if last := states[len(states)-1]; last != "succeeded" && last != "gone" {
			t.Fatalf("last_operation of the deprovision: %v; want succeeded (or 410 Gone)", states)
		}
		waitForWithin(t, provisionTimeout, "the Cluster of the deprovisioned instance gone", func(ctx context.Context) (bool, error) {
			err := platform.Get(ctx, client.ObjectKeyFromObject(c), &clustersv1alpha1.Cluster{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}, func() string { return logLines(dir, c.Name) })
		var last error
		waitFor(t, "the Workspace of the deprovisioned instance gone", func(ctx context.Context) (bool, error) {
			_, last = admin.Resource(kcpWorkspaces).Get(ctx, a.workspace, metav1.GetOptions{})
			return apierrors.IsNotFound(last), nil
		}, func() string { return fmt.Sprint(last) })
	})

	t.Run("stop ends kcp, start resumes it with the workspace", func(t *testing.T) {
		before := readState(t, dir)
		runCLI(t, "landscape", "stop", "--state-dir", dir)
		checkNothingLeft(t, before)
		if s := readState(t, dir); s.KCP == nil || s.KCP.Process != nil || s.MCPBackend != landscape.BackendKCP {
			t.Fatalf("state after stop: backend %q, kcp %+v; want kcp recorded, not running", s.MCPBackend, s.KCP)
		}
		begin := time.Now()
		runCLI(t, "landscape", "start", "--state-dir", dir, "--bin-dir", bin, "--start-timeout", startTimeout.String())
		t.Logf("start-up ('landscape start' after 'stop', kcp backend): %s", time.Since(begin).Round(10*time.Millisecond))
		if s := readState(t, dir); s.KCP == nil || !controlplane.Alive(s.KCP.Process) || s.KCP.SecurePort != running.KCP.SecurePort {
			t.Fatalf("kcp after start: %+v; want it running on port %d", s.KCP, running.KCP.SecurePort)
		}
		cb := bindingDynamic(t, kubeconfigs[b.instance], "")
		var last error
		waitForWithin(t, provisionTimeout, "B's binding to read its workspace after start", func(ctx context.Context) (bool, error) {
			_, last = cb.Resource(sampleObjects).Namespace(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			return last == nil, nil
		}, func() string { return fmt.Sprint(last) })
	})
}

// kcpBinaries returns a binary directory with the whole landscape's
// binaries, kcp (from bin/, `make tools`) and the kcp ClusterProvider.
func kcpBinaries(t *testing.T) string {
	t.Helper()
	stackDir := stackBinaries(t)
	if _, err := os.Stat(filepath.Join(stackDir, landscape.KCPBinary)); err != nil {
		t.Fatalf("%v: bin/%s is missing (run 'make tools')", err, landscape.KCPBinary)
	}
	dir := t.TempDir()
	must(t, linkTools(stackDir, dir))
	testenv.BuildBinaries(t, dir, "github.com/marketplane/marketplane/cmd/"+landscape.KCPProviderBinary)
	return dir
}

// kcpAdmin returns a dynamic client of kcp's root workspace.
func kcpAdmin(t *testing.T, kubeconfig string) *dynamic.DynamicClient {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	must(t, err)
	c, err := dynamic.NewForConfig(cfg)
	must(t, err)
	return c
}

// bindingDynamic returns a dynamic client with a binding's kubeconfig,
// sent to host instead when host is set.
func bindingDynamic(t *testing.T, kubeconfig []byte, host string) *dynamic.DynamicClient {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	must(t, err)
	if host != "" {
		cfg = rest.CopyConfig(cfg)
		cfg.Host = host
	}
	c, err := dynamic.NewForConfig(cfg)
	must(t, err)
	return c
}

// bindSample binds instance through the broker and returns the
// credentials' kubeconfig.
func bindSample(t *testing.T, broker stack.BrokerInfo, instance string) []byte {
	t.Helper()
	var status int
	var answer []byte
	waitForWithin(t, provisionTimeout, "bind "+instance, func(ctx context.Context) (bool, error) {
		var err error
		status, answer, err = brokerCall(ctx, broker, http.MethodPut, "/v2/service_instances/"+instance+"/service_bindings/b-"+instance,
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, sampleOfferingID, samplePlanID))
		// 503 with Retry-After: the AccessRequest is not granted yet.
		return err == nil && status != http.StatusServiceUnavailable, err
	}, func() string { return fmt.Sprintf("%d %s", status, answer) })
	if status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("PUT binding of %s: %d %s; want 201", instance, status, answer)
	}
	var resp struct {
		Credentials struct {
			Kubeconfig string `json:"kubeconfig"`
		} `json:"credentials"`
	}
	must(t, json.Unmarshal(answer, &resp))
	return []byte(resp.Credentials.Kubeconfig)
}

// clusterServing returns the Cluster on the platform cluster, in any
// namespace, whose admin kubeconfig names host.
func clusterServing(t *testing.T, platform client.Client, host string) *clustersv1alpha1.Cluster {
	t.Helper()
	list := &clustersv1alpha1.ClusterList{}
	must(t, platform.List(t.Context(), list))
	var seen []string
	for i := range list.Items {
		c := &list.Items[i]
		name := c.Annotations[clusters.KubeconfigSecretAnnotation]
		if name == "" {
			continue
		}
		secret := &corev1.Secret{}
		if err := platform.Get(t.Context(), client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); err != nil {
			continue
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clusters.KubeconfigSecretKey])
		if err != nil {
			continue
		}
		seen = append(seen, c.Name+" → "+cfg.Host)
		if strings.TrimSuffix(cfg.Host, "/") == strings.TrimSuffix(host, "/") {
			return c
		}
	}
	t.Fatalf("no Cluster serves %s; Clusters: %v", host, seen)
	return nil
}
