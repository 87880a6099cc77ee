// Package deploy defines how the provider operator runs a provider's init
// and run commands, independent of where they run. The provider reconciler
// derives a Workload from a ServiceProvider, ClusterProvider or
// PlatformService (names, the contract arguments and environment, the
// service accounts it has set up RBAC for) and hands it to a Deployer.
//
// Two Deployers exist: the Kubernetes deployer (package deploy/kube) runs
// init as a Job and run as a Deployment on the platform cluster; the process
// deployer (package deploy/process) runs the provider binary as local
// processes, for the local landscape. Both honour the same contract
// (seed 04): the same arguments, the same POD_* environment, init to
// completion once per generation before run starts.
package deploy

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/marketplane/marketplane/pkg/backoff"
)

// Workload is a provider as a Deployer sees it. The provider reconciler
// fills every field; a Deployer adds only what is specific to where it runs
// (for example the POD_* variables, which come from the downward API on
// Kubernetes and from the process deployer's own knowledge locally).
type Workload struct {
	// Kind is the provider's kind: ServiceProvider, ClusterProvider or
	// PlatformService.
	Kind string
	// Name is the provider object's name, the value of --provider-name.
	Name string
	// Owner is a controller reference to the provider object, set on every
	// object a Deployer creates on the platform cluster.
	Owner metav1.OwnerReference
	// Generation is the provider object's metadata.generation. Init runs
	// once per generation: a new generation (new image, new spec) runs it
	// again.
	Generation int64
	// Namespace is the provider's own namespace on the platform cluster,
	// where its workloads, service accounts and Secrets live.
	Namespace string
	// InitName names the init workload (the Job), RunName the run workload
	// (the Deployment and, with metrics, the Service).
	InitName, RunName string
	// InitServiceAccount and RunServiceAccount are the service accounts,
	// in Namespace, that init and run act as. RBAC for them is set up
	// before the Deployer is called.
	InitServiceAccount, RunServiceAccount string
	// Image is the provider's image; its entrypoint is the provider binary.
	Image string
	// ImagePullSecrets name Secrets in Namespace for pulling Image.
	ImagePullSecrets []corev1.LocalObjectReference
	// InitCommand and RunCommand are the subcommands (default ["init"] and
	// ["run"]).
	InitCommand, RunCommand []string
	// Args are the contract arguments passed to both subcommands:
	// --environment=<env> --provider-name=<name> --verbosity=<v>.
	Args []string
	// RunArgs are passed to the run subcommand only, after Args:
	// --leader-elect=true with more than one replica, and the metrics
	// address when metrics are on.
	RunArgs []string
	// Env is the provider's spec.env, already checked for duplicate names.
	Env []corev1.EnvVar
	// Replicas is the number of run instances.
	Replicas int32
	// ExtraVolumes and ExtraVolumeMounts are added to the init and run
	// pods; TopologySpreadConstraints to the run pods.
	ExtraVolumes              []corev1.Volume
	ExtraVolumeMounts         []corev1.VolumeMount
	TopologySpreadConstraints []corev1.TopologySpreadConstraint
	// Metrics describes the metrics endpoint of the run instances.
	Metrics Metrics
	// Labels are put on everything a Deployer creates, so that it can be
	// found and cleaned up.
	Labels map[string]string
}

// Metrics is the metrics endpoint of a provider's run instances.
type Metrics struct {
	// Enabled is false when the provider disabled metrics.
	Enabled bool
	// Port and Path locate the endpoint.
	Port int32
	Path string
	// ServiceName names the Service in front of the endpoint, for
	// Deployers that create one (the Kubernetes deployer). The reconciler
	// sets it so that all names of a provider are computed, and shortened,
	// in one place.
	ServiceName string
}

// InitState is how far the init command got for the current generation.
type InitState string

// The states of an init run.
const (
	// InitPending means init has not started for this generation yet (for
	// example while a failed attempt waits out its backoff).
	InitPending InitState = "Pending"
	// InitRunning means init is running.
	InitRunning InitState = "Running"
	// InitSucceeded means init completed for this generation.
	InitSucceeded InitState = "Succeeded"
	// InitFailed means the last attempt failed; another follows after
	// RetryAfter.
	InitFailed InitState = "Failed"
)

// InitStatus reports on the init command of the current generation.
type InitStatus struct {
	// State is how far init got.
	State InitState
	// Message says why, in words for the provider's condition (for example
	// the failed Job's reason and message). It never contains secrets.
	Message string
	// Attempt counts the attempts for this generation, starting at 1.
	Attempt int32
	// RetryAfter is when to look again: the rest of a failed attempt's
	// backoff, or zero to rely on watches.
	RetryAfter time.Duration
	// PreviousFailure is set when this status is of an attempt the
	// deployer just started because the previous one failed and its
	// backoff is over: how the previous one failed. A caller that looked
	// during the backoff has reported the failure already (InitFailed); one
	// too busy to look then learns of it only here.
	PreviousFailure string
}

// RunStatus reports on the run instances.
type RunStatus struct {
	// Ready is true when the run instances are up to date and available.
	Ready bool
	// Message says what is missing when not ready. The process deployer
	// also says there where the run processes listen (their ports are
	// chosen free at each start) and whether they find the
	// service-account namespace file; it becomes the Ready condition's
	// message.
	Message string
	// Crashing is true when a run instance exited or could not start and
	// waits to be restarted (the process deployer; a pod's restarts are
	// the kubelet's).
	Crashing bool
	// MetricsService is the Service in front of the metrics endpoint, when
	// there is one.
	MetricsService *types.NamespacedName
}

// Deployer runs a provider's init and run commands.
type Deployer interface {
	// Init makes sure the init command runs once for w.Generation and
	// reports how it went. A failed attempt is replaced with exponential
	// backoff; Init never blocks waiting for it.
	Init(ctx context.Context, w *Workload) (InitStatus, error)
	// Run makes sure the run command runs as w describes and reports
	// whether it is ready. The reconciler calls it only after Init
	// reported InitSucceeded for w.Generation.
	Run(ctx context.Context, w *Workload) (RunStatus, error)
	// Remove stops and deletes everything Init and Run created for w. It
	// reports done once nothing is left.
	Remove(ctx context.Context, w *Workload) (done bool, err error)
}

// InitBackoff is the wait before init attempt n+1 after attempt n failed:
// 10s, 20s, 40s, … capped at five minutes. Both Deployers use it.
func InitBackoff(failedAttempt int32) time.Duration {
	return initBackoff.Wait(int(failedAttempt))
}

// initBackoff is the schedule of InitBackoff.
var initBackoff = backoff.Doubling{Base: 10 * time.Second, Max: 5 * time.Minute}
