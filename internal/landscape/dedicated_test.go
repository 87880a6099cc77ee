package landscape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/stack"
)

// The sample dedicated-cluster service's ids
// (examples/catalog/service-dedicated-cluster.yaml, plan-dedicated-cluster.yaml).
const (
	dedicatedServiceID = "dadd0e18-c636-4b5b-aeda-5f1dc01e861a"
	dedicatedPlanID    = "b4e273b2-fc22-4289-95d2-195b556e97b2"
)

// TestDedicatedClusterPlan runs the sample's dedicated-cluster plan through
// the landscape's broker, as a marketplace does: provision answers 202 and
// last_operation goes from "in progress" to "succeeded" once the local
// cluster provider has started a kube-apiserver for the instance's
// ClusterRequest; bind returns a kubeconfig that works against that new
// cluster (and only within the plan's rules); unbind revokes it; deprovision
// stops the cluster and removes its Cluster. It also checks what the plan
// renders through: the SFCluster's identity may not read Secrets outside
// its namespace, nor write requests where the operator does not police
// them, and what it requests in its namespace is policed with the
// inter-operator's access policy. (Ids that are no DNS labels never reach the plan through the
// broker, which names objects by a hash of such ids;
// TestSampleDedicatedClusterPlan checks that the plan refuses them.)
func TestDedicatedClusterPlan(t *testing.T) {
	requireBinaries(t)
	useSharedStack(t)
	t.Parallel()
	ctx := t.Context()
	// The shared landscape: what this test creates is its own (the
	// instance, its binding and cluster, the probe) and it stops nothing.
	l, dir := sharedStack(t)
	var broker stack.BrokerInfo
	raw, err := os.ReadFile(filepath.Join(dir, stack.BrokerCredentialsFile))
	must(t, err)
	must(t, json.Unmarshal(raw, &broker))

	t.Run("the SFCluster's identity reaches nothing but its namespace", func(t *testing.T) {
		secret := &corev1.Secret{}
		must(t, l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: stack.CatalogNamespace, Name: "dedicated-clusters-kubeconfig"}, secret))
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["kubeconfig"])
		must(t, err)
		scheme, err := install.NewScheme()
		must(t, err)
		ident, err := client.New(cfg, client.Options{Scheme: scheme})
		must(t, err)
		if err := ident.List(ctx, &corev1.SecretList{}, client.InNamespace(stack.DedicatedClustersNamespace)); err != nil {
			t.Errorf("list Secrets in %s: %v; want allowed", stack.DedicatedClustersNamespace, err)
		}
		for _, ns := range []string{landscape.Namespace, stack.CatalogNamespace, "default"} {
			if err := ident.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
				t.Errorf("list Secrets in %s: %v; want Forbidden", ns, err)
			}
		}
		other := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "default"},
			Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP}}
		if err := ident.Create(ctx, other); !apierrors.IsForbidden(err) {
			t.Errorf("create a ClusterRequest in default (not policed): %v; want Forbidden", err)
		}
		// Where it may write, the operator polices what it asks for with
		// the inter-operator's policy: reading every Secret of the
		// onboarding cluster is beyond the ceiling.
		probe := &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: sharedName("probe"), Namespace: stack.DedicatedClustersNamespace},
			Spec: clustersv1alpha1.AccessRequestSpec{
				ClusterRef: &common.ObjectReference{Name: landscape.ClusterOnboarding, Namespace: landscape.Namespace},
				Token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}},
				}}},
			},
		}
		must(t, ident.Create(ctx, probe))
		waitFor(t, "the operator to deny an AccessRequest beyond the inter-operator's ceiling", func(ctx context.Context) (bool, error) {
			if err := ident.Get(ctx, client.ObjectKeyFromObject(probe), probe); err != nil {
				return false, err
			}
			return probe.Status.Phase != "" && !probe.Status.IsPending(), nil
		}, func() string { return fmt.Sprintf("%+v", probe.Status) })
		if !probe.Status.IsDenied() {
			t.Errorf("AccessRequest for all Secrets of the onboarding cluster: %+v; want Denied (the namespace is policed)", probe.Status)
		}
		must(t, ident.Delete(ctx, probe))
		waitGone(t, ident, probe)
	})

	var (
		instance = sharedName("dc-1")
		request  = &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: instance, Namespace: stack.DedicatedClustersNamespace}}
		cluster  *controlplane.Cluster
		kubecfg  []byte
	)
	t.Run("provision answers 202 and last_operation goes in progress, then succeeded", func(t *testing.T) {
		status, answer, err := brokerCall(ctx, broker, http.MethodPut, "/v2/service_instances/"+instance+"?accepts_incomplete=true",
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`, dedicatedServiceID, dedicatedPlanID))
		must(t, err)
		if status != http.StatusAccepted {
			t.Fatalf("PUT instance: %d %s; want 202 (an asynchronous plan)", status, answer)
		}
		begin := time.Now()
		states := pollLastOperation(t, broker, "/v2/service_instances/"+instance+"/last_operation", func() string { return logLines(dir, instance) })
		t.Logf("dedicated cluster: 202 to succeeded in %s, last_operation states %v", time.Since(begin).Round(100*time.Millisecond), states)
		if !slices.Contains(states, "in progress") || states[len(states)-1] != "succeeded" {
			t.Fatalf("last_operation states %v; want in progress, then succeeded", states)
		}
		must(t, l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(request), request))
		if !request.Status.IsGranted() || request.Status.Cluster == nil {
			t.Fatalf("ClusterRequest %s/%s: %+v; want Granted with a cluster", request.Namespace, request.Name, request.Status)
		}
		cluster = l.State().Clusters[request.Status.Cluster.Name]
		if cluster == nil || cluster.Request == nil || cluster.Request.UID != string(request.UID) || !controlplane.Alive(cluster.APIServer) {
			t.Fatalf("state records %+v for %s; want a running API server for the request", cluster, request.Status.Cluster.Name)
		}
	})
	if cluster == nil {
		t.FailNow()
	}

	bindPath := "/v2/service_instances/" + instance + "/service_bindings/b-1"
	t.Run("bind returns a kubeconfig for the new cluster", func(t *testing.T) {
		var boundCluster string
		kubecfg, boundCluster = bindDedicated(ctx, t, broker, bindPath)
		if boundCluster != cluster.Name {
			t.Errorf("credentials name cluster %q; want %q", boundCluster, cluster.Name)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubecfg)
		must(t, err)
		if !strings.HasSuffix(cfg.Host, ":"+strconv.Itoa(cluster.Port)) {
			t.Fatalf("the kubeconfig points at %s; want the dedicated cluster's port %d", cfg.Host, cluster.Port)
		}
		c, err := client.New(cfg, client.Options{})
		must(t, err)
		nss := &corev1.NamespaceList{}
		must(t, c.List(ctx, nss))
		if len(nss.Items) == 0 {
			t.Error("the dedicated cluster lists no namespaces")
		}
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-app"}}))
		if err := l.Platform.Client.Get(ctx, client.ObjectKey{Name: "tenant-app"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("a namespace created with the binding's kubeconfig shows on the platform cluster: %v", err)
		}
		// Within the plan's rules: no RBAC, so no way to grant itself more.
		if err := c.List(ctx, &rbacv1.ClusterRoleBindingList{}); !apierrors.IsForbidden(err) {
			t.Errorf("list ClusterRoleBindings with the binding's kubeconfig: %v; want Forbidden", err)
		}
	})
	if kubecfg == nil {
		t.FailNow()
	}

	t.Run("unbind revokes the kubeconfig", func(t *testing.T) {
		status, answer, err := brokerCall(ctx, broker, http.MethodDelete,
			bindPath+fmt.Sprintf("?service_id=%s&plan_id=%s", dedicatedServiceID, dedicatedPlanID), "")
		must(t, err)
		if status != http.StatusOK {
			t.Fatalf("DELETE binding: %d %s; want 200", status, answer)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubecfg)
		must(t, err)
		c, err := client.New(cfg, client.Options{})
		must(t, err)
		var last error
		waitFor(t, "the unbound kubeconfig to be refused", func(ctx context.Context) (bool, error) {
			last = c.List(ctx, &corev1.NamespaceList{})
			return apierrors.IsUnauthorized(last), nil
		}, func() string { return fmt.Sprint(last) })
		ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: instance + ".b-1", Namespace: stack.DedicatedClustersNamespace}}
		if err := l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(ar), ar); !apierrors.IsNotFound(err) {
			t.Errorf("AccessRequest %s after unbind: %v; want NotFound", ar.Name, err)
		}
	})

	t.Run("deprovision releases the cluster", func(t *testing.T) {
		status, answer, err := brokerCall(ctx, broker, http.MethodDelete,
			"/v2/service_instances/"+instance+fmt.Sprintf("?service_id=%s&plan_id=%s&accepts_incomplete=true", dedicatedServiceID, dedicatedPlanID), "")
		must(t, err)
		if status != http.StatusAccepted {
			t.Fatalf("DELETE instance: %d %s; want 202", status, answer)
		}
		states := pollLastOperation(t, broker, "/v2/service_instances/"+instance+"/last_operation", func() string {
			cr := &clustersv1alpha1.ClusterRequest{}
			err := l.Platform.Client.Get(context.Background(), client.ObjectKeyFromObject(request), cr)
			return fmt.Sprintf("ClusterRequest %s: %v, finalizers %v, deletion %v, status %+v; %s", request.Name, err, cr.Finalizers, cr.DeletionTimestamp, cr.Status, logLines(dir, request.Name, cluster.Name))
		})
		if last := states[len(states)-1]; last != "succeeded" && last != "gone" {
			t.Fatalf("last_operation of the deprovision: %v; want succeeded (or 410 Gone)", states)
		}
		waitGone(t, l.Platform.Client, request)
		if controlplane.Alive(cluster.APIServer) || controlplane.Alive(cluster.ControllerManager) {
			t.Error("the dedicated cluster's processes still run after deprovision")
		}
		if err := controlplane.CheckPortFree(cluster.Port, "the released cluster"); err != nil {
			t.Error(err)
		}
		c := &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cluster.Name, Namespace: landscape.Namespace}}
		if err := l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(c), c); !apierrors.IsNotFound(err) {
			t.Errorf("Cluster %s after deprovision: %v; want NotFound", c.Name, err)
		}
	})
}

// pollLastOperation polls path (a last_operation) until its state is no
// longer "in progress" and returns the states it saw, in order, without
// repeats; "gone" stands for 410 Gone (a deprovisioned instance). Starting
// a cluster on a loaded machine takes a while: it waits up to startTimeout.
// bindDedicated binds through the broker at bindPath, requires 201 (the
// dedicated plan binds synchronously), and returns the credentials'
// kubeconfig and the name of the cluster they reach.
func bindDedicated(ctx context.Context, t *testing.T, broker stack.BrokerInfo, bindPath string) ([]byte, string) {
	t.Helper()
	status, answer, err := brokerCall(ctx, broker, http.MethodPut, bindPath,
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, dedicatedServiceID, dedicatedPlanID))
	must(t, err)
	if status != http.StatusCreated {
		t.Fatalf("PUT binding: %d %s; want 201 (synchronous binding)", status, answer)
	}
	var resp struct {
		Credentials struct {
			Kubeconfig string `json:"kubeconfig"`
			Cluster    string `json:"cluster"`
		} `json:"credentials"`
	}
	must(t, json.Unmarshal(answer, &resp))
	return []byte(resp.Credentials.Kubeconfig), resp.Credentials.Cluster
}

func pollLastOperation(t *testing.T, broker stack.BrokerInfo, path string, describe func() string) []string {
	t.Helper()
	var states []string
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		status, answer, err := brokerCall(ctx, broker, http.MethodGet, path, "")
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%d %s", status, answer)
		state := "gone"
		if status != http.StatusGone {
			var op struct {
				State string `json:"state"`
			}
			if status != http.StatusOK || json.Unmarshal(answer, &op) != nil {
				return false, nil
			}
			state = op.State
		}
		if len(states) == 0 || states[len(states)-1] != state {
			states = append(states, state)
		}
		return state != "in progress", nil
	})
	if err != nil {
		t.Fatalf("last_operation %s: %v; states %v, last answer %s; %s", path, err, states, last, describe())
	}
	return states
}

// logLines returns the lines of the landscape's logs under dir that
// mention any of words, at most the last 40, for a failure message.
func logLines(dir string, words ...string) string {
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			files = append(files, path)
		}
		return nil
	})
	var lines []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			for _, w := range words {
				if strings.Contains(line, w) {
					lines = append(lines, filepath.Base(f)+": "+line)
					break
				}
			}
		}
	}
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return "log lines:\n" + strings.Join(lines, "\n")
}
