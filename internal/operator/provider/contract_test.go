package provider_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy/kube"
)

// contractEnv is the POD_* part of the environment every provider
// container gets, from the downward API.
var contractEnv = []corev1.EnvVar{
	{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
	{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
	{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
	{Name: "POD_SERVICE_ACCOUNT_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.serviceAccountName"}}},
}

// TestServiceProviderContract deploys the ServiceProvider of seed 04
// unchanged and follows it through init, run and an image update.
func TestServiceProviderContract(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ctx := t.Context()
	raw, err := os.ReadFile("../../../api/crds/testdata/openmcp/serviceprovider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sp := &providerv1alpha1.ServiceProvider{}
	if err := yaml.UnmarshalStrict(raw, sp); err != nil {
		t.Fatalf("decode the seed-04 ServiceProvider: %v", err)
	}
	create(t, sp)
	const ns, initName, runName = "sp-example-service", "sp-example-service-init", "sp-example-service"
	contractArgs := []string{"--environment=test", "--provider-name=example-service", "--verbosity=INFO"}

	// Init: a Job with exactly the contract's arguments and environment.
	job := waitForJob(t, ns, initName, 1, 1)
	if len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("init Job has %d containers, want 1", len(job.Spec.Template.Spec.Containers))
	}
	c := job.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff(append([]string{"init"}, contractArgs...), c.Args); diff != "" {
		t.Errorf("init container args: -want +got:\n%s", diff)
	}
	if len(c.Command) != 0 {
		t.Errorf("init container command = %q, want none: the image's entrypoint is the provider binary", c.Command)
	}
	if diff := cmp.Diff(contractEnv, c.Env); diff != "" {
		t.Errorf("init container env: -want +got:\n%s", diff)
	}
	if c.Image != sp.Spec.Image {
		t.Errorf("init image = %q, want %q", c.Image, sp.Spec.Image)
	}
	if got := job.Spec.BackoffLimit; got == nil || *got != 0 {
		t.Errorf("init Job backoffLimit = %v, want 0", got)
	}
	if got := job.Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyNever {
		t.Errorf("init pod restartPolicy = %q, want Never", got)
	}
	if got := job.Spec.Template.Spec.ServiceAccountName; got != initName {
		t.Errorf("init pod serviceAccountName = %q, want %q", got, initName)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != sp.UID || ref.Kind != "ServiceProvider" {
		t.Errorf("init Job controller = %+v, want the ServiceProvider %s", ref, sp.UID)
	}
	wantLabels := map[string]string{
		"openmcp.cloud/managed-by":    "marketplane-operator",
		"openmcp.cloud/provider-kind": "ServiceProvider",
		"openmcp.cloud/provider-name": "example-service",
		kube.ComponentLabel:           kube.ComponentInit,
	}
	if diff := cmp.Diff(wantLabels, job.Labels); diff != "" {
		t.Errorf("init Job labels: -want +got:\n%s", diff)
	}
	waitForConditions(t, sp,
		want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonInitRunning},
		want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonProviderInstallationPending})
	if sp.Status.Phase != providerv1alpha1.PhaseProgressing {
		t.Errorf("phase while init runs = %q, want Progressing", sp.Status.Phase)
	}
	if !slices.Contains(sp.Finalizers, providerv1alpha1.Finalizer) {
		t.Errorf("finalizers = %q, want %s", sp.Finalizers, providerv1alpha1.Finalizer)
	}
	// The status above was written by the reconcile that saw the Job
	// running; it did not create the Deployment.
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: runName}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Deployment before init succeeded: want NotFound, got %v", err)
	}

	// Run: after init, a Deployment with the same arguments and env.
	completeJob(t, job)
	dep := waitForDeployment(t, ns, runName, nil)
	rc := dep.Spec.Template.Spec.Containers[0]
	wantRunArgs := append(append([]string{"run"}, contractArgs...), "--metrics-bind-address=:8080")
	if diff := cmp.Diff(wantRunArgs, rc.Args); diff != "" {
		t.Errorf("run container args: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(contractEnv, rc.Env); diff != "" {
		t.Errorf("run container env: -want +got:\n%s", diff)
	}
	if got := dep.Spec.Template.Spec.ServiceAccountName; got != runName {
		t.Errorf("run pod serviceAccountName = %q, want %q", got, runName)
	}
	if got := *dep.Spec.Replicas; got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
	wantPorts := []corev1.ContainerPort{{Name: "metrics-http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	if diff := cmp.Diff(wantPorts, rc.Ports); diff != "" {
		t.Errorf("run container ports: -want +got:\n%s", diff)
	}
	wantAnnotations := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics", "prometheus.io/scheme": "https"}
	if diff := cmp.Diff(wantAnnotations, dep.Spec.Template.Annotations); diff != "" {
		t.Errorf("run pod annotations: -want +got:\n%s", diff)
	}
	waitForConditions(t, sp,
		want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonInitCompleted},
		want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonProviderNotReady})

	markAvailable(t, dep)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonProviderReady})
	if sp.Status.Phase != providerv1alpha1.PhaseReady {
		t.Errorf("phase = %q, want Ready", sp.Status.Phase)
	}
	wantMetrics := &providerv1alpha1.MetricsStatus{Service: providerv1alpha1.MetricsService{Name: "sp-example-service-metrics", Namespace: ns}}
	if diff := cmp.Diff(wantMetrics, sp.Status.Metrics); diff != "" {
		t.Errorf("status.metrics: -want +got:\n%s", diff)
	}
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sp-example-service-metrics"}, svc); err != nil {
		t.Fatalf("metrics Service: %v", err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Selector[kube.ComponentLabel] != kube.ComponentRun {
		t.Errorf("metrics Service spec = %+v, want port 8080 selecting the run pods", svc.Spec)
	}
	waitForEvent(t, sp, string(providerv1alpha1.ReasonProviderReady))
	waitForEvent(t, sp, string(providerv1alpha1.ReasonInitCompleted))

	// A new image is a new generation: init runs again. The run
	// Deployment keeps the old image until the new init succeeded.
	oldImage := sp.Spec.Image
	sp.Spec.Image = "ghcr.io/openmcp-project/images/service-provider-example:v1.1.0"
	if err := k8s.Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	job2 := waitForJob(t, ns, initName, 2, 1)
	if job2.UID == job.UID {
		t.Fatal("the init Job of generation 1 was not replaced")
	}
	if got := job2.Spec.Template.Spec.Containers[0].Image; got != sp.Spec.Image {
		t.Errorf("new init Job image = %q, want %q", got, sp.Spec.Image)
	}
	waitForConditions(t, sp,
		want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonInitRunning},
		want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonProviderInstallationPending})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != oldImage {
		t.Errorf("run image while the new init runs = %q, want the old %q", got, oldImage)
	}
	completeJob(t, job2)
	dep = waitForDeployment(t, ns, runName, func(d *appsv1.Deployment) (bool, string) {
		img := d.Spec.Template.Spec.Containers[0].Image
		return img == sp.Spec.Image, "image " + img
	})
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonProviderNotReady})
	markAvailable(t, dep)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonProviderReady})
}

// TestInitFailureIsRetriedAfterBackoff fails the init Job and expects the
// failure on the condition and a new attempt only after the backoff.
func TestInitFailureIsRetriedAfterBackoff(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	sp := serviceProvider("flaky", nil)
	create(t, sp)
	const ns, initName = "sp-flaky", "sp-flaky-init"

	job := waitForJob(t, ns, initName, 1, 1)
	failedAt := failJob(t, job, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
	// The failure is reported with a Warning event InitFailed naming the
	// Job's reason, whether the operator saw it during the backoff (then
	// the Initialized condition says InitFailed until the backoff ends) or
	// only after it, on a machine too busy to look sooner (then attempt 2
	// starts at once and the condition never says InitFailed).
	waitForInitFailedEvent(t, sp, "BackoffLimitExceeded: Job has reached the specified backoff limit")

	job2 := waitForJob(t, ns, initName, 1, 2)
	// Timestamps have second precision: allow one second of rounding.
	if gap := job2.CreationTimestamp.Sub(failedAt.Truncate(time.Second)); gap < initBackoff-time.Second {
		t.Errorf("attempt 2 started %v after the failure, want at least the backoff %v", gap, initBackoff)
	}
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonInitRunning, Message: "attempt 2"})
	completeJob(t, job2)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonInitCompleted})
}

// TestInitFailureSeenAfterItsBackoff is the busy operator's view of
// TestInitFailureIsRetriedAfterBackoff: the Job failed longer ago than the
// backoff when the operator first looks, so it starts attempt 2 at once
// and the Initialized condition never says InitFailed. The failure is
// still reported with the Warning event InitFailed.
func TestInitFailureSeenAfterItsBackoff(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	sp := serviceProvider("late", nil)
	create(t, sp)
	const ns, initName = "sp-late", "sp-late-init"
	job := waitForJob(t, ns, initName, 1, 1)
	failJobAt(t, job, "DeadlineExceeded", "Job was active longer than specified deadline", metav1.NewTime(time.Now().Add(-10*initBackoff)))
	waitForJob(t, ns, initName, 1, 2)
	waitForInitFailedEvent(t, sp, "DeadlineExceeded: Job was active longer than specified deadline")
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonInitRunning, Message: "attempt 2"})
}

// waitForInitFailedEvent waits for a Warning event InitFailed about sp
// whose note holds failure.
func waitForInitFailedEvent(t *testing.T, sp *providerv1alpha1.ServiceProvider, failure string) {
	t.Helper()
	eventually(t, fmt.Sprintf("a Warning event InitFailed about %s naming %q", sp.Name, failure), func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != sp.UID {
				continue
			}
			if e.Type == corev1.EventTypeWarning && e.Reason == string(providerv1alpha1.ReasonInitFailed) && strings.Contains(e.Note, failure) {
				return true, "", nil
			}
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Note)
		}
		return false, fmt.Sprintf("events about it: %q", seen), nil
	})
}

// TestRunOptions covers what the spec adds to the run Deployment: replicas
// with leader election, a metrics port, pull secrets, extra volumes, env
// and topology spread; and that turning metrics off removes the Service.
func TestRunOptions(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ctx := t.Context()
	sp := serviceProvider("tuned", func(s *providerv1alpha1.DeploymentSpec) {
		s.RunReplicas = 2
		s.Verbosity = "debug"
		s.Metrics = &providerv1alpha1.MetricsConfiguration{Port: ptrTo[int32](9090), Path: ptrTo("/custom")}
		s.ImagePullSecrets = []common.LocalObjectReference{{Name: pullSecretName}}
		s.Env = []providerv1alpha1.EnvVar{{Name: "FOO", Value: "bar"}}
		s.ExtraVolumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.ExtraVolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/provider"}}
		s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}}
	})
	create(t, sp)
	const ns, runName = "sp-tuned", "sp-tuned"
	contractArgs := []string{"--environment=test", "--provider-name=tuned", "--verbosity=DEBUG"}
	wantEnv := append(append([]corev1.EnvVar{}, contractEnv...), corev1.EnvVar{Name: "FOO", Value: "bar"})

	job := waitForJob(t, ns, "sp-tuned-init", 1, 1)
	pod := job.Spec.Template.Spec
	if diff := cmp.Diff(append([]string{"init"}, contractArgs...), pod.Containers[0].Args); diff != "" {
		t.Errorf("init args: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(wantEnv, pod.Containers[0].Env); diff != "" {
		t.Errorf("init env: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: pullSecretName}}, pod.ImagePullSecrets); diff != "" {
		t.Errorf("init imagePullSecrets: -want +got:\n%s", diff)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].Name != "config" || len(pod.Containers[0].VolumeMounts) != 1 || pod.Containers[0].VolumeMounts[0].MountPath != "/etc/provider" {
		t.Errorf("init volumes %+v, mounts %+v: want the extra volume mounted at /etc/provider", pod.Volumes, pod.Containers[0].VolumeMounts)
	}
	src, cp := &corev1.Secret{}, &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: pullSecretName}, src); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: pullSecretName}, cp); err != nil {
		t.Fatalf("image pull secret not copied into the provider namespace: %v", err)
	}
	if cp.Type != src.Type || !cmp.Equal(cp.Data, src.Data) {
		t.Errorf("copied pull secret has type %q and different data; want type %q and the same data", cp.Type, src.Type)
	}

	completeJob(t, job)
	dep := waitForDeployment(t, ns, runName, nil)
	rc := dep.Spec.Template.Spec.Containers[0]
	wantArgs := append(append([]string{"run"}, contractArgs...), "--leader-elect=true", "--metrics-bind-address=:9090")
	if diff := cmp.Diff(wantArgs, rc.Args); diff != "" {
		t.Errorf("run args: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(wantEnv, rc.Env); diff != "" {
		t.Errorf("run env: -want +got:\n%s", diff)
	}
	if got := *dep.Spec.Replicas; got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	tsc := dep.Spec.Template.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].LabelSelector == nil || !cmp.Equal(tsc[0].LabelSelector.MatchLabels, dep.Spec.Selector.MatchLabels) {
		t.Errorf("topology spread constraints %+v: want the run pods' selector %v filled in", tsc, dep.Spec.Selector.MatchLabels)
	}
	if got := dep.Spec.Template.Annotations["prometheus.io/path"]; got != "/custom" {
		t.Errorf("prometheus.io/path = %q, want /custom", got)
	}
	if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: pullSecretName}}, dep.Spec.Template.Spec.ImagePullSecrets); diff != "" {
		t.Errorf("run imagePullSecrets: -want +got:\n%s", diff)
	}
	// The deployer writes the Service after the Deployment, so the test
	// may see the Deployment first.
	svc := &corev1.Service{}
	eventually(t, "the metrics Service", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sp-tuned-metrics"}, svc)
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		return err == nil, "", err
	})
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9090 {
		t.Errorf("metrics Service ports = %+v, want 9090", svc.Spec.Ports)
	}
	markAvailable(t, dep)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonProviderReady})
	if sp.Status.Metrics == nil || sp.Status.Metrics.Service.Name != "sp-tuned-metrics" {
		t.Errorf("status.metrics = %+v, want the Service sp-tuned-metrics", sp.Status.Metrics)
	}

	// Metrics off and no pull secret any more: a new generation.
	sp.Spec.Metrics = &providerv1alpha1.MetricsConfiguration{Disabled: true}
	sp.Spec.ImagePullSecrets = nil
	if err := k8s.Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "copied pull secret removed", func(ctx context.Context) (bool, string, error) {
		ok, why := notFound(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pullSecretName}})
		return ok, why, nil
	})
	completeJob(t, waitForJob(t, ns, "sp-tuned-init", 2, 1))
	dep = waitForDeployment(t, ns, runName, func(d *appsv1.Deployment) (bool, string) {
		args := d.Spec.Template.Spec.Containers[0].Args
		return !containsPrefix(args, "--metrics-bind-address"), fmt.Sprintf("args %q", args)
	})
	if ports, ann := dep.Spec.Template.Spec.Containers[0].Ports, dep.Spec.Template.Annotations; len(ports) != 0 || len(ann) != 0 {
		t.Errorf("metrics off: ports %+v and annotations %v remain", ports, ann)
	}
	if len(dep.Spec.Template.Spec.ImagePullSecrets) != 0 {
		t.Errorf("imagePullSecrets = %+v after the spec dropped them", dep.Spec.Template.Spec.ImagePullSecrets)
	}
	eventually(t, "metrics Service removed", func(ctx context.Context) (bool, string, error) {
		ok, why := notFound(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp-tuned-metrics"}})
		return ok, why, nil
	})
	markAvailable(t, dep)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonProviderReady})
	if sp.Status.Metrics != nil {
		t.Errorf("status.metrics = %+v with metrics off, want none", sp.Status.Metrics)
	}
}

// waitForEvent waits for an event with the given reason about obj.
func waitForEvent(t *testing.T, obj client.Object, reason string) {
	t.Helper()
	waitForTypedEvent(t, obj, "", reason)
}

// waitForTypedEvent waits for an event of eventType (any type when empty)
// with the given reason about obj.
func waitForTypedEvent(t *testing.T, obj client.Object, eventType, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s event %s about %s", eventType, reason, obj.GetName()), func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != obj.GetUID() {
				continue
			}
			if e.Reason == reason && (eventType == "" || e.Type == eventType) {
				return true, "", nil
			}
			seen = append(seen, e.Type+"/"+e.Reason)
		}
		return false, fmt.Sprintf("events about it: %q", seen), nil
	})
}

func containsPrefix(list []string, prefix string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, prefix) {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
