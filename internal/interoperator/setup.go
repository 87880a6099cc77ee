package interoperator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/api/install"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/internal/interoperator/scheduling"
	"github.com/marketplane/marketplane/internal/interoperator/sisters"
	"github.com/marketplane/marketplane/internal/interoperator/sourcewatch"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Name is the name of the inter-operator binary, and its default provider
// name (and so the name of its ProviderConfig).
const Name = "marketplane-interoperator"

// DefaultProviderName is the provider name the landscape gives the
// inter-operator; its ProviderConfig has this name.
const DefaultProviderName = "interoperator"

// Defaults of the options.
const (
	// DefaultMaxConcurrentReconciles is how many instances, and how many
	// bindings, are reconciled at once.
	DefaultMaxConcurrentReconciles = 8
	// DefaultBackoffBase and DefaultBackoffMax bound the exponential
	// backoff of retries after transient errors.
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 2 * time.Minute
)

// Option configures Setup.
type Option func(*options)

type options struct {
	environment      string
	concurrency      int
	concurrencySet   bool
	qps              float32
	burst            int
	minWait, maxWait time.Duration
	watchedWait      time.Duration
	backoffBase      time.Duration
	backoffMax       time.Duration
	refresh          time.Duration
	requestTimeout   time.Duration
	clusterChecks    []time.Duration
	namePrefix       string
	skipNameCheck    bool
	httpClient       *http.Client
	runtime          []spruntime.Option
}

// WithEnvironment sets the environment (--environment): objects labelled
// for another environment are left alone.
func WithEnvironment(env string) Option { return func(o *options) { o.environment = env } }

// WithMaxConcurrentReconciles sets how many instances, and how many
// bindings, are reconciled at once. Without it, Service Fabrik's
// interoperator-config ConfigMap decides (instanceWorkerCount,
// bindingWorkerCount), else DefaultMaxConcurrentReconciles.
func WithMaxConcurrentReconciles(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.concurrency, o.concurrencySet = n, true
		}
	}
}

// WithTargetRateLimits sets the client-side rate limits of the clients of
// target clusters (clusters.DefaultQPS, clusters.DefaultBurst).
func WithTargetRateLimits(qps float32, burst int) Option {
	return func(o *options) { o.qps, o.burst = qps, burst }
}

// WithProgressWait sets the backoff with which operations in progress are
// looked at again (one to thirty seconds).
func WithProgressWait(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.minWait, o.maxWait = minWait, maxWait }
}

// WithWatchedWait sets how often an operation in progress whose sources
// are all watched is looked at without an event
// (provisioner.DefaultWatchedWait).
func WithWatchedWait(d time.Duration) Option {
	return func(o *options) { o.watchedWait = d }
}

// WithBackoff sets the backoff of retries after transient errors
// (DefaultBackoffBase to DefaultBackoffMax).
func WithBackoff(base, maxWait time.Duration) Option {
	return func(o *options) { o.backoffBase, o.backoffMax = base, maxWait }
}

// WithTargetRequestTimeout bounds every request to a target cluster, its
// retries included (clusters.DefaultRequestTimeout).
func WithTargetRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// WithKubeconfigRefresh sets how long an SFCluster's client is used before
// its kubeconfig Secret is read again (clusters.DefaultRefreshInterval).
func WithKubeconfigRefresh(d time.Duration) Option { return func(o *options) { o.refresh = d } }

// WithClusterChecks sets how often the SFCluster status controller checks
// a Ready cluster and the backoff of its checks of one that is not
// (clusters.DefaultReadyCheckInterval, DefaultMinCheckBackoff,
// DefaultMaxCheckBackoff).
func WithClusterChecks(ready, minBackoff, maxBackoff time.Duration) Option {
	return func(o *options) { o.clusterChecks = []time.Duration{ready, minBackoff, maxBackoff} }
}

// WithControllerNamePrefix prefixes the names of the controllers (in logs
// and metrics: <prefix>sfserviceinstance, <prefix>sfservicebinding,
// <prefix>sfcatalog) and skips controller-runtime's check that names are
// unique in the process, so that tests and benchmarks can run several
// inter-operators side by side.
func WithControllerNamePrefix(prefix string) Option {
	return func(o *options) { o.namePrefix, o.skipNameCheck = prefix, true }
}

// WithHTTPClient sets the client that fetches http(s) template urls.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRuntimeOptions passes further options to the provider runtime of the
// instance and binding controllers (for example spruntime.WithEventRecorder
// or spruntime.WithDefaultPollInterval); they come after Setup's own.
func WithRuntimeOptions(opts ...spruntime.Option) Option {
	return func(o *options) { o.runtime = append(o.runtime, opts...) }
}

// Controller names without a prefix.
const (
	InstanceControllerName = "sfserviceinstance"
	BindingControllerName  = "sfservicebinding"
	CatalogControllerName  = "sfcatalog"
	ClusterControllerName  = clusters.DefaultStatusControllerName
	SisterControllerName   = sisters.DefaultControllerName
)

// Interoperator is what Setup registered.
type Interoperator struct {
	// Instances and Bindings are the provisioner's reconcilers.
	*provisioner.Controllers
	// Catalog validates SFServices and SFPlans.
	Catalog *catalog.Reconciler
	// Engine renders and applies for both.
	Engine *provisioner.Engine
	// Registry hands out the target clusters.
	Registry *clusters.Registry
	// ClusterStatus writes the SFClusters' status and offboards them.
	ClusterStatus *clusters.StatusReconciler
	// Replicator replicates instances and bindings to the SFClusters in
	// provisioning mode replicate.
	Replicator *replicate.Replicator
	// Sources wakes operations in progress when their sources change.
	Sources *sourcewatch.Watcher
	// Sisters installs the provisioner on the SFClusters in provisioning
	// mode replicate.
	Sisters *sisters.Reconciler
}

// Setup registers the inter-operator named providerName with mgr, a
// manager on the onboarding cluster to which platform has been added (see
// pkg/spruntime): the catalog controller, and the instance and binding
// controllers. It registers the field indexes it needs on both clusters, so
// it must be called before the manager starts.
func Setup(ctx context.Context, mgr ctrl.Manager, platform cluster.Cluster, providerName string, opts ...Option) (*Interoperator, error) {
	if mgr == nil || platform == nil {
		return nil, errors.New("setup inter-operator: a manager and the platform cluster are required")
	}
	o := newOptions(opts)
	if err := catalog.IndexFields(ctx, platform.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := provisioner.IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	registry := clusters.NewRegistry(platform.GetClient(), platform.GetAPIReader(), mgr.GetScheme(), o.registryOptions()...)
	sisterCRDs, err := CRDs()
	if err != nil {
		return nil, err
	}
	iop := &Interoperator{Registry: registry}
	if err := iop.setupEngine(mgr, platform, sisterCRDs, o); err != nil {
		return nil, err
	}

	instanceWorkers, bindingWorkers := o.concurrency, o.concurrency
	if !o.concurrencySet {
		instanceWorkers, bindingWorkers = serviceFabrikWorkers(ctx, platform, providerName, o.concurrency)
	}
	if iop.Controllers, err = provisioner.SetupWithManager(mgr, providerName, platform, iop.Engine,
		o.runtimeOptions(InstanceControllerName, instanceWorkers), o.runtimeOptions(BindingControllerName, bindingWorkers)); err != nil {
		return nil, err
	}
	iop.Catalog = catalog.NewReconciler(providerName, platform,
		catalog.WithControllerName(o.namePrefix+CatalogControllerName),
		catalog.WithInstances(provisioner.IndexPlanID, provisioner.IndexServiceID, o.environment),
		catalog.WithControllerOptions(controller.Options{SkipNameValidation: o.skipNameValidation()}))
	if err := iop.Catalog.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	iop.ClusterStatus = clusters.NewStatusReconciler(providerName, platform, mgr.GetClient(), provisioner.IndexClusterID, registry, o.statusOptions()...)
	if err := iop.ClusterStatus.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := iop.setupSisters(mgr, platform, providerName, sisterCRDs, o); err != nil {
		return nil, err
	}
	if err := setupWorkloadClusters(ctx, mgr, platform, providerName, o); err != nil {
		return nil, err
	}
	return iop, nil
}

// newOptions applies opts to the defaults.
func newOptions(opts []Option) options {
	o := options{
		concurrency: DefaultMaxConcurrentReconciles,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// registryOptions are the target clusters' client settings o sets.
func (o options) registryOptions() []clusters.Option {
	var regOpts []clusters.Option
	if o.qps > 0 {
		regOpts = append(regOpts, clusters.WithRateLimits(o.qps, o.burst))
	}
	if o.refresh > 0 {
		regOpts = append(regOpts, clusters.WithRefreshInterval(o.refresh))
	}
	if o.requestTimeout > 0 {
		regOpts = append(regOpts, clusters.WithRequestTimeout(o.requestTimeout))
	}
	return regOpts
}

// skipNameValidation is the controllers' SkipNameValidation: set only
// when o asks for it.
func (o options) skipNameValidation() *bool {
	if o.skipNameCheck {
		return ptr.To(true)
	}
	return nil
}

// runtimeOptions are the provider runtime's options of the controller
// name with workers concurrent reconciles.
func (o options) runtimeOptions(name string, workers int) []spruntime.Option {
	return append([]spruntime.Option{
		spruntime.WithEnvironment(o.environment),
		spruntime.WithControllerName(o.namePrefix + name),
		spruntime.WithControllerOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: o.skipNameValidation()}),
		spruntime.WithBackoff(o.backoffBase, o.backoffMax),
	}, o.runtime...)
}

// statusOptions are the SFCluster status controller's options.
func (o options) statusOptions() []clusters.StatusOption {
	statusOpts := []clusters.StatusOption{clusters.WithStatusControllerName(o.namePrefix + ClusterControllerName),
		clusters.WithStatusControllerOptions(controller.Options{SkipNameValidation: o.skipNameValidation(), MaxConcurrentReconciles: 4})}
	if o.httpClient != nil {
		statusOpts = append(statusOpts, clusters.WithComponentHTTPClient(o.httpClient))
	}
	if len(o.clusterChecks) == 3 {
		statusOpts = append(statusOpts, clusters.WithCheckIntervals(o.clusterChecks[0], o.clusterChecks[1], o.clusterChecks[2]))
	}
	return statusOpts
}

// setupEngine builds the provisioning Engine of iop.Registry, with the
// Replicator and the source watcher it hands work to, and adds those two
// to mgr.
func (iop *Interoperator) setupEngine(mgr ctrl.Manager, platform cluster.Cluster, sisterCRDs []*apiextensionsv1.CustomResourceDefinition, o options) error {
	var engOpts []provisioner.EngineOption
	if o.minWait > 0 {
		engOpts = append(engOpts, provisioner.WithProgressWait(o.minWait, o.maxWait))
	}
	if o.httpClient != nil {
		engOpts = append(engOpts, provisioner.WithHTTPClient(o.httpClient))
	}
	// SFClusters in provisioning mode replicate get their instances and
	// bindings copied there (package replicate); the Replicator's caches of
	// the sisters live as long as the manager.
	var repOpts []replicate.Option
	if o.maxWait > 0 {
		repOpts = append(repOpts, replicate.WithPollInterval(o.maxWait))
	}
	iop.Replicator = replicate.New(mgr.GetScheme(), mgr.GetClient(), platform, sisterCRDs, repOpts...)
	if err := mgr.Add(iop.Replicator); err != nil {
		return fmt.Errorf("setup inter-operator: add the replicator: %w", err)
	}
	engOpts = append(engOpts, provisioner.WithReplicator(iop.Replicator, iop.Replicator.InstanceEvents(), iop.Replicator.BindingEvents()))
	// Operations in progress are woken by changes of their sources on the
	// target clusters (package sourcewatch); a cluster that leaves, or
	// whose credentials are read again, has its source informers stopped.
	sources := sourcewatch.New()
	if err := mgr.Add(sources); err != nil {
		return fmt.Errorf("setup inter-operator: add the source watcher: %w", err)
	}
	iop.Sources = sources
	iop.Registry.OnForget(func(_, name string) { sources.ForgetCluster(name) })
	engOpts = append(engOpts, provisioner.WithSourceWatcher(sources, o.watchedWait))
	iop.Engine = provisioner.NewEngine(platform, iop.Registry, engOpts...)
	return nil
}

// setupSisters sets up Service Fabrik's Service Replicator, the whole
// catalog on every sister (replicate/catalog.go), and the controller that
// gives the sisters a provisioner of their own (package sisters): what
// run needs on its platform and onboarding cluster, both the sister.
func (iop *Interoperator) setupSisters(mgr ctrl.Manager, platform cluster.Cluster, providerName string, sisterCRDs []*apiextensionsv1.CustomResourceDefinition, o options) error {
	mirror := replicate.NewCatalogMirror(iop.Replicator, providerName, platform, iop.Registry,
		replicate.WithCatalogControllerName(o.namePrefix+replicate.DefaultCatalogMirrorName),
		// Several at once: a sister that does not answer holds a worker
		// for the request timeout.
		replicate.WithCatalogControllerOptions(controller.Options{SkipNameValidation: o.skipNameValidation(), MaxConcurrentReconciles: 4}),
		replicate.WithCatalogBackoff(o.backoffBase, o.backoffMax))
	if err := mirror.SetupWithManager(mgr); err != nil {
		return err
	}
	iop.Sisters = sisters.New(providerName, o.environment, platform, iop.Registry, sisterCRDs, SisterPermissions(),
		sisters.WithControllerName(o.namePrefix+SisterControllerName),
		sisters.WithControllerOptions(controller.Options{SkipNameValidation: o.skipNameValidation(), MaxConcurrentReconciles: 4}))
	return iop.Sisters.SetupWithManager(mgr)
}

// setupWorkloadClusters makes openMCP workload Clusters SFClusters
// (spec.workloadClusters), where the platform cluster serves the Cluster
// kind.
func setupWorkloadClusters(ctx context.Context, mgr ctrl.Manager, platform cluster.Cluster, providerName string, o options) error {
	if _, err := platform.GetRESTMapper().RESTMapping(clustersv1alpha1.GroupVersion.WithKind("Cluster").GroupKind(), clustersv1alpha1.GroupVersion.Version); err != nil {
		ctrl.LoggerFrom(ctx).Info("The platform cluster serves no clusters.openmcp.cloud Clusters; spec.workloadClusters is not available", "reason", err.Error())
		return nil
	}
	workload := clusters.NewWorkloadClusterReconciler(providerName, platform, o.namePrefix+clusters.DefaultWorkloadControllerName,
		controller.Options{SkipNameValidation: o.skipNameValidation()})
	return workload.SetupWithManager(mgr)
}

// serviceFabrikWorkers returns how many instances and bindings are
// reconciled at once by Service Fabrik's interoperator-config ConfigMap
// (instanceWorkerCount, bindingWorkerCount) in the catalog namespace, or
// def for what it does not set. Like Service Fabrik, it reads the
// ConfigMap once, at start, and uses the defaults when it cannot.
func serviceFabrikWorkers(ctx context.Context, platform cluster.Cluster, providerName string, def int) (instances, bindings int) {
	log := ctrl.LoggerFrom(ctx).WithName("setup")
	reader := platform.GetAPIReader()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := reader.Get(ctx, client.ObjectKey{Name: providerName}, cfg); err != nil && !apierrors.IsNotFound(err) {
		log.Error(err, "Cannot read the ProviderConfig for the interoperator-config ConfigMap; using the default worker counts")
		return def, def
	}
	sf, found, err := scheduling.ReadSFConfig(ctx, reader, cfg.CatalogNamespace())
	if err != nil {
		log.Error(err, "Ignoring the interoperator-config ConfigMap; using the default worker counts")
		return def, def
	}
	instances, bindings = def, def
	if found && sf.InstanceWorkerCount > 0 {
		instances = sf.InstanceWorkerCount
	}
	if found && sf.BindingWorkerCount > 0 {
		bindings = sf.BindingWorkerCount
	}
	return instances, bindings
}

// CRDs returns the CRDs the inter-operator installs: the Service Fabrik
// kinds (SFServiceInstance and SFServiceBinding on the onboarding cluster;
// SFService, SFPlan and SFCluster on the platform cluster) and its
// ProviderConfig (platform).
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	groups := []string{osbv1alpha1.GroupVersion.Group, resourcev1alpha1.GroupVersion.Group, interoperatorv1alpha1.GroupVersion.Group}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if slices.Contains(groups, crd.Spec.Group) {
			out = append(out, crd)
		}
	}
	return out, nil
}

// RunPermissions is what run may do on the onboarding cluster: manage the
// Service Fabrik objects, write bind response Secrets, record events.
func RunPermissions() clusteraccess.Permissions {
	return clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfserviceinstances", "sfservicebindings"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
		{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfserviceinstances/status", "sfservicebindings/status"}, Verbs: []string{"get", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "patch", "delete"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
}

// PlatformPermissions is what run does on its platform cluster outside the
// catalog namespace, with the verbs its requests use (the chart's
// inter-operator rules, docs/chart.md, with the provider contract's reads
// of its own groups): watch its ProviderConfig and the catalog (SFServices,
// SFPlans, SFClusters; the caches list them cluster-wide), patch them
// (the catalog's finalizer) and their status and the SFClusters
// (finalizer, round-robin position), and watch
// openMCP Clusters and AccessRequests, which the workload-cluster
// controller does where the platform serves them. The provisioner it
// installs on a sister, whose platform cluster is the sister itself, gets
// these with RunPermissions (package sisters).
func PlatformPermissions() clusteraccess.Permissions {
	osb, res := osbv1alpha1.GroupVersion.Group, resourcev1alpha1.GroupVersion.Group
	read := []string{"get", "list", "watch"}
	return clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{osb}, Resources: []string{"sfservices", "sfplans"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{osb}, Resources: []string{"sfservices/status", "sfplans/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{res}, Resources: []string{"sfclusters"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{res}, Resources: []string{"sfclusters/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{interoperatorv1alpha1.GroupVersion.Group}, Resources: []string{"providerconfigs"}, Verbs: read},
		{APIGroups: []string{clustersv1alpha1.GroupVersion.Group}, Resources: []string{"clusters", "accessrequests"}, Verbs: read},
	}}
}

// CatalogPermissions is what run does in the catalog namespace of its
// platform cluster besides reading the SFClusters' kubeconfig Secrets,
// which a grant names one by one: read ConfigMaps (Service Fabrik's
// interoperator-config, templates kept in ConfigMaps).
func CatalogPermissions() clusteraccess.Permissions {
	return clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	}}
}

// SisterPermissions are the RBAC rules of the inter-operator the sisters
// run, whose platform and onboarding cluster is the sister: RunPermissions
// and PlatformPermissions cluster-wide, CatalogPermissions in the catalog
// namespace.
func SisterPermissions() sisters.Permissions {
	return sisters.Permissions{
		Cluster: slices.Concat(RunPermissions().Rules, PlatformPermissions().Rules),
		Catalog: slices.Clone(CatalogPermissions().Rules),
	}
}

// AccessPolicy is the spec.accessPolicy the inter-operator's ServiceProvider
// needs (docs/security.md): it owns the Service Fabrik groups and its
// config group, all reserved, and writes the bind response Secrets into the
// tenants' namespaces on the onboarding cluster.
func AccessPolicy() *providerv1alpha1.AccessPolicy {
	return &providerv1alpha1.AccessPolicy{
		APIGroups: []string{osbv1alpha1.GroupVersion.Group, resourcev1alpha1.GroupVersion.Group, interoperatorv1alpha1.GroupVersion.Group},
		Onboarding: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "patch", "delete"}},
		},
	}
}

// Provider describes the marketplane-interoperator binary. It registers no
// service kinds: instances are not named after ManagedControlPlanes.
func Provider(opts ...Option) (providerapp.Provider, error) {
	scheme, err := install.NewScheme()
	if err != nil {
		return providerapp.Provider{}, err
	}
	list, err := CRDs()
	if err != nil {
		return providerapp.Provider{}, err
	}
	perms := RunPermissions()
	return providerapp.Provider{
		Name:           Name,
		Scheme:         scheme,
		CRDs:           list,
		RunPermissions: &perms,
		Setup: func(ctx context.Context, mgr ctrl.Manager, env providerapp.Env) error {
			_, err := Setup(ctx, mgr, env.Platform, env.Flags.ProviderName, append([]Option{WithEnvironment(env.Flags.Environment)}, opts...)...)
			if err != nil {
				return fmt.Errorf("set up the inter-operator: %w", err)
			}
			return nil
		},
	}, nil
}
