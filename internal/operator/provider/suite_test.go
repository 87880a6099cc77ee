package provider_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy/kube"
	"github.com/marketplane/marketplane/internal/operator/provider"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The suite shares one platform API server (with a kube-controller-manager,
// so that namespaces really go away) and one manager running the three
// reconcilers with the Kubernetes deployer. The tests play the kubelet and
// the Job and Deployment controllers by writing Job and Deployment status.
//
// Tests that use the API server start with needsPlatform. Most then run in
// parallel: each works on providers of its own names, and most of a test's
// time is spent waiting for the kube-controller-manager to delete the
// provider namespaces. Tests stay serial when they count the reconciles of
// a controller all tests share; tests of API-group ownership, which is
// decided across all providers, hold groupOwnership.
const (
	operatorNamespace = "marketplane-system"
	environment       = "test"
	pullSecretName    = "regcred"
	// initBackoff replaces deploy.InitBackoff so that a failed Job is
	// replaced within the test's patience.
	initBackoff = 2 * time.Second
	timeout     = 60 * time.Second
	interval    = 100 * time.Millisecond
)

var (
	platform *testenv.Cluster
	// k8s is an uncached admin client of the platform API server.
	k8s client.Client
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	if testenv.Short() {
		// The tests that need the API server skip themselves.
		return m.Run()
	}
	ctrl.SetLogger(testenv.Logger())
	var err error
	platform, err = testenv.New(testenv.WithName("platform"), testenv.WithControllerManager())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := platform.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	k8s = platform.Client

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := seedOperatorNamespace(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(platform.Config, ctrl.Options{
		Scheme:  platform.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := kube.New(mgr.GetClient(),
		kube.WithAPIReader(mgr.GetAPIReader()),
		kube.WithInitBackoff(func(int32) time.Duration { return initBackoff }))
	if err := provider.Setup(mgr, d,
		provider.WithEnvironment(environment),
		provider.WithOperatorNamespace(operatorNamespace),
		provider.WithWaitInterval(250*time.Millisecond),
		provider.WithMissingSecretInterval(time.Second),
	); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// needsPlatform skips the test under -short, when TestMain started no API
// server.
func needsPlatform(t *testing.T) {
	t.Helper()
	testenv.SkipIfShort(t)
}

// groupOwnership is held by the tests that grant API groups through
// spec.accessPolicy.apiGroups: who owns a group is decided across all
// providers, so two such tests at once would take each other's groups.
var groupOwnership sync.Mutex

// ownGroups runs the rest of the test, and its clean-ups, while no other
// test grants API groups.
func ownGroups(t *testing.T) {
	t.Helper()
	groupOwnership.Lock()
	// Registered before the test's own clean-ups, so it runs after them.
	t.Cleanup(groupOwnership.Unlock)
}

// seedOperatorNamespace creates the operator's namespace with an image pull
// secret providers can name.
func seedOperatorNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}
	if err := k8s.Create(ctx, ns); err != nil {
		return err
	}
	return k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: pullSecretName},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"ghcr.io":{"auth":"dGVzdDp0ZXN0"}}}`)},
	})
}

// eventually polls cond until it reports done, and fails the test with
// cond's last explanation when it does not within the timeout.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (done bool, why string, err error)) {
	t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(t.Context(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		done, w, err := cond(ctx)
		if ctx.Err() == nil {
			// Keep the last explanation from before the deadline, not
			// the deadline itself.
			why = w
		}
		return done, err
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, why)
	}
}

// created holds, per test, the objects create made, so that they are
// deleted together when the test ends. Parallel tests share it, under
// createdMu.
var (
	createdMu sync.Mutex
	created   = map[*testing.T][]client.Object{}
)

// create creates obj and, when the test ends, deletes it and waits until it
// is gone, so that tests do not see each other's providers. All objects of
// a test are deleted first and then waited for, so that their clean-ups
// overlap.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	createdMu.Lock()
	defer createdMu.Unlock()
	if _, ok := created[t]; !ok {
		// Registered first, so it runs after the deletes below.
		t.Cleanup(func() {
			createdMu.Lock()
			objs := created[t]
			delete(created, t)
			createdMu.Unlock()
			for _, o := range objs {
				deleteAndWait(t, o)
			}
		})
	}
	created[t] = append(created[t], obj)
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// deleteAndWait deletes obj and waits until it is gone.
func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := k8s.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
		return
	}
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		// Say what holds it: its finalizers and, for a CRD, its
		// conditions (the API server's finalizer reports there).
		left := obj.DeepCopyObject().(client.Object)
		if getErr := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), left); getErr != nil {
			t.Errorf("%T %s not gone: %v (and reading it: %v)", obj, obj.GetName(), err, getErr)
			return
		}
		var conditions any
		if crd, ok := left.(*apiextensionsv1.CustomResourceDefinition); ok {
			conditions = crd.Status.Conditions
		}
		t.Errorf("%T %s not gone: %v; finalizers %v, deletion requested at %v, conditions %+v",
			obj, obj.GetName(), err, left.GetFinalizers(), left.GetDeletionTimestamp(), conditions)
	}
}

// serviceProvider returns a ServiceProvider with the seed's image.
func serviceProvider(name string, mutate func(*providerv1alpha1.DeploymentSpec)) *providerv1alpha1.ServiceProvider {
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name}}
	sp.Spec.Image = "ghcr.io/openmcp-project/images/service-provider-example:v1.0.0"
	if mutate != nil {
		mutate(&sp.Spec.DeploymentSpec)
	}
	return sp
}

// statusOf reads the shared status of a provider object.
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

// want is an expected condition; an empty Message matches any, otherwise
// the condition's message must contain it.
type want struct {
	Type    providerv1alpha1.ConditionType
	Status  metav1.ConditionStatus
	Reason  providerv1alpha1.ConditionReason
	Message string
}

// waitForConditions waits until obj, re-read, has the current
// observedGeneration and all wanted conditions, and returns it.
func waitForConditions(t *testing.T, obj client.Object, wants ...want) {
	t.Helper()
	eventually(t, fmt.Sprintf("conditions of %s", obj.GetName()), func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error(), nil
		}
		why := conditionsMismatch(obj, wants)
		return why == "", why, nil
	})
}

// conditionsMismatch says how obj differs from the wanted conditions at its
// current generation, or returns "" when it has them all.
func conditionsMismatch(obj client.Object, wants []want) string {
	st := statusOf(obj)
	if st.ObservedGeneration != obj.GetGeneration() {
		return fmt.Sprintf("observedGeneration %d, generation %d", st.ObservedGeneration, obj.GetGeneration())
	}
	for _, w := range wants {
		c := apimeta.FindStatusCondition(st.Conditions, string(w.Type))
		if c == nil || c.Status != w.Status || c.Reason != string(w.Reason) || !strings.Contains(c.Message, w.Message) || c.ObservedGeneration != obj.GetGeneration() {
			return fmt.Sprintf("want %s=%s/%s (%q), have %+v", w.Type, w.Status, w.Reason, w.Message, st.Conditions)
		}
	}
	return ""
}

// waitForJob waits for the init Job of the given generation and attempt.
func waitForJob(t *testing.T, ns, name string, generation int64, attempt int) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	eventually(t, fmt.Sprintf("init Job %s/%s of generation %d, attempt %d", ns, name, generation, attempt), func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
			return false, err.Error(), nil
		}
		gen, att := job.Annotations[providerv1alpha1.ProviderGenerationAnnotation], job.Annotations[kube.AttemptAnnotation]
		return gen == fmt.Sprint(generation) && att == fmt.Sprint(attempt), fmt.Sprintf("generation %s, attempt %s", gen, att), nil
	})
	return job
}

// completeJob marks a Job as succeeded, as the Job controller would.
func completeJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime:      &now,
		CompletionTime: &now,
		Succeeded:      1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := k8s.Status().Update(t.Context(), job); err != nil {
		t.Fatalf("mark Job %s succeeded: %v", job.Name, err)
	}
}

// failJob marks a Job as failed, as the Job controller would.
func failJob(t *testing.T, job *batchv1.Job, reason, message string) metav1.Time {
	t.Helper()
	return failJobAt(t, job, reason, message, metav1.Now())
}

// failJobAt marks job failed as the Job controller would have at now.
func failJobAt(t *testing.T, job *batchv1.Job, reason, message string, now metav1.Time) metav1.Time {
	t.Helper()
	job.Status = batchv1.JobStatus{
		StartTime: &now,
		Failed:    1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := k8s.Status().Update(t.Context(), job); err != nil {
		t.Fatalf("mark Job %s failed: %v", job.Name, err)
	}
	return now
}

// waitForDeployment waits for a Deployment for which ok holds.
func waitForDeployment(t *testing.T, ns, name string, ok func(*appsv1.Deployment) (bool, string)) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	eventually(t, fmt.Sprintf("Deployment %s/%s", ns, name), func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
			return false, err.Error(), nil
		}
		if ok == nil {
			return true, "", nil
		}
		done, why := ok(dep)
		return done, why, nil
	})
	return dep
}

// markAvailable marks a Deployment as rolled out, as the Deployment
// controller would.
func markAvailable(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	r := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation,
		Replicas:           r,
		UpdatedReplicas:    r,
		ReadyReplicas:      r,
		AvailableReplicas:  r,
	}
	if err := k8s.Status().Update(t.Context(), dep); err != nil {
		t.Fatalf("mark Deployment %s available: %v", dep.Name, err)
	}
}

// install waits for the init Job of generation gen, completes it, waits
// for the Deployment of that generation and marks it available.
func install(t *testing.T, obj client.Object, prefix string) {
	t.Helper()
	base := prefix + "-" + obj.GetName()
	completeJob(t, waitForJob(t, base, base+"-init", obj.GetGeneration(), 1))
	dep := waitForDeployment(t, base, base, nil)
	markAvailable(t, dep)
	waitForConditions(t, obj, want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonProviderReady})
}

// isForbidden fails the test unless err is a Forbidden error, or (for
// want == false) unless err is anything but Forbidden.
func checkForbidden(t *testing.T, what string, err error, forbidden bool) {
	t.Helper()
	switch {
	case forbidden && !apierrors.IsForbidden(err):
		t.Errorf("%s: want Forbidden, got %v", what, err)
	case !forbidden && apierrors.IsForbidden(err):
		t.Errorf("%s: want allowed, got %v", what, err)
	}
}

// notFound reports whether every object is gone.
func notFound(ctx context.Context, objs ...client.Object) (bool, string) {
	var left []string
	for _, o := range objs {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o)
		if !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("%T %s (%v)", o, client.ObjectKeyFromObject(o), err))
		}
	}
	return len(left) == 0, strings.Join(left, ", ")
}
