package interoperator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/manifests"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// The sample cache service's ids (examples/catalog/service-cache.yaml,
// plan-cache-dev.yaml).
const (
	cacheServiceID = "6d1f3b2e-8c47-4e0a-9f65-3a2b1c0d9e81"
	cachePlanDev   = "2b7e4c91-5a3d-4f08-b6e2-9c1d0a8f7e34"
)

// cacheCredentials is the bind response of the cache plan.
type cacheCredentials struct {
	Credentials struct {
		Host     string `json:"host"`
		Port     int    `json:"port"`
		Password string `json:"password"`
		URI      string `json:"uri"`
	} `json:"credentials"`
}

// TestSampleCachePlan runs the sample's asynchronous cache plan: the
// instance stays "in progress" until its Deployment is available (the
// test plays the Deployment controller, which the test's API servers do
// not run; the landscape's workload cluster runs it with simulated
// nodes), the binding carries the generated password, and an update of
// maxmemory keeps the password and changes the server's arguments.
func TestSampleCachePlan(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	// A catalog namespace of its own: TestSampleCatalog uses the
	// sample's "interoperator" at the same time.
	e := newEnv(t, envOptions{})
	for _, file := range []string{"service-cache.yaml", "plan-cache-dev.yaml"} {
		data, err := os.ReadFile(filepath.Join(sampleDir, file))
		must(t, err)
		objs, err := manifests.Decode(data)
		must(t, err)
		for _, o := range objs {
			o.SetNamespace(e.catalog)
			must(t, platform.Client.Create(ctx, o))
		}
	}
	plan := &osbv1alpha1.SFPlan{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "cache-dev"}, plan))
	waitFor(t, "plan cache-dev Ready", func() bool {
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "cache-dev"}, plan))
		c := readyCondition(plan.Status.Conditions)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	var manager struct {
		Async bool `json:"async"`
	}
	if plan.Spec.Manager == nil || json.Unmarshal(plan.Spec.Manager.Raw, &manager) != nil || !manager.Async {
		t.Errorf("the cache plan is not asynchronous: manager %v", plan.Spec.Manager)
	}

	const id = "c0ffee00-0000-4000-8000-00000000ca01"
	e.createInstance(t, id, cacheServiceID, cachePlanDev, map[string]any{"maxmemory": 128})
	inst := e.waitInstance(t, id, osbv1alpha1.StateInProgress)
	ns := "sf-" + provisioner.InstanceID(e.ns, id)
	if !strings.Contains(inst.Status.Description, "Waiting for the cache in "+ns) {
		t.Errorf("description %q, want it to say what it waits for", inst.Status.Description)
	}
	dep := &appsv1.Deployment{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache"}, dep))
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--maxmemory 128mb") {
		t.Errorf("the server's arguments %q do not carry maxmemory 128", args)
	}
	makeAvailable(t, dep)
	e.waitInstance(t, id, osbv1alpha1.StateSucceeded)

	e.createBinding(t, "cache-bind", e.instance(t, id))
	b := e.waitBinding(t, "cache-bind", osbv1alpha1.StateSucceeded)
	creds := cacheBindResponse(t, e, b)
	auth := &corev1.Secret{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache-auth"}, auth))
	password := string(auth.Data["password"])
	if len(password) != 32 || creds.Credentials.Password != password {
		t.Errorf("bind password %q, Secret password of %d characters; want the Secret's 32", creds.Credentials.Password, len(password))
	}
	if creds.Credentials.Host != "cache."+ns+".svc" || creds.Credentials.Port != 6379 {
		t.Errorf("bind host %q port %d, want cache.%s.svc 6379", creds.Credentials.Host, creds.Credentials.Port, ns)
	}

	// An update: the password stays, the arguments follow.
	inst = e.instance(t, id)
	edit(t, onboarding.Client, inst, func() {
		inst.Spec.Parameters = rawJSON(t, map[string]any{"maxmemory": 32})
		inst.Status.State = osbv1alpha1.StateUpdate
	})
	waitFor(t, "the Deployment to carry maxmemory 32", func() bool {
		must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache"}, dep))
		return strings.Contains(strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "), "--maxmemory 32mb")
	})
	makeAvailable(t, dep)
	e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache-auth"}, auth))
	if string(auth.Data["password"]) != password {
		t.Errorf("the update changed the password")
	}
	if res := e.instance(t, id).Status.Resources; len(res) != 4 {
		t.Errorf("status.resources %+v, want the namespace, Secret, Deployment and Service", res)
	}
}

// makeAvailable writes the status the Deployment controller would once
// dep's pod is ready, on a fresh read when the provisioner wrote dep
// meanwhile (the first update of an object it created writes it three
// times), as that controller does.
func makeAvailable(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := target.Client.Get(context.Background(), client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		return target.Client.Status().Update(context.Background(), dep)
	}))
}

// cacheBindResponse reads the bind response Secret of b.
func cacheBindResponse(t *testing.T, e *env, b *osbv1alpha1.SFServiceBinding) cacheCredentials {
	t.Helper()
	secret := &corev1.Secret{}
	must(t, onboarding.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: b.Status.Response.SecretRef}, secret))
	var c cacheCredentials
	must(t, json.Unmarshal(secret.Data["response"], &c))
	return c
}
