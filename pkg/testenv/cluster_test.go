package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/apiserverprofile"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestStartManyIndependent starts four API servers at once (the cluster roles
// of DESIGN.md §1) and shows that each has every CRD and its own storage,
// and serves the small profile's API groups only.
func TestStartManyIndependent(t *testing.T) {
	names := []string{"platform", "onboarding", "mcp", "workload"}
	clusters := testenv.StartMany(t, names)
	ctx := t.Context()

	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{}
	for _, name := range names {
		c := clusters[name]
		if other, dup := hosts[c.Config.Host]; dup {
			t.Fatalf("clusters %q and %q share the API server %s", name, other, c.Config.Host)
		}
		hosts[c.Config.Host] = name

		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := c.Client.List(ctx, list); err != nil {
			t.Fatalf("%s: list CRDs: %v", name, err)
		}
		if len(list.Items) != len(all) {
			t.Errorf("%s: %d CRDs installed, want %d", name, len(list.Items), len(all))
		}
		served := servedGroupVersions(t, c)
		for _, gv := range apiserverprofile.Groups {
			if !served[gv] {
				t.Errorf("%s: %s is not served", name, gv)
			}
		}
		for _, gv := range notSmall {
			if served[gv] {
				t.Errorf("%s: %s is served; without WithFullAPI a cluster runs the small profile", name, gv)
			}
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-" + name}}
		if err := c.Client.Create(ctx, ns); err != nil {
			t.Fatalf("%s: create namespace: %v", name, err)
		}
	}
	for _, name := range names {
		for _, other := range names {
			err := clusters[name].Client.Get(ctx, client.ObjectKey{Name: "only-in-" + other}, &corev1.Namespace{})
			switch {
			case name == other && err != nil:
				t.Errorf("%s: own namespace: %v", name, err)
			case name != other && !apierrors.IsNotFound(err):
				t.Errorf("%s: namespace of %s: want NotFound, got %v", name, other, err)
			}
		}
	}
}

// TestControllerManager shows that with a kube-controller-manager attached,
// namespaces are really deleted and owner references are garbage collected,
// also when the thread that started the cluster has ended.
func TestControllerManager(t *testing.T) {
	c := startOnEndingThread(t, testenv.WithName("kcm"), testenv.WithCRDs(), testenv.WithControllerManager())
	ctx := t.Context()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	must(t, c.Client.Create(ctx, ns))
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}}
	must(t, c.Client.Create(ctx, owner))
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	must(t, c.Client.Create(ctx, dependent))
	must(t, c.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inside", Namespace: ns.Name}}))

	// A legacy service-account token Secret is filled in by the token
	// controller, as bind templates rely on.
	must(t, c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "default"}}))
	tokenSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "robot-token", Namespace: "default", Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	must(t, c.Client.Create(ctx, tokenSecret))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(tokenSecret), tokenSecret); err != nil {
			return false, err
		}
		return len(tokenSecret.Data[corev1.ServiceAccountTokenKey]) > 0 && len(tokenSecret.Data[corev1.ServiceAccountRootCAKey]) > 0, nil
	})
	if err != nil {
		t.Fatalf("token Secret not filled in: %v\ncontroller-manager log (tail):\n%s", err, lastLines(c.ControllerManagerLog(), 20))
	}

	must(t, c.Client.Delete(ctx, ns))
	must(t, c.Client.Delete(ctx, owner))

	waitGone(t, c, ns, "namespace deletion (namespace controller)")
	waitGone(t, c, dependent, "garbage collection of the dependent ConfigMap")
}

func waitGone(t *testing.T, c *testenv.Cluster, obj client.Object, what string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("%s did not happen: %v\ncontroller-manager log (tail):\n%s", what, err, lastLines(c.ControllerManagerLog(), 20))
	}
}

func lastLines(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestNewManyReportsFailures shows that NewMany returns the failure of one
// cluster (here: a CRD the API server rejects) and no clusters.
func TestNewManyReportsFailures(t *testing.T) {
	testenv.SkipIfShort(t)
	bad := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "not-a-valid-crd"}}
	clusters, err := testenv.NewMany(map[string][]testenv.Option{
		"good":   {testenv.WithCRDs()},
		"broken": {testenv.WithCRDs(bad)},
	})
	if err == nil || !strings.Contains(err.Error(), `"broken"`) {
		t.Fatalf("NewMany with a broken cluster: want an error naming it, got %v", err)
	}
	if clusters != nil {
		t.Errorf("NewMany returned clusters %v along with its error; they should be stopped and dropped", clusters)
	}
}

// notSmall are group versions a full kube-apiserver serves and a small one
// does not.
var notSmall = []string{"storage.k8s.io/v1", "scheduling.k8s.io/v1", "autoscaling/v2", "certificates.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1"}

// servedGroupVersions returns the group versions c's API server serves.
func servedGroupVersions(t *testing.T, c *testenv.Cluster) map[string]bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatalf("%s: discovery client: %v", c.Name, err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatalf("%s: discovery: %v", c.Name, err)
	}
	served := map[string]bool{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			served[v.GroupVersion] = true
		}
	}
	return served
}
