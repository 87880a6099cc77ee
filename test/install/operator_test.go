package install

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/deploy/kube"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/internal/operator/provider"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// operatorPackage is the operator's main package.
const operatorPackage = "github.com/marketplane/marketplane/cmd/marketplane-operator"

// Generous: CI is a loaded two-core machine.
const (
	initTimeout = 2 * time.Minute
	waitTimeout = 2 * time.Minute
)

// TestOperatorInCluster installs the chart's CRDs and the operator's RBAC
// into a real API server that keeps an audit log, runs `marketplane-operator
// init` and `run` with the arguments of the chart's Deployment as a pod
// would (in-cluster configuration only), and shows that the operator
// installs, reports Ready and removes a ServiceProvider with the Kubernetes
// deployer. It then checks the chart's RBAC against the audit log: nothing
// the operator asked for was denied, and everything granted was used.
func TestOperatorInCluster(t *testing.T) {
	testenv.SkipIfShort(t)
	objs, err := charts.Render(charts.WithExampleRegistry(nil))
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	oc := operatorObjects(t, objs)
	t.Run("NoWildcardsNoClusterAdmin", oc.checkNoWildcards)

	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, operatorPackage)
	binary := filepath.Join(dir, "marketplane-operator")
	apiArgs, auditLog := auditArgs(t, dir)
	// The controller manager plays the namespace controller (the operator
	// waits until a provider's namespace is gone) and the garbage
	// collector; the test plays the kubelet and the Job and Deployment
	// controllers.
	c := testenv.Start(t, testenv.WithName("install"), testenv.WithCRDs(), testenv.WithControllerManager(),
		testenv.WithAPIServerArgs(apiArgs...))
	oc.install(t, c)

	ns, sa := oc.ServiceAccount.Namespace, oc.ServiceAccount.Name
	creds := writeCredentials(t, c, dir, ns, serviceAccountToken(t, c, oc.ServiceAccount))
	out := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator output ends:\n%s", tail(out.String(), 12000))
		}
	})

	// The pod's files are provided in the process's own mount namespace:
	// what the host has at that path must be the same afterwards.
	hostBefore := hostServiceAccountDir(t)
	t.Cleanup(func() {
		if after := hostServiceAccountDir(t); after != hostBefore {
			t.Errorf("the host's %s changed: before %q, after %q", filepath.Dir(process.ServiceAccountNamespaceFile), hostBefore, after)
		}
	})

	initContainer := oc.container(t, "init", true)
	for _, c := range []corev1.Container{initContainer, oc.container(t, "operator", false)} {
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--kubeconfig") }) {
			t.Fatalf("container %s: args %q name a kubeconfig: the operator must use the in-cluster configuration", c.Name, c.Args)
		}
	}
	initEnv := podEnv(t, c, oc, initContainer, "init")
	if err := runPodProcess(t, binary, initContainer.Args, initEnv, creds, out, initTimeout); err != nil {
		t.Fatalf("marketplane-operator %s: %v", strings.Join(initContainer.Args, " "), err)
	}

	runContainer := oc.container(t, "operator", false)
	runArgs, metricsPort := argsWithPorts(t, runContainer.Args, "--metrics-bind-address", "--health-probe-bind-address")
	if !slices.Contains(runArgs, "--leader-elect") {
		t.Errorf("the chart's operator args %q lack --leader-elect (2 replicas)", runArgs)
	}
	operator := startPodProcess(t, binary, runArgs, podEnv(t, c, oc, runContainer, "run"), creds, out)
	running := func(t *testing.T, what string) {
		t.Helper()
		if done, err := operator.exited(); done {
			t.Fatalf("the operator exited (%v) %s", err, what)
		}
	}

	providers := testProviders("regcred")
	scenario := t.Run("InstallsProviders", func(t *testing.T) { installProviders(t, c, ns, providers, running) }) &&
		t.Run("GrantsClusterRequest", func(t *testing.T) { grantClusterRequest(t, c, ns, providers[0], running) }) &&
		t.Run("RemovesProviders", func(t *testing.T) { removeProviders(t, c, providers, running) })
	t.Run("MetricsAuthorizedByPlatform", func(t *testing.T) {
		checkChartMetrics(t, "operator", scrapeMetrics(t, c, metricsPort))
	})
	running(t, "before the audit log was read")

	t.Run("RBACAsUsed", func(t *testing.T) {
		user := serviceaccount.MakeUsername(ns, sa)
		checkRBACAsUsed(t, oc, readAudit(t, auditLog, user), scenario)
	})
}

// hostServiceAccountDir describes what the host has in the directory of
// the service-account files: "absent", or the names of its entries.
func hostServiceAccountDir(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(process.ServiceAccountNamespaceFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	if err != nil {
		t.Fatalf("read the host's service-account directory: %v", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// serviceAccountToken returns a token the API server issued for sa, as the
// kubelet projects one into a pod.
func serviceAccountToken(t *testing.T, c *testenv.Cluster, sa *corev1.ServiceAccount) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{}
	if err := c.Client.SubResource("token").Create(t.Context(), sa.DeepCopy(), tr); err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	return tr.Status.Token
}

// podEnv is the environment of container in a pod of the component's
// Deployment (podEnvOf).
func podEnv(t *testing.T, c *testenv.Cluster, oc *operatorChart, container corev1.Container, role string) []string {
	t.Helper()
	return podEnvOf(t, c, container, oc.Deployment.Namespace, oc.Deployment.Name+"-"+role, oc.ServiceAccount.Name, oc.Component)
}

// providerObject is a provider of one kind with the prefix of the names
// the operator gives its objects.
type providerObject struct {
	obj    client.Object
	prefix string
}

// base is the name of the provider's namespace, run Deployment and
// ServiceAccounts.
func (p providerObject) base() string { return p.prefix + "-" + p.obj.GetName() }

// statusOf returns the deployment status of a provider object.
func statusOf(obj client.Object) *providerv1alpha1.DeploymentStatus {
	switch o := obj.(type) {
	case *providerv1alpha1.ServiceProvider:
		return &o.Status.DeploymentStatus
	case *providerv1alpha1.ClusterProvider:
		return &o.Status.DeploymentStatus
	case *providerv1alpha1.PlatformService:
		return &o.Status.DeploymentStatus
	}
	panic(fmt.Sprintf("not a provider: %T", obj))
}

// testProviders returns one provider of each kind; the ServiceProvider
// names an image pull Secret of the operator's namespace, which the
// operator copies into the provider's namespace.
func testProviders(pullSecret string) []providerObject {
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "example"}}
	sp.Spec.Image = "registry.example.com/service-provider-example:v1.0.0"
	sp.Spec.ImagePullSecrets = []common.LocalObjectReference{{Name: pullSecret}}
	cp := &providerv1alpha1.ClusterProvider{ObjectMeta: metav1.ObjectMeta{Name: "kind"}}
	cp.Spec.Image = "registry.example.com/cluster-provider-kind:v0.6.0"
	ps := &providerv1alpha1.PlatformService{ObjectMeta: metav1.ObjectMeta{Name: "audit"}}
	ps.Spec.Image = "registry.example.com/platform-service-audit:v0.1.0"
	return []providerObject{{sp, "sp"}, {cp, "cp"}, {ps, "ps"}}
}

// installProviders creates a provider of each kind (a ServiceProvider with
// an image pull Secret), completes the init Job the operator creates for
// each, marks its run Deployment available and waits for Ready.
func installProviders(t *testing.T, c *testenv.Cluster, namespace string, providers []providerObject, running func(*testing.T, string)) {
	ctx := t.Context()
	sp := providers[0].obj.(*providerv1alpha1.ServiceProvider)
	pullSecret := sp.Spec.ImagePullSecrets[0].Name
	if err := c.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: pullSecret},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dGVzdDp0ZXN0"}}}`)},
	}); err != nil {
		t.Fatalf("create image pull Secret: %v", err)
	}
	for _, p := range providers {
		if err := c.Client.Create(ctx, p.obj); err != nil {
			t.Fatalf("create %T %s: %v", p.obj, p.obj.GetName(), err)
		}
	}
	for _, p := range providers {
		installProvider(t, c, p, running)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: providers[0].base(), Name: pullSecret}, &corev1.Secret{}); err != nil {
		t.Errorf("the image pull Secret was not copied into %s: %v", providers[0].base(), err)
	}
}

// removeProviders deletes the providers and waits until the operator
// removed what it created for them.
func removeProviders(t *testing.T, c *testenv.Cluster, providers []providerObject, running func(*testing.T, string)) {
	ctx := t.Context()
	for _, p := range providers {
		if err := c.Client.Delete(ctx, p.obj); err != nil {
			t.Fatalf("delete %T %s: %v", p.obj, p.obj.GetName(), err)
		}
	}
	for _, p := range providers {
		eventually(t, fmt.Sprintf("%T %s gone", p.obj, p.obj.GetName()), func(ctx context.Context) (bool, string, error) {
			running(t, "while waiting for the providers to be removed")
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(p.obj), p.obj)
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			return false, fmt.Sprintf("phase %s, finalizers %q", statusOf(p.obj).Phase, p.obj.GetFinalizers()), nil
		})
		// The finalizer goes only once the operator removed everything.
		if left := leftovers(t, c, p.base()); len(left) > 0 {
			t.Errorf("left behind after %T %s was removed: %s", p.obj, p.obj.GetName(), strings.Join(left, ", "))
		}
	}
}

// grantClusterRequest registers the test's API server as a Shared workload
// Cluster (admin kubeconfig in a Secret, as docs/install.md does for the
// onboarding cluster), waits until the operator found it Ready, lets the
// provider's namespace request a workload cluster, waits for the grant
// (the request's finalizer on the Cluster), deletes the request and waits
// until the operator released the Cluster and, as it is labelled
// delete-without-requests, deleted it.
func grantClusterRequest(t *testing.T, c *testenv.Cluster, namespace string, requester providerObject, running func(*testing.T, string)) {
	ctx := t.Context()
	const secretName = "workload-kubeconfig"
	if err := c.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName},
		Data:       map[string][]byte{clusters.KubeconfigSecretKey: c.Kubeconfig},
	}); err != nil {
		t.Fatalf("create kubeconfig Secret: %v", err)
	}
	cluster := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "workload",
			Annotations: map[string]string{clusters.KubeconfigSecretAnnotation: secretName},
			// As a cluster provider marks the clusters it created for
			// requests: the operator deletes it with its last request.
			Labels: map[string]string{clustersv1alpha1.DeleteWithoutRequestsLabel: "true"}},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "static", Purposes: []string{"workload"}, Tenancy: clustersv1alpha1.TenancyShared},
	}
	if err := c.Client.Create(ctx, cluster); err != nil {
		t.Fatalf("create Cluster: %v", err)
	}
	eventually(t, "Cluster "+cluster.Name+" Ready", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the Cluster")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return false, err.Error(), nil
		}
		return apimeta.IsStatusConditionTrue(cluster.Status.Conditions, common.ConditionTypeReady), fmt.Sprintf("conditions %+v", cluster.Status.Conditions), nil
	})

	cr := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: requester.base(), Name: "workload"},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: "workload"},
	}
	if err := c.Client.Create(ctx, cr); err != nil {
		t.Fatalf("create ClusterRequest: %v", err)
	}
	eventually(t, "ClusterRequest "+cr.Namespace+"/"+cr.Name+" granted", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the grant")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, err.Error(), nil
		}
		return cr.Status.IsGranted(), fmt.Sprintf("phase %q, conditions %+v", cr.Status.Phase, cr.Status.Conditions), nil
	})
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cluster.Finalizers, cr.FinalizerForCluster()) {
		t.Errorf("granted Cluster %s lacks the request's finalizer %s: %q", cluster.Name, cr.FinalizerForCluster(), cluster.Finalizers)
	}

	if err := c.Client.Delete(ctx, cr); err != nil {
		t.Fatalf("delete ClusterRequest: %v", err)
	}
	eventually(t, "ClusterRequest gone and its Cluster deleted", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the release")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("request still there (%v), finalizers %q", err, cr.Finalizers), nil
		}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("Cluster still there (%v), finalizers %q", err, cluster.Finalizers), nil
	})
}

// installProvider completes the provider's init Job as the Job controller
// would, marks its run Deployment available as the Deployment controller
// would, and waits until the provider is Ready.
func installProvider(t *testing.T, c *testenv.Cluster, p providerObject, running func(*testing.T, string)) {
	t.Helper()
	ctx := t.Context()
	base := p.base()
	job := &batchv1.Job{}
	eventually(t, "the init Job "+base+"/"+base+"-init", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the init Job")
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: base, Name: base + "-init"}, job); err != nil {
			return false, err.Error(), nil
		}
		gen, att := job.Annotations[providerv1alpha1.ProviderGenerationAnnotation], job.Annotations[kube.AttemptAnnotation]
		return gen == "1" && att == "1", fmt.Sprintf("generation %s, attempt %s", gen, att), nil
	})
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := c.Client.Status().Update(ctx, job); err != nil {
		t.Fatalf("mark the init Job %s complete: %v", base, err)
	}

	dep := &appsv1.Deployment{}
	eventually(t, "the run Deployment "+base+"/"+base, func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the run Deployment")
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: base, Name: base}, dep); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	r := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
	if err := c.Client.Status().Update(ctx, dep); err != nil {
		t.Fatalf("mark the run Deployment %s available: %v", base, err)
	}

	eventually(t, fmt.Sprintf("%T %s Ready", p.obj, p.obj.GetName()), func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for Ready")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p.obj), p.obj); err != nil {
			return false, err.Error(), nil
		}
		st := statusOf(p.obj)
		cond := apimeta.FindStatusCondition(st.Conditions, string(providerv1alpha1.ConditionReady))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != p.obj.GetGeneration() {
			return false, fmt.Sprintf("generation %d, conditions %+v", p.obj.GetGeneration(), st.Conditions), nil
		}
		return true, "", nil
	})
}

// leftovers lists what the operator created for the provider whose objects
// are named base and that still exists.
func leftovers(t *testing.T, c *testenv.Cluster, base string) []string {
	t.Helper()
	ctx := t.Context()
	var left []string
	if err := c.Client.Get(ctx, client.ObjectKey{Name: base}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("Namespace %s (%v)", base, err))
	}
	managed := client.MatchingLabels{providerv1alpha1.ManagedByLabel: provider.ManagedByValue}
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &batchv1.JobList{},
		&appsv1.DeploymentList{}, &corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
		if err := c.Client.List(ctx, list, managed); err != nil {
			t.Fatalf("list %T: %v", list, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			if strings.Contains(obj.GetName(), base) || strings.Contains(obj.GetNamespace(), base) {
				left = append(left, fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj)))
			}
		}
	}
	return left
}

// scrapeMetrics gets the operator's /metrics with the token of a scraper
// allowed to, as Prometheus would through the chart's metrics Service: the
// operator asks the platform's TokenReview and SubjectAccessReview. It
// returns the body of the answer, in Prometheus' text format.
func scrapeMetrics(t *testing.T, c *testenv.Cluster, port string) string {
	if port == "" {
		t.Fatal("the chart's operator args set no --metrics-bind-address")
	}
	if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}); err != nil {
		t.Fatal(err)
	}
	token := c.ServiceAccountToken(t, "monitoring", "prometheus")
	c.AllowNonResourceURL(t, "monitoring", "prometheus", "get", "/metrics")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The operator serves metrics with a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test scraper of a self-signed loopback endpoint
	}}
	url := "https://127.0.0.1:" + port + "/metrics"
	var body []byte
	eventually(t, "GET "+url+" answered 200", func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return false, resp.Status, nil
		}
		if body, err = io.ReadAll(resp.Body); err != nil {
			return false, "read the body: " + err.Error(), nil
		}
		return true, resp.Status, nil
	})
	return string(body)
}
