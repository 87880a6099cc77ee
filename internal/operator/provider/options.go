package provider

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// Defaults of the options.
const (
	// DefaultOperatorNamespace is where image pull secrets are read from
	// when WithOperatorNamespace is not given.
	DefaultOperatorNamespace = "marketplane-system"
	// DefaultEnvironment is the --environment passed to providers when
	// WithEnvironment is not given.
	DefaultEnvironment = "default"
	// DefaultWaitInterval is how often the reconciler looks again while it
	// waits for something it has no watch on: a missing image pull secret,
	// a namespace that is still being deleted, the clean-up of a deleted
	// provider.
	DefaultWaitInterval = 2 * time.Second
	// DefaultMissingSecretInterval is how often a missing image pull
	// secret is looked for again.
	DefaultMissingSecretInterval = 30 * time.Second
)

// Option configures a Reconciler (and, through Setup, all three).
type Option func(*options)

type options struct {
	operatorNamespace     string
	environment           string
	recorder              events.EventRecorder
	reader                client.Reader
	controllerOptions     controller.Options
	waitInterval          time.Duration
	missingSecretInterval time.Duration
	notifier              *Notifier
	tenantRoles           OnboardingClient
}

func defaultOptions() options {
	return options{
		operatorNamespace:     DefaultOperatorNamespace,
		environment:           DefaultEnvironment,
		waitInterval:          DefaultWaitInterval,
		missingSecretInterval: DefaultMissingSecretInterval,
	}
}

// WithOperatorNamespace sets the operator's namespace, where the Secrets
// that providers name in spec.imagePullSecrets are read from.
func WithOperatorNamespace(ns string) Option {
	return func(o *options) { o.operatorNamespace = ns }
}

// WithEnvironment sets the --environment passed to every provider, the
// operator's own --environment.
func WithEnvironment(env string) Option {
	return func(o *options) { o.environment = env }
}

// WithEventRecorder sets where condition transitions are recorded as
// events. Setup defaults to the manager's recorder; NewReconciler records
// none without it.
func WithEventRecorder(rec events.EventRecorder) Option {
	return func(o *options) { o.recorder = rec }
}

// WithAPIReader sets the reader for provider objects, Secrets and the
// objects whose removal the reconciler waits for. It should read from the
// API server rather than a cache, so that the reconciler sees fresh status
// and does not make the manager cache every Secret of the cluster. Setup
// defaults to the manager's API reader; NewReconciler to the client.
func WithAPIReader(r client.Reader) Option {
	return func(o *options) { o.reader = r }
}

// WithControllerOptions sets the options of the controllers
// SetupWithManager builds, e.g. MaxConcurrentReconciles, or
// SkipNameValidation for tests that start several managers in one process.
func WithControllerOptions(co controller.Options) Option {
	return func(o *options) { o.controllerOptions = co }
}

// WithWaitInterval sets how often the reconciler looks again while waiting
// for something it has no watch on (see DefaultWaitInterval).
func WithWaitInterval(d time.Duration) Option {
	return func(o *options) { o.waitInterval = d }
}

// WithMissingSecretInterval sets how often a missing image pull secret is
// looked for again (see DefaultMissingSecretInterval).
func WithMissingSecretInterval(d time.Duration) Option {
	return func(o *options) { o.missingSecretInterval = d }
}

// OnboardingClient returns a client of the onboarding cluster, or nil while
// that cluster is not known yet.
type OnboardingClient func(ctx context.Context) (client.Client, error)

// WithTenantRoles makes the ServiceProvider reconciler keep, on the
// onboarding cluster that onboarding returns, the aggregated ClusterRoles
// that add each provider's service kinds to the built-in view, edit and
// admin roles (tenantroles.go). Without it the reconciler writes none.
func WithTenantRoles(onboarding OnboardingClient) Option {
	return func(o *options) { o.tenantRoles = onboarding }
}
