package kube

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// replaceWait is how soon Init looks again after it deleted a Job and the
// API server has not let go of it yet.
const replaceWait = time.Second

// Init makes sure the init Job of w.Generation exists and reports on it.
// A Job of another generation is replaced at once, a failed one after the
// backoff of its attempt, counted from the moment it failed.
func (d *Deployer) Init(ctx context.Context, w *deploy.Workload) (deploy.InitStatus, error) {
	log := logf.FromContext(ctx)
	job := &batchv1.Job{}
	if err := d.reader.Get(ctx, key(w, w.InitName), job); err != nil {
		if apierrors.IsNotFound(err) {
			return d.createJob(ctx, w, 1)
		}
		return deploy.InitStatus{}, fmt.Errorf("get init Job %s: %w", key(w, w.InitName), err)
	}
	if job.DeletionTimestamp != nil {
		return deploy.InitStatus{State: deploy.InitPending, Message: fmt.Sprintf("waiting for the earlier init Job %s to be deleted", job.Name), RetryAfter: replaceWait}, nil
	}
	if !ownedBy(job, w) {
		return deploy.InitStatus{}, fmt.Errorf("init Job %s exists but does not belong to %s %s", key(w, w.InitName), w.Kind, w.Name)
	}
	attempt := attemptOf(job)
	if gen := generationOf(job); gen != w.Generation {
		log.V(1).Info("Replacing the init Job of another generation", "job", job.Name, "jobGeneration", gen, "generation", w.Generation)
		return d.replaceJob(ctx, w, job, 1)
	}

	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		return deploy.InitStatus{
			State:   deploy.InitSucceeded,
			Message: fmt.Sprintf("init Job %s of generation %d completed (attempt %d)", job.Name, w.Generation, attempt),
			Attempt: attempt,
		}, nil
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		failedAt := c.LastTransitionTime.Time
		if failedAt.IsZero() {
			failedAt = job.CreationTimestamp.Time
		}
		next := failedAt.Add(d.backoff(attempt))
		if wait := next.Sub(d.now()); wait > 0 {
			return deploy.InitStatus{
				State: deploy.InitFailed,
				// The message holds the time of the next attempt rather
				// than the time left, so that it does not change (and
				// cause a status write) on every look.
				Message:    fmt.Sprintf("init Job %s failed (attempt %d): %s; next attempt at %s", job.Name, attempt, failure(c), next.UTC().Format(time.RFC3339)),
				Attempt:    attempt,
				RetryAfter: wait,
			}, nil
		}
		log.V(1).Info("Replacing the failed init Job after its backoff", "job", job.Name, "attempt", attempt+1)
		is, err := d.replaceJob(ctx, w, job, attempt+1)
		is.PreviousFailure = fmt.Sprintf("init Job %s failed (attempt %d): %s", job.Name, attempt, failure(c))
		return is, err
	}
	return deploy.InitStatus{
		State:   deploy.InitRunning,
		Message: fmt.Sprintf("init Job %s is running (attempt %d)", job.Name, attempt),
		Attempt: attempt,
	}, nil
}

// replaceJob deletes old and creates the Job of the given attempt.
func (d *Deployer) replaceJob(ctx context.Context, w *deploy.Workload, old *batchv1.Job, attempt int32) (deploy.InitStatus, error) {
	err := d.client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(old.UID)})
	if client.IgnoreNotFound(err) != nil {
		return deploy.InitStatus{}, fmt.Errorf("delete init Job %s: %w", key(w, old.Name), err)
	}
	return d.createJob(ctx, w, attempt)
}

// createJob creates the init Job of w.Generation for the given attempt.
func (d *Deployer) createJob(ctx context.Context, w *deploy.Workload, attempt int32) (deploy.InitStatus, error) {
	job := initJob(w, attempt)
	if err := d.client.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The Job deleted a moment ago is still there.
			return deploy.InitStatus{State: deploy.InitPending, Message: fmt.Sprintf("waiting for the earlier init Job %s to be deleted", job.Name), Attempt: attempt, RetryAfter: replaceWait}, nil
		}
		return deploy.InitStatus{}, fmt.Errorf("create init Job %s: %w", key(w, job.Name), err)
	}
	logf.FromContext(ctx).V(1).Info("Created init Job", "job", job.Name, "generation", w.Generation, "attempt", attempt)
	return deploy.InitStatus{
		State:   deploy.InitRunning,
		Message: fmt.Sprintf("init Job %s is running (attempt %d)", job.Name, attempt),
		Attempt: attempt,
	}, nil
}

// initJob is the init Job of w.Generation for the given attempt.
func initJob(w *deploy.Workload, attempt int32) *batchv1.Job {
	meta := objectMeta(w, w.InitName, ComponentInit)
	meta.Annotations = map[string]string{
		providerv1alpha1.ProviderGenerationAnnotation: strconv.FormatInt(w.Generation, 10),
		AttemptAnnotation: strconv.FormatInt(int64(attempt), 10),
	}
	spec := podSpec(w, initContainer, w.InitServiceAccount, concat(w.InitCommand, w.Args))
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			// The deployer replaces a failed Job itself, with its own
			// backoff, so that a failure shows at once.
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(w, ComponentInit)},
				Spec:       spec,
			},
		},
	}
}

// jobCondition returns the condition of type t if it is true.
func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// failure describes a Failed condition in words.
func failure(c *batchv1.JobCondition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return c.Reason + ": " + c.Message
	case c.Message != "":
		return c.Message
	case c.Reason != "":
		return c.Reason
	}
	return "the Job failed"
}

// generationOf returns the provider generation a Job was created for, or
// -1 when it carries none.
func generationOf(job *batchv1.Job) int64 {
	g, err := strconv.ParseInt(job.Annotations[providerv1alpha1.ProviderGenerationAnnotation], 10, 64)
	if err != nil {
		return -1
	}
	return g
}

// attemptOf returns a Job's attempt number, 1 when it carries none.
func attemptOf(job *batchv1.Job) int32 {
	a, err := strconv.ParseInt(job.Annotations[AttemptAnnotation], 10, 32)
	if err != nil || a < 1 {
		return 1
	}
	return int32(a)
}
