package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

func workload() *deploy.Workload {
	return &deploy.Workload{
		Kind: "ServiceProvider", Name: "example",
		Owner:      metav1.OwnerReference{APIVersion: "openmcp.cloud/v1alpha1", Kind: "ServiceProvider", Name: "example", UID: "uid-1", Controller: ptr.To(true)},
		Generation: 1,
		Namespace:  "sp-example", InitName: "sp-example-init", RunName: "sp-example",
		InitServiceAccount: "sp-example-init", RunServiceAccount: "sp-example",
		Image:       "example:v1",
		InitCommand: []string{"init"}, RunCommand: []string{"run"},
		Args:     []string{"--environment=test", "--provider-name=example", "--verbosity=INFO"},
		Replicas: 1,
		Labels:   map[string]string{"openmcp.cloud/provider-name": "example"},
	}
}

// testDeployer returns a Deployer on a fake client whose clock the test
// moves.
func testDeployer(t *testing.T, objs ...client.Object) (*Deployer, client.Client, *time.Time) {
	t.Helper()
	scheme, err := install.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&batchv1.Job{}).Build()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := New(c)
	d.now = func() time.Time { return now }
	return d, c, &now
}

func failed(job *batchv1.Job, at time.Time) {
	job.Status.Conditions = []batchv1.JobCondition{{
		Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit",
		LastTransitionTime: metav1.NewTime(at),
	}}
}

func TestInitRetriesWithBackoff(t *testing.T) {
	ctx := t.Context()
	w := workload()
	d, c, now := testDeployer(t)

	st, err := d.Init(ctx, w)
	if err != nil || st.State != deploy.InitRunning || st.Attempt != 1 {
		t.Fatalf("first Init = %+v, %v; want Running, attempt 1", st, err)
	}
	for attempt := int32(1); attempt <= 3; attempt++ {
		job := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.InitName}, job); err != nil {
			t.Fatal(err)
		}
		if got := attemptOf(job); got != attempt {
			t.Fatalf("Job attempt = %d, want %d", got, attempt)
		}
		failed(job, *now)
		if err := c.Status().Update(ctx, job); err != nil {
			t.Fatal(err)
		}
		backoff := deploy.InitBackoff(attempt)

		*now = now.Add(backoff - time.Second)
		st, err := d.Init(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != deploy.InitFailed || st.RetryAfter != time.Second || st.Attempt != attempt {
			t.Errorf("attempt %d, 1s before its backoff of %v: Init = %+v; want Failed, retry after 1s", attempt, backoff, st)
		}
		if !strings.Contains(st.Message, "BackoffLimitExceeded: Job has reached the specified backoff limit") {
			t.Errorf("failure message %q lacks the Job's reason and message", st.Message)
		}
		again, _ := d.Init(ctx, w)
		if again.Message != st.Message {
			t.Errorf("message changed between two looks (%q, %q): every change is a status write", st.Message, again.Message)
		}

		*now = now.Add(time.Second)
		st, err = d.Init(ctx, w)
		if err != nil || st.State != deploy.InitRunning || st.Attempt != attempt+1 {
			t.Errorf("after the backoff: Init = %+v, %v; want Running, attempt %d", st, err, attempt+1)
		}
		// The new attempt carries the old one's failure, for a caller that
		// did not look during the backoff.
		if !strings.Contains(st.PreviousFailure, "BackoffLimitExceeded: Job has reached the specified backoff limit") {
			t.Errorf("attempt %d: PreviousFailure %q lacks the failure of attempt %d", attempt+1, st.PreviousFailure, attempt)
		}
		if again, _ := d.Init(ctx, w); again.PreviousFailure != "" {
			t.Errorf("a second look at attempt %d still reports a previous failure: %q", attempt+1, again.PreviousFailure)
		}
	}
}

func TestInitReplacesOtherGeneration(t *testing.T) {
	ctx := t.Context()
	w := workload()
	old := initJob(w, 3)
	old.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	d, c, _ := testDeployer(t, old)

	st, err := d.Init(ctx, w)
	if err != nil || st.State != deploy.InitSucceeded {
		t.Fatalf("Init of the same generation = %+v, %v; want Succeeded", st, err)
	}
	w.Generation = 2
	w.Image = "example:v2"
	st, err = d.Init(ctx, w)
	if err != nil || st.State != deploy.InitRunning || st.Attempt != 1 {
		t.Fatalf("Init of generation 2 = %+v, %v; want Running, attempt 1", st, err)
	}
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.InitName}, job); err != nil {
		t.Fatal(err)
	}
	if generationOf(job) != 2 || job.Spec.Template.Spec.Containers[0].Image != "example:v2" {
		t.Errorf("Job generation %d, image %q; want 2, example:v2", generationOf(job), job.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestRolledOut(t *testing.T) {
	cases := map[string]struct {
		reason string
		status appsv1.DeploymentStatus
		want   bool
	}{
		"Available":   {"All replicas updated and available.", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, true},
		"NotObserved": {"The Deployment controller has not seen generation 2.", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, false},
		"Updating":    {"One replica still runs the old template.", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}, false},
		"OldLeft":     {"An old replica is still terminating.", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}, false},
		"Unavailable": {"Updated but not available yet.", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}, Status: tc.status}
			if got, msg := rolledOut(dep); got != tc.want {
				t.Errorf("%s\nrolledOut = %v (%s), want %v", tc.reason, got, msg, tc.want)
			}
		})
	}
}

func TestRemoveLeavesForeignObjects(t *testing.T) {
	ctx := t.Context()
	w := workload()
	ours := initJob(w, 1)
	foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.RunName}}
	d, c, _ := testDeployer(t, ours, foreign)

	done, err := d.Remove(ctx, w)
	if err != nil || !done {
		t.Fatalf("Remove = %v, %v; want done", done, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ours), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("own Job: want NotFound, got %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), &appsv1.Deployment{}); err != nil {
		t.Errorf("a Deployment the provider does not own must stay: %v", err)
	}
}

func TestRunDeploymentSelector(t *testing.T) {
	w := workload()
	w.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "something-else"}},
	}}
	dep := runDeployment(w)
	want := map[string]string{"openmcp.cloud/provider-name": "example", ComponentLabel: ComponentRun}
	if diff := cmp.Diff(want, dep.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(want, dep.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels); diff != "" {
		t.Errorf("topology spread selector must select the run pods: -want +got:\n%s", diff)
	}
	if w.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app"] != "something-else" {
		t.Error("runDeployment changed the workload's constraints in place")
	}
}
