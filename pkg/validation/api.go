package validation

import (
	"context"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationCluster on an object of a Spec says on which cluster it is
// applied: "platform" or "onboarding". Without it, an object whose kind the
// platform cluster serves goes there, else to the onboarding cluster.
const AnnotationCluster = "validation.marketplane.io/cluster"

// Spec is what a run validates.
type Spec struct {
	// Provider is the ServiceProvider (openmcp.cloud/v1alpha1).
	Provider *unstructured.Unstructured
	// Objects are applied after the provider initialized (its CRDs are
	// installed): the ProviderConfig and anything else the provider
	// needs, on the platform cluster, and the service objects on the
	// onboarding cluster (see AnnotationCluster). Service objects are
	// the onboarding ones; each must become Ready.
	Objects []*unstructured.Unstructured
	// ControlPlane is the ManagedControlPlane or ControlPlane the service
	// objects are for. When nil and a service object's kind is one the
	// provider registered (status.resources), Run creates a
	// ManagedControlPlane named like the first such object, with an admin
	// token.
	ControlPlane *unstructured.Unstructured
	// Images maps provider images (repo:tag, repo@digest, repo:*) to
	// local binaries, for targets that deploy providers as processes.
	Images map[string]string
}

// ControlPlaneAccess is the control plane a run created or used.
type ControlPlaneAccess struct {
	Kind, Name, Namespace string
	// Kubeconfig is the tenant's admin kubeconfig from status.access;
	// Config and Client are built from it.
	Kubeconfig []byte
	Config     *rest.Config
	Client     client.Client
}

// CheckEnv is what a check of the DomainServiceAPI gets.
type CheckEnv struct {
	// ControlPlane is nil when the flow created none (a provider whose
	// services are not per control plane, like the inter-operator).
	ControlPlane *ControlPlaneAccess
	// Services are the service objects as last read, Ready.
	Services []*unstructured.Unstructured
	// Platform, Onboarding and Workload (nil when the target has none)
	// are admin clients.
	Platform, Onboarding, Workload client.Client
	// Kubeconfigs holds files of admin kubeconfigs by cluster
	// ("platform", "onboarding", "workload", "mcp": the tenant's).
	Kubeconfigs map[string]string
	// Out receives what the check prints; it goes into the report.
	Out io.Writer
}

// CheckFunc checks the DomainServiceAPI; an error fails the check step.
type CheckFunc func(ctx context.Context, env CheckEnv) error

// Option configures Run.
type Option func(*options)

type options struct {
	timeout time.Duration
	// stepTimeouts override timeout for single steps.
	stepTimeouts map[string]time.Duration
	check        CheckFunc
	progress     func(Event)
	logLines     int
}

// DefaultTimeout bounds each waiting step unless WithTimeout says
// otherwise.
const DefaultTimeout = 3 * time.Minute

// WithTimeout bounds each waiting step.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithStepTimeout bounds the waits of the step id (one of StepIDs) by d
// instead of WithTimeout's bound: a longer one for a service that takes
// long to provision, a shorter one where a test expects a step to fail.
func WithStepTimeout(id string, d time.Duration) Option {
	return func(o *options) {
		if o.stepTimeouts == nil {
			o.stepTimeouts = map[string]time.Duration{}
		}
		o.stepTimeouts[id] = d
	}
}

// timeoutOf is the bound of the step id.
func (o *options) timeoutOf(id string) time.Duration {
	if d, ok := o.stepTimeouts[id]; ok && d > 0 {
		return d
	}
	return o.timeout
}

// WithCheck sets the check of the DomainServiceAPI (the step is skipped
// without one).
func WithCheck(f CheckFunc) Option { return func(o *options) { o.check = f } }

// WithProgress has f called when a step starts and when it ends.
func WithProgress(f func(Event)) Option { return func(o *options) { o.progress = f } }

// WithLogLines sets how many lines of each provider log a failure carries
// (default 20).
func WithLogLines(n int) Option { return func(o *options) { o.logLines = n } }

// Event reports progress: a step started (Done false) or ended (Done true,
// Step complete).
type Event struct {
	Step Step
	Done bool
}
