// Package compat tests that a service provider written only on openMCP's
// own libraries runs on Marketplane unchanged: deployed by the operator
// through init/run with the process deployer, used by tenants through
// ControlPlane and ManagedControlPlane, ready, serving its DomainServiceAPI
// in each control plane, and deleted without leaving anything behind.
package compat

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
	"github.com/marketplane/marketplane/test/openmcp-compat/internal/controller"
)

// providerName and providerImage are the ServiceProvider under test. The
// image does not exist anywhere: the process deployer maps it to the
// binary TestMain builds.
const (
	providerName  = "compat"
	providerImage = "registry.invalid/openmcp-compat/provider:v0.1.0"
)

// timeout bounds each wait; a loaded 2-core CI machine starts processes
// and API servers slowly.
const timeout = 4 * time.Minute

var (
	// landscape is TestOpenMCPProvider's, started by startLandscape.
	landscape *providertest.Landscape
	// binary is the compatibility provider, built by TestMain.
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// Under -short (make test-unit) nothing here runs: the tests need the
	// provider and API servers, so the provider is not built.
	if flag.Parse(); testing.Short() {
		return m.Run()
	}
	// The landscape's controllers log nothing; on failure a test prints
	// the provider's own logs.
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "openmcp-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "compat-provider")
	// Stripped, as Marketplane's test builds are: linking costs less.
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", binary, "./cmd/compat-provider")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the compatibility provider:", err)
		return 1
	}
	return m.Run()
}

// startLandscape starts the landscape of TestOpenMCPProvider and stops it
// when the test ends: each test has its own, so that a run of one test
// starts no API servers for the other, and the two never run at once.
func startLandscape(t *testing.T) {
	t.Helper()
	l, err := providertest.New(
		providertest.WithMCPClusters(2),
		providertest.WithWorkloadCluster(),
		providertest.WithProviderImages(map[string]string{providerImage: binary}),
		providertest.WithWaitTimeout(timeout),
	)
	if err != nil {
		t.Fatal(err)
	}
	landscape = l
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("stop the landscape: %v", err)
		}
	})
}

// TestOpenMCPProvider is the whole life of the provider: deploy, two
// tenants (one per control-plane kind), use, delete.
func TestOpenMCPProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("deploys a provider on a landscape of API servers; run without -short")
	}
	startLandscape(t)
	ctx := t.Context()
	platform, onboarding := landscape.Platform.Client, landscape.Onboarding.Client

	// The provider asks what openMCP's template asks; the platform
	// operator grants it all but the roleRefs to cluster-admin at first.
	policy := templateGrant()
	roleRefs := policy.RoleRefs
	policy.RoleRefs = nil
	sp := &providerv1alpha1.ServiceProvider{
		ObjectMeta: metav1.ObjectMeta{Name: providerName},
		Spec:       providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: providerImage, AccessPolicy: policy}},
	}
	must(t, platform.Create(ctx, sp))
	waitFor(t, "the ServiceProvider to be Ready with Echo registered by its init", func(ctx context.Context) (bool, string, error) {
		if err := platform.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, "", err
		}
		ready := apimeta.IsStatusConditionTrue(sp.Status.Conditions, "Ready")
		registered := len(sp.Status.Resources) == 1 && sp.Status.Resources[0].Kind == "Echo"
		return ready && registered, fmt.Sprintf("conditions %s, resources %v", conditions(sp.Status.Conditions), sp.Status.Resources), nil
	})

	// The ProviderConfig, as its platform operator writes it; its CRD was
	// installed on the platform cluster by the provider's init.
	pc := &unstructured.Unstructured{}
	pc.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ProviderConfig"))
	pc.SetName(providerName)
	must(t, unstructured.SetNestedField(pc.Object, "10s", "spec", "pollInterval"))
	must(t, platform.Create(ctx, pc))

	tenants := []*providertest.MCP{
		landscape.CreateControlPlane(t, "tenant-a", "team-a"),
		landscape.CreateMCP(t, "tenant-b", "team-b"),
	}
	for _, mcp := range tenants {
		echo := &unstructured.Unstructured{}
		echo.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Echo"))
		echo.SetName(mcp.Name)
		echo.SetNamespace(mcp.Namespace)
		must(t, unstructured.SetNestedField(echo.Object, "hello "+mcp.Name, "spec", "message"))
		must(t, onboarding.Create(ctx, echo))
	}
	// Without the roleRefs grant the control-plane requests are denied,
	// and the ServiceProvider says which and by what rule.
	waitFor(t, "the ServiceProvider to name its denied control-plane request", func(ctx context.Context) (bool, string, error) {
		if err := platform.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, "", err
		}
		c := apimeta.FindStatusCondition(sp.Status.Conditions, "RequestsGranted")
		want := advanced.StableRequestName(providerName, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: tenants[0].Namespace, Name: tenants[0].Name}}, "mcp")
		done := c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, want) &&
			strings.Contains(c.Message, `rule "no Kubernetes admin roles"`) && strings.Contains(c.Message, "spec.accessPolicy.roleRefs.mcp")
		return done, conditions(sp.Status.Conditions), nil
	})
	// The platform operator adds the roleRefs; openMCP's library keeps
	// waiting and gets its access.
	base := sp.DeepCopy()
	sp.Spec.AccessPolicy.RoleRefs = roleRefs
	must(t, platform.Patch(ctx, sp, client.MergeFrom(base)))
	for _, mcp := range tenants {
		checkTenant(t, mcp)
	}
	waitFor(t, "the ServiceProvider to report no denied request", func(ctx context.Context) (bool, string, error) {
		if err := platform.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, "", err
		}
		return apimeta.IsStatusConditionTrue(sp.Status.Conditions, "RequestsGranted"), conditions(sp.Status.Conditions), nil
	})
	checkNoClusterAdmin(t)

	for _, mcp := range tenants {
		deleteEcho(t, mcp)
	}
	landscape.DeleteControlPlane(t, tenants[0].Name, tenants[0].Namespace)
	landscape.DeleteMCP(t, tenants[1].Name, tenants[1].Namespace)
	deleteProvider(t, sp)
}

// checkTenant waits until the tenant's Echo is Ready and checks what the
// provider did for it: the Greeting API in the control plane (usable by
// the tenant), the namespace on the workload cluster, and its requests in
// the control plane's platform namespace as openMCP computes it.
func checkTenant(t *testing.T, mcp *providertest.MCP) {
	t.Helper()
	onboarding := landscape.Onboarding.Client
	echo := &unstructured.Unstructured{}
	echo.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Echo"))
	key := client.ObjectKey{Namespace: mcp.Namespace, Name: mcp.Name}
	waitFor(t, "Echo "+key.String()+" to be Ready", func(ctx context.Context) (bool, string, error) {
		if err := onboarding.Get(ctx, key, echo); err != nil {
			return false, "", err
		}
		conds, _, _ := unstructured.NestedSlice(echo.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %v", conds), nil
	})

	ctx := t.Context()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	must(t, mcp.Client.Get(ctx, client.ObjectKey{Name: controller.GreetingCRDName}, crd))
	greeting := &unstructured.Unstructured{}
	greeting.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Greeting"))
	must(t, mcp.Client.Get(ctx, client.ObjectKey{Namespace: controller.GreetingNamespace, Name: controller.GreetingName}, greeting))
	if msg, _, _ := unstructured.NestedString(greeting.Object, "spec", "message"); msg != "hello "+mcp.Name {
		t.Errorf("Greeting in the control plane of %s says %q, want %q", key, msg, "hello "+mcp.Name)
	}
	// The DomainServiceAPI works for the tenant, with the tenant's own access.
	own := &unstructured.Unstructured{}
	own.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Greeting"))
	own.SetName("from-the-tenant")
	own.SetNamespace(controller.GreetingNamespace)
	must(t, unstructured.SetNestedField(own.Object, "hi", "spec", "message"))
	must(t, mcp.Client.Create(ctx, own))

	cm := &corev1.ConfigMap{}
	must(t, landscape.Workload.Client.Get(ctx, client.ObjectKey{Namespace: controller.WorkloadNamespace(mcp.Namespace, mcp.Name), Name: "greeting"}, cm))
	if cm.Data["message"] != "hello "+mcp.Name {
		t.Errorf("workload ConfigMap of %s says %q", key, cm.Data["message"])
	}
	// The shared workload cluster knows whose namespace it is: no other
	// provider gets Roles in it or writes there.
	workloadNS := &corev1.Namespace{}
	must(t, landscape.Workload.Client.Get(ctx, client.ObjectKey{Name: controller.WorkloadNamespace(mcp.Namespace, mcp.Name)}, workloadNS))
	if got, want := workloadNS.Labels[access.NamespaceOwnerLabel], access.ProviderID("ServiceProvider", providerName); got != want {
		t.Errorf("workload namespace %s is labelled %s=%q, want %q", workloadNS.Name, access.NamespaceOwnerLabel, got, want)
	}

	namespace, err := libutils.StableMCPNamespace(mcp.Name, mcp.Namespace)
	must(t, err)
	ars := &clustersv1alpha1.AccessRequestList{}
	must(t, landscape.Platform.Client.List(ctx, ars, client.InNamespace(namespace), client.MatchingLabels{"openmcp.cloud/managed-by": providerName}))
	if len(ars.Items) != 2 {
		t.Errorf("want the provider's two AccessRequests (control plane, workload) in %s, the namespace openMCP computes for %s; got %d", namespace, key, len(ars.Items))
	}
	for _, ar := range ars.Items {
		if ar.Status.Phase != clustersv1alpha1.RequestGranted {
			t.Errorf("AccessRequest %s/%s is %s: %s", ar.Namespace, ar.Name, ar.Status.Phase, conditions(ar.Status.Conditions))
		}
	}

	// The provider's identity in the control plane exists and is
	// cluster-admin there, as the template asks and the grant allows.
	ar := &clustersv1alpha1.AccessRequest{}
	must(t, landscape.Platform.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: advanced.StableRequestName(providerName, reconcile.Request{NamespacedName: key}, "mcp")}, ar))
	// Named after the provider: the admission policies on the control
	// plane know the provider by it; a binder's, since `*/*/*` holds bind
	// on every ClusterRole.
	sa := access.BinderServiceAccountNameFor(ar, access.ProviderID("ServiceProvider", providerName))
	must(t, mcp.Admin.Client.Get(ctx, client.ObjectKey{Namespace: access.AccessNamespace, Name: sa}, &corev1.ServiceAccount{}))
	bound := false
	for _, crb := range clusterAdminBindings(t, mcp.Admin.Client) {
		for _, s := range crb.Subjects {
			bound = bound || s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == access.AccessNamespace
		}
	}
	if !bound {
		t.Errorf("control plane of %s: no ClusterRoleBinding binds the provider's ServiceAccount %s to cluster-admin, which its granted roleRef asks", key, sa)
	}
}

// templateGrant is the platform operator's grant for what openMCP's
// service-provider-template asks, as docs/openmcp-compat.md shows it.
func templateGrant() *providerv1alpha1.AccessPolicy {
	all := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	return &providerv1alpha1.AccessPolicy{
		Secrets:    providerv1alpha1.SecretAccessClusterWide,
		Onboarding: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"*"}}},
		MCP:        all,
		Workload:   all,
		RoleRefs:   &providerv1alpha1.RoleRefGrants{MCP: []string{"cluster-admin"}, Workload: []string{"cluster-admin"}},
	}
}

// checkNoClusterAdmin fails when any ServiceAccount on the platform or
// the onboarding cluster is bound to cluster-admin, or on the workload
// cluster any but the provider's granted requests'.
func checkNoClusterAdmin(t *testing.T) {
	t.Helper()
	targets := map[string]client.Client{"platform": landscape.Platform.Client, "onboarding": landscape.Onboarding.Client, "workload": landscape.Workload.Client}
	for name, c := range targets {
		for _, crb := range clusterAdminBindings(t, c) {
			for _, s := range crb.Subjects {
				granted := name == "workload" && s.Namespace == access.AccessNamespace &&
					strings.HasSuffix(s.Name, "."+access.ProviderID("ServiceProvider", providerName))
				if s.Kind == rbacv1.ServiceAccountKind && !granted {
					t.Errorf("%s cluster: ClusterRoleBinding %s binds ServiceAccount %s/%s to cluster-admin", name, crb.Name, s.Namespace, s.Name)
				}
			}
		}
	}
}

// clusterAdminBindings lists the ClusterRoleBindings to cluster-admin.
func clusterAdminBindings(t *testing.T, c client.Client) []rbacv1.ClusterRoleBinding {
	t.Helper()
	crbs := &rbacv1.ClusterRoleBindingList{}
	must(t, c.List(t.Context(), crbs))
	var admin []rbacv1.ClusterRoleBinding
	for _, crb := range crbs.Items {
		if crb.RoleRef.Kind == "ClusterRole" && crb.RoleRef.Name == "cluster-admin" {
			admin = append(admin, crb)
		}
	}
	return admin
}

// deleteEcho deletes the tenant's Echo and waits until the provider has
// removed the Greeting API and its own requests.
func deleteEcho(t *testing.T, mcp *providertest.MCP) {
	t.Helper()
	echo := &unstructured.Unstructured{}
	echo.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Echo"))
	echo.SetName(mcp.Name)
	echo.SetNamespace(mcp.Namespace)
	must(t, landscape.Onboarding.Client.Delete(t.Context(), echo))
	namespace, err := libutils.StableMCPNamespace(mcp.Name, mcp.Namespace)
	must(t, err)
	waitFor(t, "Echo "+mcp.Namespace+"/"+mcp.Name+", its Greeting CRD and its requests to be gone", func(ctx context.Context) (bool, string, error) {
		if err := landscape.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(echo), echo); !apierrors.IsNotFound(err) {
			return false, "the Echo still exists", client.IgnoreNotFound(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := mcp.Client.Get(ctx, client.ObjectKey{Name: controller.GreetingCRDName}, crd); !apierrors.IsNotFound(err) {
			return false, "the Greeting CRD is still in the control plane", client.IgnoreNotFound(err)
		}
		for _, list := range []client.ObjectList{&clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}} {
			if err := landscape.Platform.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"openmcp.cloud/managed-by": providerName}); err != nil {
				return false, "", err
			}
			if n := apimeta.LenList(list); n > 0 {
				return false, fmt.Sprintf("%d %T of the provider left in %s", n, list, namespace), nil
			}
		}
		return true, "", nil
	})
}

// deleteProvider deletes the ServiceProvider and checks that nothing of it
// remains: its namespace, RBAC, requests and processes.
func deleteProvider(t *testing.T, sp *providerv1alpha1.ServiceProvider) {
	t.Helper()
	platform := landscape.Platform.Client
	must(t, platform.Delete(t.Context(), sp))
	waitFor(t, "the ServiceProvider, its namespace, RBAC and processes to be gone", func(ctx context.Context) (bool, string, error) {
		if err := platform.Get(ctx, client.ObjectKeyFromObject(sp), sp); !apierrors.IsNotFound(err) {
			return false, "the ServiceProvider still exists: " + conditions(sp.Status.Conditions), client.IgnoreNotFound(err)
		}
		selector := client.MatchingLabels{"openmcp.cloud/provider-name": providerName}
		for _, list := range []client.ObjectList{&corev1.NamespaceList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
			if err := platform.List(ctx, list, selector); err != nil {
				return false, "", err
			}
			if n := apimeta.LenList(list); n > 0 {
				return false, fmt.Sprintf("%d %T of the provider left", n, list), nil
			}
		}
		if pids := running(binary); len(pids) > 0 {
			return false, fmt.Sprintf("provider processes still running: %v", pids), nil
		}
		return true, "", nil
	})
}

// running returns the processes whose executable is path.
func running(path string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == path {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitFor polls check until it reports done, failing the test after
// timeout with what was waited for, the last state seen and the tail of
// the provider's logs.
func waitFor(t *testing.T, what string, check func(context.Context) (done bool, state string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var state string
	var lastErr error
	for {
		done, s, err := check(ctx)
		if done && err == nil {
			return
		}
		state, lastErr = s, err
		select {
		case <-ctx.Done():
			t.Fatalf("waited %s for %s; last state: %s; last error: %v\nrequests on the platform cluster:\n%s\n%s", timeout, what, state, lastErr, requests(), logTail())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// requests describes every ClusterRequest and AccessRequest on the
// platform cluster: where a provider waits, the reason is there.
func requests() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	crs := &clustersv1alpha1.ClusterRequestList{}
	if err := landscape.Platform.Client.List(ctx, crs); err != nil {
		return err.Error()
	}
	for _, cr := range crs.Items {
		fmt.Fprintf(&b, "ClusterRequest %s/%s %s: %s\n", cr.Namespace, cr.Name, cr.Status.Phase, conditions(cr.Status.Conditions))
	}
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := landscape.Platform.Client.List(ctx, ars); err != nil {
		return err.Error()
	}
	for _, ar := range ars.Items {
		fmt.Fprintf(&b, "AccessRequest %s/%s %s: %s\n", ar.Namespace, ar.Name, ar.Status.Phase, conditions(ar.Status.Conditions))
	}
	return b.String()
}

// logTail returns the last lines of every provider log file.
func logTail() string {
	var b strings.Builder
	_ = filepath.WalkDir(landscape.ProviderLogDir(), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		fmt.Fprintf(&b, "--- %s (last lines)\n%s\n", path, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		return nil
	})
	return b.String()
}

func conditions(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
