package spruntime

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Defaults of the options.
const (
	// DefaultPollInterval is how often an object is reconciled when
	// nothing changes, unless its ProviderConfig or an annotation says
	// otherwise.
	DefaultPollInterval = time.Minute
	// DefaultMinPollInterval is the shortest poll interval an annotation
	// or ProviderConfig can ask for.
	DefaultMinPollInterval = time.Second
	// DefaultPollJitter is the fraction by which a poll interval is
	// varied at random (±10%), so that objects created together do not
	// poll together.
	DefaultPollJitter = 0.1
	// DefaultWaitInterval is how often the runtime looks again while it
	// waits for something it cannot watch: cluster access being granted
	// or released, users removing their objects.
	DefaultWaitInterval = 5 * time.Second
)

// Option configures an APIReconciler.
type Option func(*options)

type options struct {
	environment       string
	recorder          events.EventRecorder
	pollJitter        float64
	pollInterval      time.Duration
	minPollInterval   time.Duration
	waitInterval      time.Duration
	controllerName    string
	controllerOptions controller.Options
	backoff           *backoff
	secretWatch       *referenceWatch[*corev1.Secret]
	configMapWatch    *referenceWatch[*corev1.ConfigMap]
	mcpWatch          bool
	// finalizerByAuthor: see WithFinalizerByReconciler.
	finalizerByAuthor bool
	// keepReleasedStatus: see WithReleasedStatus.
	keepReleasedStatus func(client.Object) bool
}

// WithFinalizerByReconciler leaves adding the runtime's finalizer
// (FinalizerName) to the Reconciler, so that it rides on the Reconciler's
// first write of the object (the inter-operator adds it in the patch that
// records the cluster an instance is scheduled on) instead of costing a
// write of its own. The Reconciler must add it in CreateOrUpdate before it
// creates anything outside the object, and the ClusterAccess must create
// nothing that needs releasing: the object may be deleted before the
// finalizer is there, and then no Delete is called. When CreateOrUpdate
// returns without error and the object still lacks the finalizer, the
// runtime adds it.
func WithFinalizerByReconciler() Option { return func(o *options) { o.finalizerByAuthor = true } }

// WithReleasedStatus decides whether the status of an object whose
// finalizer the runtime has just removed is still written: only when keep
// returns true; by default it always is. An object that goes away with the
// finalizer needs no status, and neither does one whose remaining
// finalizers' owner reads the finished deletion from the finalizer being
// gone (the broker's tombstones of the inter-operator's instances and
// bindings): the write would only cost a request.
func WithReleasedStatus(keep func(obj client.Object) bool) Option {
	return func(o *options) { o.keepReleasedStatus = keep }
}

// WithManagedControlPlaneWatch makes the reconciler watch
// ManagedControlPlanes on the onboarding cluster and reconcile the service
// object of the same name and namespace when one appears or changes. Use it
// with the default cluster access (package clusteraccess), which reports a
// missing ManagedControlPlane as invalid user input and does not retry: the
// watch resumes the object when the MCP is created. It needs list and watch
// on managedcontrolplanes.core.openmcp.cloud on the onboarding cluster.
func WithManagedControlPlaneWatch() Option { return func(o *options) { o.mcpWatch = true } }

type backoff struct{ base, max time.Duration }

// referenceWatch re-enqueues every object when an object of a namespace on
// the platform cluster that the ProviderConfig references changes.
type referenceWatch[O any] struct {
	namespace  string
	referenced func(Config, O) bool
}

func defaultOptions() options {
	return options{
		pollJitter:      DefaultPollJitter,
		pollInterval:    DefaultPollInterval,
		minPollInterval: DefaultMinPollInterval,
		waitInterval:    DefaultWaitInterval,
	}
}

// WithEnvironment sets the provider's environment (its --environment):
// objects labelled (EnvironmentLabel) for another environment are ignored.
// Without it, every object is served.
func WithEnvironment(env string) Option {
	return func(o *options) { o.environment = env }
}

// WithEventRecorder sets where events are recorded. The default is the
// manager's recorder named like the controller.
func WithEventRecorder(rec events.EventRecorder) Option {
	return func(o *options) { o.recorder = rec }
}

// WithPollJitter sets the fraction by which poll intervals vary at random:
// 0.1 (the default) means ±10%. Values outside [0, 1) are clamped; 0
// disables jitter.
func WithPollJitter(fraction float64) Option {
	return func(o *options) { o.pollJitter = fraction }
}

// WithDefaultPollInterval sets the poll interval used when neither the
// object (PollIntervalAnnotation) nor the ProviderConfig sets one. The
// default is DefaultPollInterval; values that are not positive are ignored.
func WithDefaultPollInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.pollInterval = d
		}
	}
}

// WithMinPollInterval sets the shortest poll interval an annotation or
// ProviderConfig can ask for (default DefaultMinPollInterval), which keeps
// a mistyped "1ms" from turning into a hot loop against the clusters.
func WithMinPollInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.minPollInterval = d
		}
	}
}

// WithWaitInterval sets how often the runtime looks again while it waits
// for cluster access, for the release of access, or for users to remove
// their objects before deletion (default DefaultWaitInterval).
func WithWaitInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.waitInterval = d
		}
	}
}

// WithControllerName names the controller (in logs and in controller-runtime
// metrics). The default is the lower-case kind of the API type. Names must
// be unique within a manager.
func WithControllerName(name string) Option {
	return func(o *options) { o.controllerName = name }
}

// WithControllerOptions sets controller-runtime's options of the controller
// (MaxConcurrentReconciles, SkipNameValidation, ...). WithBackoff, when
// given, overrides the RateLimiter set here.
func WithControllerOptions(opts controller.Options) Option {
	return func(o *options) { o.controllerOptions = opts }
}

// WithBackoff sets the exponential backoff for objects whose reconcile
// failed: the first retry after base, each next one after twice as long, up
// to limit. The default is controller-runtime's (5ms to 1000s per object,
// within an overall rate limit).
func WithBackoff(base, limit time.Duration) Option {
	return func(o *options) {
		if base > 0 && limit >= base {
			o.backoff = &backoff{base: base, max: limit}
		}
	}
}

// WithSecretWatch watches the Secrets in namespace on the platform cluster
// (usually the provider's own namespace, POD_NAMESPACE): when one changes
// and referenced(current ProviderConfig, Secret) is true, every object is
// reconciled, and the change does not count as drift. referenced must not
// block; it gets the Secret as the platform cluster's cache holds it.
//
// The platform cluster's cache must be allowed to list and watch Secrets in
// namespace; restrict it to that namespace (cache.Options.ByObject or
// DefaultNamespaces) so that it neither needs cluster-wide RBAC nor holds
// every Secret of the platform.
func WithSecretWatch[C Config](namespace string, referenced func(C, *corev1.Secret) bool) Option {
	return func(o *options) {
		if referenced == nil {
			return
		}
		o.secretWatch = &referenceWatch[*corev1.Secret]{namespace: namespace, referenced: typedReference(referenced)}
	}
}

// WithConfigMapWatch is WithSecretWatch for ConfigMaps.
func WithConfigMapWatch[C Config](namespace string, referenced func(C, *corev1.ConfigMap) bool) Option {
	return func(o *options) {
		if referenced == nil {
			return
		}
		o.configMapWatch = &referenceWatch[*corev1.ConfigMap]{namespace: namespace, referenced: typedReference(referenced)}
	}
}

// typedReference adapts a function of the provider's Config type to one of
// the Config interface. A config of another type references nothing.
func typedReference[C Config, O any](fn func(C, O) bool) func(Config, O) bool {
	return func(cfg Config, obj O) bool {
		c, ok := cfg.(C)
		return ok && fn(c, obj)
	}
}

// rateLimiter returns the controller's rate limiter for WithBackoff, or nil
// for controller-runtime's default.
func (b *backoff) rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	if b == nil {
		return nil
	}
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](b.base, b.max)
}
