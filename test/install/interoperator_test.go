package install

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// interoperatorPackage is the inter-operator's main package.
const interoperatorPackage = "github.com/marketplane/marketplane/cmd/marketplane-interoperator"

// interoperatorInitNotReached and interoperatorRunNotReached are the
// permissions the inter-operator's init and run ServiceAccounts hold (from
// the operator's provider roles, internal/operator/provider/rbac.go, and the
// chart's interoperator-rbac.yaml) that TestInterOperatorInCluster does not
// use although a code path of the inter-operator needs them, keyed as
// grant.key names them ("verb resource.group in namespace" or
// "cluster-wide"), each with that code path and why the scenario (the
// chart's default values: catalog namespace interoperator; one SFCluster
// from a kubeconfig Secret, one service and plan, one instance with one
// binding provisioned and removed; no workload Clusters) does not get
// there. Anything else the chart grants and the scenario does not use
// fails the test: it is more than the inter-operator's code asks for. What
// the operator grants every provider by the provider contract and the
// inter-operator does not use is listed in the test's log, not failed.
var (
	interoperatorInitNotReached = map[string]string{
		// pkg/crdinstall.Apply creates a CRD only when it is missing: here
		// the chart's crds/ created them first, as `helm install` does.
		"create customresourcedefinitions.apiextensions.k8s.io cluster-wide": "init on a cluster without the CRD (helm --skip-crds, a new CRD in an upgrade)",
	}
	interoperatorRunNotReached = map[string]string{
		// The initial list of an informer: client-go streams it as a watch
		// (sendInitialEvents), so only "watch" is requested; it falls back
		// to "list" where the API server does not stream lists.
		"list sfservices.osb.servicefabrik.io cluster-wide":                      "informer's initial list, streamed as a watch",
		"list sfplans.osb.servicefabrik.io cluster-wide":                         "informer's initial list, streamed as a watch",
		"list sfclusters.resource.servicefabrik.io cluster-wide":                 "informer's initial list, streamed as a watch",
		"list providerconfigs.interoperator.services.openmcp.cloud cluster-wide": "informer's initial list, streamed as a watch",
		"list clusters.clusters.openmcp.cloud cluster-wide":                      "informer's initial list, streamed as a watch",
		"list accessrequests.clusters.openmcp.cloud cluster-wide":                "informer's initial list, streamed as a watch",

		// An event recorder patches an event that repeats (its series
		// count); no event repeats in the scenario.
		"patch events cluster-wide":               "event recorder, repeated event",
		"patch events.events.k8s.io cluster-wide": "event recorder, repeated event",
		// The leader election's events (core events in its namespace).
		"patch events in sp-interoperator": "event recorder, repeated event",

		// spec.workloadClusters of the ProviderConfig: the workload Cluster
		// reconciler (internal/interoperator/clusters/openmcp.go) requests
		// access to each matching openMCP Cluster with an AccessRequest in
		// the catalog namespace (create, patch, delete) and registers it as
		// an SFCluster there (create, delete); the chart's ProviderConfig
		// names no workload Clusters.
		"create accessrequests.clusters.openmcp.cloud in interoperator": "workload Cluster reconciler: no spec.workloadClusters",
		"patch accessrequests.clusters.openmcp.cloud in interoperator":  "workload Cluster reconciler: no spec.workloadClusters",
		"delete accessrequests.clusters.openmcp.cloud in interoperator": "workload Cluster reconciler: no spec.workloadClusters",
		"create sfclusters.resource.servicefabrik.io in interoperator":  "workload Cluster reconciler: no spec.workloadClusters",
		"delete sfclusters.resource.servicefabrik.io in interoperator":  "workload Cluster reconciler: no spec.workloadClusters",

		// pkg/clusteraccess updates an existing AccessRequest whose
		// permissions differ from what run asks for (a new version with
		// other rules); the scenario's run creates its request.
		"update accessrequests.clusters.openmcp.cloud in sp-interoperator": "clusteraccess: an AccessRequest of an earlier version with other permissions",
	}
)

// interoperatorChart is what the chart renders for the inter-operator: its
// ServiceProvider (which the operator deploys), its ProviderConfig, the
// catalog namespace and the RBAC the chart adds for its run ServiceAccount.
type interoperatorChart struct {
	ServiceProvider *providerv1alpha1.ServiceProvider
	ProviderConfig  *unstructured.Unstructured
	// Objects are all of them, in the order to create them (namespaces
	// first).
	Objects []*unstructured.Unstructured
}

// interoperatorObjects picks the inter-operator's objects out of the
// rendered chart: those of component interoperator.
func interoperatorObjects(t *testing.T, objs []*unstructured.Unstructured) *interoperatorChart {
	t.Helper()
	ic := &interoperatorChart{}
	var rest []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetLabels()["app.kubernetes.io/component"] != "interoperator" {
			continue
		}
		switch u.GetKind() {
		case "Namespace":
			ic.Objects = append(ic.Objects, u)
			continue
		case "ServiceProvider":
			ic.ServiceProvider = &providerv1alpha1.ServiceProvider{}
			fromUnstructured(t, u, ic.ServiceProvider)
		case "ProviderConfig":
			ic.ProviderConfig = u
		}
		rest = append(rest, u)
	}
	ic.Objects = append(ic.Objects, rest...)
	if ic.ServiceProvider == nil || ic.ProviderConfig == nil {
		t.Fatalf("the chart renders no ServiceProvider and ProviderConfig of component interoperator (%d objects of it)", len(ic.Objects))
	}
	return ic
}

// TestInterOperatorInCluster starts the operator as TestOperatorInCluster
// does (in-cluster, the chart's RBAC only), registers the test's API server
// as the onboarding cluster, applies the chart's inter-operator objects and
// runs the marketplane-interoperator binary as the operator's init Job and
// run Deployment would run it: with their arguments and environment and
// the token of their ServiceAccount, in-cluster. The inter-operator then
// provisions, binds, unbinds and deprovisions an instance on an SFCluster
// (the same API server). The audit log shows, for both of its
// ServiceAccounts, that nothing was refused, that everything the chart's
// interoperator-rbac grants them was used (or is listed in
// interoperatorInitNotReached and interoperatorRunNotReached with its
// reason) with no wildcard and no cluster-admin, and lists what the
// operator's provider-contract roles grant and the inter-operator leaves
// unused.
func TestInterOperatorInCluster(t *testing.T) {
	testenv.SkipIfShort(t)
	objs, err := charts.Render(charts.WithExampleRegistry(nil))
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	oc := operatorObjects(t, objs)
	ic := interoperatorObjects(t, objs)

	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, operatorPackage, interoperatorPackage)
	apiArgs, auditLog := auditArgs(t, dir)
	c := testenv.Start(t, testenv.WithName("install-io"), testenv.WithCRDs(), testenv.WithControllerManager(),
		testenv.WithAPIServerArgs(apiArgs...))
	oc.install(t, c)
	operatorRunning := startOperatorInCluster(t, c, oc, dir)
	registerOnboardingCluster(t, c, oc.ServiceAccount.Namespace, operatorRunning)

	ctx := t.Context()
	for _, u := range ic.Objects {
		if err := c.Client.Create(ctx, u.DeepCopy()); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	sp := ic.ServiceProvider
	base := "sp-" + sp.Name
	ioOut := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("inter-operator output ends:\n%s", tail(ioOut.String(), 12000))
		}
	})
	pc := runProviderInCluster(t, c, filepath.Join(dir, "marketplane-interoperator"), base, "inter-operator", ic.Objects, operatorRunning, ioOut)
	initSA, runSA, running, metricsPort := pc.initSA, pc.runSA, pc.running, pc.metricsPort
	eventually(t, "ServiceProvider "+sp.Name+" Ready", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for Ready")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, err.Error(), nil
		}
		cond := apimeta.FindStatusCondition(sp.Status.Conditions, string(providerv1alpha1.ConditionReady))
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == sp.Generation,
			fmt.Sprintf("generation %d, conditions %+v", sp.Generation, sp.Status.Conditions), nil
	})

	catalogNamespace, _, _ := unstructured.NestedString(ic.ProviderConfig.Object, "spec", "catalogNamespace")
	scenario := t.Run("ProvisionsAndBinds", func(t *testing.T) { provisionAndBind(t, c, catalogNamespace, running) })
	t.Run("MetricsAuthorizedByPlatform", func(t *testing.T) {
		if metricsPort == "" {
			t.Fatal("the chart's inter-operator serves no metrics, which the chart's alerts and dashboard read")
		}
		checkChartMetrics(t, "interoperator", scrapeMetrics(t, c, metricsPort))
	})
	running(t, "before the audit log was read")

	// The chart's roles for the inter-operator are held to what its code
	// uses; the roles the operator gives every provider by the provider
	// contract (internal/operator/provider/rbac.go: its namespace's
	// Secrets, ConfigMaps, Leases and events, its requests, reading its own
	// API groups) are checked for refusals only, and their unused part is
	// listed.
	chartRoles := map[string]bool{}
	for _, o := range ic.Objects {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
			chartRoles[o.GetName()] = true
		}
	}
	for _, sa := range []struct {
		account    *corev1.ServiceAccount
		notReached map[string]string
	}{{initSA, interoperatorInitNotReached}, {runSA, interoperatorRunNotReached}} {
		t.Run("RBACAsUsed/"+sa.account.Name, func(t *testing.T) {
			granted := grantedTo(t, c, sa.account)
			fromChart := granted.only(chartRoles)
			t.Run("NoWildcardsNoClusterAdmin", fromChart.checkNoWildcards)
			user := serviceaccount.MakeUsername(sa.account.Namespace, sa.account.Name)
			checkGrantsUsed(t, user, granted, readAudit(t, auditLog, user), scenario, sa.notReached, func(g grant) bool { return chartRoles[g.role()] })
		})
	}
}

// providerInCluster is a provider the test runs as the operator's init Job
// and run Deployment would run it (runProviderInCluster).
type providerInCluster struct {
	initSA, runSA *corev1.ServiceAccount
	// metricsPort is the run process's metrics port ("" when off).
	metricsPort string
	// running fails the test when the operator or the run process exited.
	running func(t *testing.T, what string)
}

// runProviderInCluster runs binary, the provider whose objects the operator
// deploys into the namespace base, as the operator's init Job and a pod of
// its run Deployment would: with their arguments and environment, the
// tokens of their ServiceAccounts and the in-cluster configuration. It
// completes the Job after init succeeded, checks that every binding among
// chartObjects binds the run ServiceAccount, and marks the Deployment
// available once run started. who names the provider in messages.
func runProviderInCluster(t *testing.T, c *testenv.Cluster, binary, base, who string, chartObjects []*unstructured.Unstructured, operatorRunning func(*testing.T, string), out *testenv.SyncBuffer) providerInCluster {
	t.Helper()
	job := &batchv1.Job{}
	eventually(t, "the init Job "+base+"/"+base+"-init", func(ctx context.Context) (bool, string, error) {
		operatorRunning(t, "while waiting for the init Job")
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: base, Name: base + "-init"}, job); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	initPod := job.Spec.Template.Spec
	initSA := waitServiceAccountGranted(t, c, base, initPod.ServiceAccountName, operatorRunning)
	initContainer := initPod.Containers[0]
	noKubeconfigFlag(t, initContainer)
	if err := runPodProcess(t, binary, initContainer.Args, podEnvOf(t, c, initContainer, base, job.Name+"-pod", initPod.ServiceAccountName, who),
		writeCredentials(t, c, t.TempDir(), base, serviceAccountToken(t, c, initSA)), out, initTimeout); err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(binary), strings.Join(initContainer.Args, " "), err)
	}
	completeJob(t, c, job)

	dep := &appsv1.Deployment{}
	eventually(t, "the run Deployment "+base+"/"+base, func(ctx context.Context) (bool, string, error) {
		operatorRunning(t, "while waiting for the run Deployment")
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: base, Name: base}, dep); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	runPod := dep.Spec.Template.Spec
	runSA := waitServiceAccountGranted(t, c, base, runPod.ServiceAccountName, operatorRunning)
	runContainer := runPod.Containers[0]
	noKubeconfigFlag(t, runContainer)
	chartBindsRunServiceAccount(t, chartObjects, who, grantedTo(t, c, runSA))
	runArgs, metricsPort := providerPorts(t, runContainer.Args)
	proc := startPodProcess(t, binary, runArgs, podEnvOf(t, c, runContainer, base, dep.Name+"-pod", runPod.ServiceAccountName, who),
		writeCredentials(t, c, t.TempDir(), base, serviceAccountToken(t, c, runSA)), out)
	running := func(t *testing.T, what string) {
		t.Helper()
		operatorRunning(t, what)
		if done, err := proc.exited(); done {
			t.Fatalf("the %s exited (%v) %s", who, err, what)
		}
	}
	markAvailable(t, c, dep)
	return providerInCluster{initSA: initSA, runSA: runSA, metricsPort: metricsPort, running: running}
}

// startOperatorInCluster runs `marketplane-operator init` and `run` as
// TestOperatorInCluster does, and returns a function that fails the test
// when the operator has exited.
func startOperatorInCluster(t *testing.T, c *testenv.Cluster, oc *operatorChart, dir string) func(*testing.T, string) {
	t.Helper()
	binary := filepath.Join(dir, "marketplane-operator")
	creds := writeCredentials(t, c, t.TempDir(), oc.ServiceAccount.Namespace, serviceAccountToken(t, c, oc.ServiceAccount))
	out := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator output ends:\n%s", tail(out.String(), 12000))
		}
	})
	initContainer := oc.container(t, "init", true)
	if err := runPodProcess(t, binary, initContainer.Args, podEnv(t, c, oc, initContainer, "init"), creds, out, initTimeout); err != nil {
		t.Fatalf("marketplane-operator %s: %v", strings.Join(initContainer.Args, " "), err)
	}
	runContainer := oc.container(t, "operator", false)
	runArgs, _ := argsWithPorts(t, runContainer.Args, "--metrics-bind-address", "--health-probe-bind-address")
	operator := startPodProcess(t, binary, runArgs, podEnv(t, c, oc, runContainer, "run"), creds, out)
	return func(t *testing.T, what string) {
		t.Helper()
		if done, err := operator.exited(); done {
			t.Fatalf("the operator exited (%v) %s", err, what)
		}
	}
}

// registerOnboardingCluster registers the test's API server as the
// onboarding cluster, as docs/install.md does (an admin kubeconfig in a
// Secret of the operator's namespace, a Cluster of purpose onboarding), and
// waits until the operator found it Ready. Providers get their access to it
// through AccessRequests the operator grants.
func registerOnboardingCluster(t *testing.T, c *testenv.Cluster, namespace string, running func(*testing.T, string)) {
	t.Helper()
	ctx := t.Context()
	const secretName = "onboarding-kubeconfig"
	if err := c.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName},
		Data:       map[string][]byte{clusters.KubeconfigSecretKey: c.Kubeconfig},
	}); err != nil {
		t.Fatalf("create onboarding kubeconfig Secret: %v", err)
	}
	cluster := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "onboarding",
			Annotations: map[string]string{clusters.KubeconfigSecretAnnotation: secretName}},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "static", Purposes: []string{clustersv1alpha1.PurposeOnboarding}, Tenancy: clustersv1alpha1.TenancyShared},
	}
	if err := c.Client.Create(ctx, cluster); err != nil {
		t.Fatalf("create onboarding Cluster: %v", err)
	}
	eventually(t, "Cluster "+cluster.Name+" Ready", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the onboarding Cluster")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return false, err.Error(), nil
		}
		return apimeta.IsStatusConditionTrue(cluster.Status.Conditions, common.ConditionTypeReady), fmt.Sprintf("conditions %+v", cluster.Status.Conditions), nil
	})
}

// waitServiceAccountGranted waits until the operator created the
// ServiceAccount namespace/name and bound a ClusterRole and a Role to it,
// as it does before it creates the pods that run as it, and returns it.
func waitServiceAccountGranted(t *testing.T, c *testenv.Cluster, namespace, name string, running func(*testing.T, string)) *corev1.ServiceAccount {
	t.Helper()
	if name == "" {
		t.Fatalf("the operator's pod template in %s names no ServiceAccount", namespace)
	}
	sa := &corev1.ServiceAccount{}
	eventually(t, "ServiceAccount "+namespace+"/"+name+" with its roles", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the provider's ServiceAccount")
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa); err != nil {
			return false, err.Error(), nil
		}
		g := grantedTo(t, c, sa)
		return len(g.ClusterRoleBindings) > 0 && len(g.RoleBindings) > 0,
			fmt.Sprintf("%d ClusterRoleBindings, %d RoleBindings", len(g.ClusterRoleBindings), len(g.RoleBindings)), nil
	})
	return sa
}

// noKubeconfigFlag fails t when container's args name a kubeconfig of the
// platform or the onboarding cluster: the inter-operator must use the
// in-cluster configuration and get the onboarding cluster through an
// AccessRequest.
func noKubeconfigFlag(t *testing.T, container corev1.Container) {
	t.Helper()
	for _, a := range container.Args {
		if strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--onboarding-kubeconfig") {
			t.Fatalf("container %s: args %q name a kubeconfig: the inter-operator must use the in-cluster configuration", container.Name, container.Args)
		}
	}
}

// chartBindsRunServiceAccount fails t unless every binding among the
// chart's objects for a provider (who) binds the run ServiceAccount the
// operator created (granted holds that ServiceAccount's bindings): a
// binding to another name would grant nothing.
func chartBindsRunServiceAccount(t *testing.T, objs []*unstructured.Unstructured, who string, granted *operatorChart) {
	t.Helper()
	for _, u := range objs {
		kind := u.GetKind()
		if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
			continue
		}
		found := slices.ContainsFunc(granted.ClusterRoleBindings, func(b *rbacv1.ClusterRoleBinding) bool {
			return kind == "ClusterRoleBinding" && b.Name == u.GetName()
		}) || slices.ContainsFunc(granted.RoleBindings, func(b *rbacv1.RoleBinding) bool {
			return kind == "RoleBinding" && b.Namespace == u.GetNamespace() && b.Name == u.GetName()
		})
		if !found {
			t.Errorf("the chart's %s %s does not bind the %s's run ServiceAccount %s/%s", kind, client.ObjectKeyFromObject(u), who,
				granted.ServiceAccount.Namespace, granted.ServiceAccount.Name)
		}
	}
}

// grantedTo reads from the API server every binding with sa as a subject
// and the roles they refer to, as an operatorChart (the shape the package's
// RBAC checks take).
// only returns the part of c that the roles named in roles grant: those
// roles and their bindings.
func (c *operatorChart) only(roles map[string]bool) *operatorChart {
	out := &operatorChart{Component: c.Component, ServiceAccount: c.ServiceAccount}
	for _, r := range c.ClusterRoles {
		if roles[r.Name] {
			out.ClusterRoles = append(out.ClusterRoles, r)
		}
	}
	for _, r := range c.Roles {
		if roles[r.Name] {
			out.Roles = append(out.Roles, r)
		}
	}
	for _, b := range c.ClusterRoleBindings {
		if roles[b.RoleRef.Name] {
			out.ClusterRoleBindings = append(out.ClusterRoleBindings, b)
		}
	}
	for _, b := range c.RoleBindings {
		if roles[b.RoleRef.Name] {
			out.RoleBindings = append(out.RoleBindings, b)
		}
	}
	return out
}

// role is the name of the role a grant comes from (From is "<kind> <name>
// by <binding>").
func (g grant) role() string {
	if f := strings.Fields(g.From); len(f) > 1 {
		return f[1]
	}
	return ""
}

func grantedTo(t *testing.T, c *testenv.Cluster, sa *corev1.ServiceAccount) *operatorChart {
	t.Helper()
	ctx := t.Context()
	is := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.Name && s.Namespace == sa.Namespace
		})
	}
	g := &operatorChart{ServiceAccount: sa}
	crbs, rbs := &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleBindingList{}
	if err := c.Client.List(ctx, crbs); err != nil {
		t.Fatalf("list ClusterRoleBindings: %v", err)
	}
	if err := c.Client.List(ctx, rbs); err != nil {
		t.Fatalf("list RoleBindings: %v", err)
	}
	clusterRoles := map[string]bool{}
	for i := range crbs.Items {
		if b := &crbs.Items[i]; is(b.Subjects) {
			g.ClusterRoleBindings = append(g.ClusterRoleBindings, b)
			clusterRoles[b.RoleRef.Name] = true
		}
	}
	for i := range rbs.Items {
		b := &rbs.Items[i]
		if !is(b.Subjects) {
			continue
		}
		g.RoleBindings = append(g.RoleBindings, b)
		if b.RoleRef.Kind == "ClusterRole" {
			clusterRoles[b.RoleRef.Name] = true
			continue
		}
		r := &rbacv1.Role{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.RoleRef.Name}, r); err != nil {
			t.Fatalf("get Role %s/%s of RoleBinding %s: %v", b.Namespace, b.RoleRef.Name, b.Name, err)
		}
		g.Roles = append(g.Roles, r)
	}
	for _, name := range sortedKeys(clusterRoles) {
		r := &rbacv1.ClusterRole{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, r); err != nil {
			t.Fatalf("get ClusterRole %s: %v", name, err)
		}
		g.ClusterRoles = append(g.ClusterRoles, r)
	}
	return g
}

// podEnvOf is the environment of container in a pod of namespace
// called podName that runs as serviceAccount: what the kubelet sets and the
// container's env with its field references resolved. HOME is an empty
// directory, so that no kubeconfig of the machine is found.
func podEnvOf(t *testing.T, c *testenv.Cluster, container corev1.Container, namespace, podName, serviceAccount, who string) []string {
	t.Helper()
	env := append([]string{"HOSTNAME=" + podName, "HOME=" + t.TempDir()}, inClusterEnv(t, c)...)
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			value := map[string]string{
				"metadata.namespace":      namespace,
				"metadata.name":           podName,
				"spec.serviceAccountName": serviceAccount,
				"status.podIP":            "127.0.0.1",
			}[e.ValueFrom.FieldRef.FieldPath]
			if value == "" {
				t.Fatalf("container %s: env %s: field %s is not supported by the test", container.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env = append(env, e.Name+"="+value)
		default:
			t.Fatalf("container %s: env %s: only values and field references are supported by the test", container.Name, e.Name)
		}
	}
	for _, e := range env {
		if strings.HasPrefix(e, "KUBECONFIG=") {
			t.Fatalf("the pod's environment sets %s: the %s must use the in-cluster configuration", e, who)
		}
	}
	return env
}

// providerPorts returns a provider's run args with free ports: the
// metrics address keeps the pod's host (":<port>": an exposed endpoint,
// served over HTTPS to authorized tokens only, where a loopback one is
// plain HTTP) on a free port, which it returns; health probes, when set,
// get port 0. Without a metrics flag the binary's default would be a fixed
// loopback port, so metrics are turned off. The chart's ports are the pod's
// own, not the test machine's.
func providerPorts(t *testing.T, args []string) (out []string, metricsPort string) {
	t.Helper()
	out, metricsPort = argsWithPorts(t, args, "--metrics-bind-address", "--health-probe-bind-address")
	if !slices.ContainsFunc(out, func(a string) bool { return strings.HasPrefix(a, "--metrics-bind-address=") }) {
		out = append(out, "--metrics-bind-address=0")
	}
	return out, metricsPort
}

// completeJob marks job complete, as the Job controller would once its pod
// succeeded.
func completeJob(t *testing.T, c *testenv.Cluster, job *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := c.Client.Status().Update(t.Context(), job); err != nil {
		t.Fatalf("mark the init Job %s complete: %v", client.ObjectKeyFromObject(job), err)
	}
}

// markAvailable marks dep rolled out and available, as the Deployment
// controller would.
func markAvailable(t *testing.T, c *testenv.Cluster, dep *appsv1.Deployment) {
	t.Helper()
	r := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
	if err := c.Client.Status().Update(t.Context(), dep); err != nil {
		t.Fatalf("mark the run Deployment %s available: %v", client.ObjectKeyFromObject(dep), err)
	}
}

// Plan of TestInterOperatorInCluster: provision renders a ConfigMap, bind a
// ConfigMap, status answers with the instance's and the binding's names as
// the credentials.
const (
	ioProvisionTemplate = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: payload-{{ .instance.metadata.name }}\ndata:\n  instance: {{ .instance.metadata.name }}\n"
	ioBindTemplate      = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cred-{{ .binding.metadata.name }}\ndata:\n  user: {{ .binding.metadata.name }}\n"
	ioStatusTemplate    = `provision:
  state: succeeded
  response: provisioned
{{- with .binding }}
bind:
  state: succeeded
  response: {{ mustToJson (dict "credentials" (dict "user" .metadata.name)) | squote }}
{{- end }}
`
)

// provisionAndBind registers the test's API server as the SFCluster
// "target" in the catalog namespace, creates a service and a plan, and
// records an instance and a binding as the broker does (its finalizer on
// both, in the instance's own namespace on the onboarding cluster); it
// waits until both succeeded, deletes the binding and the instance and,
// playing the broker, removes the broker's finalizer once the
// inter-operator removed its own, until both are gone.
func provisionAndBind(t *testing.T, c *testenv.Cluster, catalog string, running func(*testing.T, string)) {
	ctx := t.Context()
	const serviceID, planID, instanceID, bindingID = "io-install-svc", "io-install-plan", "io-install-instance", "io-install-binding"
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog, Name: "target-kubeconfig"},
		Data:       map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: c.Kubeconfig},
	})
	create(&resourcev1alpha1.SFCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog, Name: "target"},
		Spec:       resourcev1alpha1.SFClusterSpec{SecretRef: "target-kubeconfig"},
	})
	create(&osbv1alpha1.SFService{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog, Name: serviceID},
		Spec:       osbv1alpha1.SFServiceSpec{ID: serviceID, Name: serviceID, Description: "install test service", Bindable: true},
	})
	gotemplate := func(action osbv1alpha1.TemplateAction, content string) osbv1alpha1.TemplateSpec {
		return osbv1alpha1.TemplateSpec{Action: action, Type: osbv1alpha1.TypeGoTemplate, Content: content}
	}
	create(&osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog, Name: planID},
		Spec: osbv1alpha1.SFPlanSpec{ID: planID, Name: planID, ServiceID: serviceID, Description: "install test plan",
			Free: true, Bindable: true, Templates: []osbv1alpha1.TemplateSpec{
				gotemplate(osbv1alpha1.ActionProvision, ioProvisionTemplate),
				gotemplate(osbv1alpha1.ActionBind, ioBindTemplate),
				gotemplate(osbv1alpha1.ActionStatus, ioStatusTemplate),
			}},
	})

	instKey, bindKey := sf.InstanceKey(instanceID), sf.BindingKey(instanceID, bindingID)
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: instKey.Namespace,
		Labels:      map[string]string{sf.LabelManagedBy: sf.ManagedByBroker},
		Annotations: map[string]string{sf.AnnotationInstanceID: instanceID}}})
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: instKey.Namespace, Name: instKey.Name, Finalizers: []string{osbv1alpha1.FinalizerBroker}},
		Spec: osbv1alpha1.SFServiceInstanceSpec{InstanceID: instanceID, ServiceID: serviceID, PlanID: planID,
			OrganizationGUID: "org", SpaceGUID: "space"},
	}
	create(inst)
	waitSucceeded(t, c, inst, running, func() osbv1alpha1.State { return inst.Status.State })
	b := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: bindKey.Namespace, Name: bindKey.Name,
			Finalizers: []string{osbv1alpha1.FinalizerBroker, osbv1alpha1.FinalizerProvisioner}},
		Spec: osbv1alpha1.SFServiceBindingSpec{ID: bindingID, InstanceID: instanceID, PlanID: planID, ServiceID: serviceID},
	}
	create(b)
	waitSucceeded(t, c, b, running, func() osbv1alpha1.State { return b.Status.State })
	if b.Status.Response == nil || b.Status.Response.SecretRef == "" {
		t.Errorf("binding %s succeeded without a bind response Secret: %+v", bindKey, b.Status)
	}

	for _, obj := range []client.Object{b, inst} {
		if err := c.Client.Delete(ctx, obj); err != nil {
			t.Fatalf("delete %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
		eventually(t, fmt.Sprintf("%T %s gone", obj, client.ObjectKeyFromObject(obj)), func(ctx context.Context) (bool, string, error) {
			running(t, "while waiting for the deletion")
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			// The broker's reaper lets go once only its finalizer is left.
			if fs := obj.GetFinalizers(); len(fs) == 1 && fs[0] == osbv1alpha1.FinalizerBroker {
				controllerutil.RemoveFinalizer(obj, osbv1alpha1.FinalizerBroker)
				if err := c.Client.Update(ctx, obj); err != nil {
					return false, err.Error(), nil
				}
			}
			return false, fmt.Sprintf("finalizers %q", obj.GetFinalizers()), nil
		})
	}
}

// waitSucceeded waits until obj (an instance or a binding, whose state
// reads) is in state succeeded.
func waitSucceeded(t *testing.T, c *testenv.Cluster, obj client.Object, running func(*testing.T, string), state func() osbv1alpha1.State) {
	t.Helper()
	eventually(t, fmt.Sprintf("%T %s succeeded", obj, client.ObjectKeyFromObject(obj)), func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the operation")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error(), nil
		}
		if state() == osbv1alpha1.StateFailed {
			return false, "", fmt.Errorf("%T %s failed: %+v", obj, client.ObjectKeyFromObject(obj), obj)
		}
		return state() == osbv1alpha1.StateSucceeded, fmt.Sprintf("state %q", state()), nil
	})
}

// checkGrantsUsed checks user's requests against what granted grants it:
// none refused, none allowed by anything but granted, no non-resource URL
// granted, every grant used or in
// notReached, keyed by grant.key (and every entry of notReached still
// granted and unused). A grant of every resource of a group ("*", which
// checkNoWildcards reports) counts as used by any request in that group.
// As checkRBACAsUsed, the second check needs the whole scenario (complete).
func checkGrantsUsed(t *testing.T, user string, granted *operatorChart, requests []auditRequest, complete bool, notReached map[string]string, strict func(grant) bool) {
	t.Helper()
	if len(requests) == 0 {
		t.Fatalf("the audit log holds no request of %s", user)
	}
	t.Logf("requests of %s (resource, verb, namespace, count):\n%s", user, namespacedUsageTable(requests))

	// (a) Nothing refused.
	denied := map[string]int{}
	for _, r := range requests {
		if r.Code == 403 || r.Decision == "forbid" || (r.Code == 422 && strings.Contains(r.Message, "Forbidden") && strings.Contains(r.Message, "permission")) {
			denied[fmt.Sprintf("%s: %d %s %s", r, r.Code, r.Decision, r.Message)]++
		}
	}
	for _, d := range sortedKeys(denied) {
		t.Errorf("denied (%d times): %s", denied[d], d)
	}

	// Every resource request the API server allowed is allowed by the
	// roles read: otherwise the ServiceAccount has rights from somewhere
	// else (a binding to one of its groups, say), which (b) cannot see.
	grants, nonResource := granted.grants()
	outside := map[string]int{}
	for _, r := range requests {
		if r.Resource != "" && r.Decision == "allow" && !slices.ContainsFunc(grants, func(g grant) bool { return grantAllows(g, r) }) {
			outside[fmt.Sprintf("%s (%s)", r, r.Reason)]++
		}
	}
	for _, o := range sortedKeys(outside) {
		t.Errorf("allowed by the API server but by none of the roles bound to %s (%d times): %s", user, outside[o], o)
	}

	// (b) Everything granted used, or listed.
	if !complete {
		t.Log("the scenario failed: not checking that every permission granted was used")
		return
	}
	for _, nr := range nonResource {
		t.Errorf("%s is granted the non-resource URL %s, which it never requests", user, nr)
	}
	unused := map[string][]string{}
	used, strictKey := map[string]bool{}, map[string]bool{}
	for _, g := range grants {
		if slices.ContainsFunc(requests, func(r auditRequest) bool { return grantAllows(g, r) }) {
			used[g.key()] = true
			continue
		}
		unused[g.key()] = append(unused[g.key()], g.From)
		if strict(g) {
			strictKey[g.key()] = true
		}
	}
	var contract []string
	for _, key := range sortedKeys(unused) {
		if used[key] {
			continue // granted twice, used through the other grant
		}
		if _, ok := notReached[key]; ok {
			continue
		}
		if !strictKey[key] {
			contract = append(contract, key+" (from "+strings.Join(unused[key], "; ")+")")
			continue
		}
		t.Errorf("granted but never used: %s (from %s)", key, strings.Join(unused[key], "; "))
	}
	if len(contract) > 0 {
		t.Logf("granted by the provider contract to every provider, not used by %s:\n  %s", user, strings.Join(contract, "\n  "))
	}
	for _, key := range sortedKeys(notReached) {
		switch {
		case used[key]:
			// Some entries depend on timing (an event that repeats, a
			// list the API server did not stream): used in this run is
			// no reason to fail, only to say so.
			t.Logf("the not-reached list lists %q, which this run used", key)
		case unused[key] == nil:
			t.Errorf("the not-reached list lists %q (%s), which is not granted: if the code still needs it, the grant is missing; otherwise remove the entry", key, notReached[key])
		}
	}
}

// namespacedUsageTable is usageTable with the namespace of each request
// ("-" for cluster-scoped ones and URLs).
func namespacedUsageTable(requests []auditRequest) string {
	counts := map[string]int{}
	for _, r := range requests {
		ns := cmp.Or(r.Namespace, "-")
		key := r.URL + "\t" + r.Verb + "\t-"
		if r.Resource != "" {
			key = groupResource(r.Group, r.Resource) + "\t" + r.Verb + "\t" + ns
		}
		counts[key]++
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, k := range sortedKeys(counts) {
		fmt.Fprintf(w, "  %s\t%d\n", k, counts[k])
	}
	_ = w.Flush()
	return b.String()
}

// grantAllows is grant.matches where a resource "*" allows every resource
// (and subresource) of the grant's group, as RBAC reads it.
func grantAllows(g grant, r auditRequest) bool {
	if g.Resource == "*" && r.Resource != "" {
		g.Resource = r.Resource
	}
	return g.matches(r)
}
