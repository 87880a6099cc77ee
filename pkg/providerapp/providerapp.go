package providerapp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/version"
)

// Provider describes a provider binary.
type Provider struct {
	// Name is the binary's name, for help texts and field ownership.
	Name string
	// Scheme holds the provider's API and ProviderConfig types (and the
	// built-in types its controllers use).
	Scheme *runtime.Scheme
	// CRDs are the provider's CRDs, each labelled openmcp.cloud/cluster:
	// "onboarding" ones (the ServiceProviderAPI) are installed into the
	// onboarding cluster, "platform" ones (the ProviderConfig) into the
	// platform cluster.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ServiceKinds are registered in the ServiceProvider's
	// status.resources: the kinds of service objects named after
	// ManagedControlPlanes, which are deleted with them.
	ServiceKinds []schema.GroupVersionKind
	// RunPermissions is what run may do on the onboarding cluster; by
	// default everything on the resources of the ServiceKinds' groups and
	// creating events.
	RunPermissions *clusteraccess.Permissions
	// Setup registers the provider's controllers with mgr (a manager on
	// the onboarding cluster) using what Env offers.
	Setup func(ctx context.Context, mgr ctrl.Manager, env Env) error
	// InitRules are what init asks for on the onboarding cluster in
	// addition to installing the CRDs, for InitOnboarding. The operator
	// grants them only within the provider's access policy.
	InitRules []rbacv1.PolicyRule
	// InitOnboarding, when set, runs at the end of init with the onboarding
	// cluster's client (InitRules' rights), after the CRDs are installed:
	// for what a provider sets up there once, such as RBAC for its
	// tenants. Like init, it must be idempotent.
	InitOnboarding func(ctx context.Context, onboarding client.Client) error
}

// Env is what run hands to Setup.
type Env struct {
	// Flags are the contract flags (environment, provider name, verbosity).
	Flags contract.Flags
	// Pod is what the contract's environment variables say about the
	// process; Pod.Namespace is the provider's own namespace.
	Pod contract.Pod
	// Platform is the platform cluster, added to the manager.
	Platform cluster.Cluster
	// Access obtains MCP and workload clusters through ClusterRequests and
	// AccessRequests in the provider's namespace; use
	// clusteraccess.For[T](env.Access) as the runtime's ClusterAccess.
	// Its permissions come from the options given to Command or Main.
	Access *clusteraccess.Manager
}

// LeaseTimes are the timings of leader election.
type LeaseTimes struct {
	// Duration is how long a lease lasts without renewal: a replica
	// takes over at most this long after the leader died.
	Duration time.Duration
	// RenewDeadline is how long the leader tries to renew before it
	// gives up leadership.
	RenewDeadline time.Duration
	// RetryPeriod is how often replicas try to acquire or renew.
	RetryPeriod time.Duration
}

// DefaultLeaseTimes are shorter than controller-runtime's (15 s, 10 s,
// 2 s), so that a replica takes over within about 12 s after the leader
// was killed (issue #14's target is 15 s); the renewal still has 7 s to
// get through a loaded API server.
var DefaultLeaseTimes = LeaseTimes{Duration: 10 * time.Second, RenewDeadline: 7 * time.Second, RetryPeriod: 2 * time.Second}

// flags are init's and run's command-line flags.
type flags struct {
	contract.Flags
	onboardingKubeconfig string
	onboardingIsPlatform bool
	kubeconfig           string
	leaderElect          bool
	lease                LeaseTimes
	metrics              metricsauth.Flags
	probeAddr            string
	timeout              time.Duration
	qps                  float32
	burst                int
}

// Client-side rate limits of the provider's clients, the defaults of the
// flags --kube-api-qps and --kube-api-burst. A negative QPS turns client-go's
// client-side limiter off: the API servers protect themselves with API
// Priority and Fairness, which queues and rejects by priority level across
// all clients, while a fixed limit per client only slows a provider down on
// a healthy server (the inter-operator made two writes per instance, so 50
// QPS held it at about 25 instances/s). Operators lower the limits with the
// flags; the burst applies only then.
const (
	DefaultQPS   = -1
	DefaultBurst = 100
)

// Command returns the provider's root command with init and run. access
// configures the clusteraccess.Manager run hands to Setup.
func (p Provider) Command(access ...clusteraccess.Option) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{Use: p.Name, Short: p.Name + " service provider", SilenceUsage: true}
	version.AddFlag(root)
	f.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the platform cluster (default: in-cluster or $KUBECONFIG)")
	root.PersistentFlags().StringVar(&f.onboardingKubeconfig, "onboarding-kubeconfig", "", "kubeconfig of the onboarding cluster, for development (default: request access through the platform)")
	root.PersistentFlags().BoolVar(&f.onboardingIsPlatform, FlagOnboardingIsPlatform, false, "use the platform cluster as the onboarding cluster too, with the platform's credentials (a provider whose one cluster is both, such as the inter-operator on a sister cluster)")
	root.PersistentFlags().DurationVar(&f.timeout, "access-timeout", 5*time.Minute, "how long to wait for onboarding access")
	f.addRateLimitFlags(root.PersistentFlags())
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Install the provider's CRDs and register its service kinds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return p.init(cmd.Context(), f)
		},
	}
	runCmd := &cobra.Command{
		Use:   "run",
		Short: "Run the provider's controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return p.run(cmd.Context(), f, access)
		},
	}
	runCmd.Flags().BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader (the operator sets it with more than one replica)")
	f.lease = DefaultLeaseTimes
	runCmd.Flags().DurationVar(&f.lease.Duration, "leader-elect-lease-duration", DefaultLeaseTimes.Duration, "how long a leader's lease lasts without renewal: a replica takes over at most this long after the leader died")
	runCmd.Flags().DurationVar(&f.lease.RenewDeadline, "leader-elect-renew-deadline", DefaultLeaseTimes.RenewDeadline, "how long the leader tries to renew its lease before it gives up leadership (and exits)")
	runCmd.Flags().DurationVar(&f.lease.RetryPeriod, "leader-elect-retry-period", DefaultLeaseTimes.RetryPeriod, "how often replicas try to acquire or renew the lease")
	// Metrics listen on loopback unless the operator exposes them (it
	// passes --metrics-bind-address=:<port> with a Service in front); then
	// they are served over HTTPS to authorized bearer tokens only.
	f.metrics.AddFlags(runCmd.Flags(), metricsauth.DefaultBindAddress)
	runCmd.Flags().StringVar(&f.probeAddr, "health-probe-bind-address", "0", "address of /healthz and /readyz, e.g. 127.0.0.1:8081 (or :8081 for a kubelet's probes); off by default, since several providers share a host in the local landscape and the operator adds no probes")
	root.AddCommand(initCmd, runCmd)
	return root
}

// Main runs the command on os.Args with a signal-handling context and
// returns the process exit code: 0, or 1 on any error.
func (p Provider) Main(access ...clusteraccess.Option) int {
	return p.MainWithArgs(ctrl.SetupSignalHandler(), os.Args[1:], access...)
}

// MainWithArgs is Main with explicit arguments and context.
func (p Provider) MainWithArgs(ctx context.Context, args []string, access ...clusteraccess.Option) int {
	cmd := p.Command(access...)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		return 1
	}
	return 0
}

// init installs the CRDs and registers the service kinds. Every failure is
// returned, so that the init Job fails and the operator says so.
func (p Provider) init(ctx context.Context, f *flags) error {
	log := f.Logger().WithName("init")
	ctx = logr.NewContext(ctx, log)
	pod, err := contract.PodFromEnv()
	if err != nil {
		return err
	}
	platformCfg, err := f.loadConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	platform, err := client.New(platformCfg, client.Options{Scheme: p.Scheme})
	if err != nil {
		return fmt.Errorf("platform client: %w", err)
	}
	platformCRDs, onboardingCRDs := p.split()
	if err := crdinstall.Apply(ctx, platform, p.Name, 0, platformCRDs...); err != nil {
		return fmt.Errorf("install platform CRDs: %w", err)
	}
	onboarding, err := p.onboarding(ctx, f, platformCfg, platform, pod, "init", p.OnboardingPermissions("init"), nil)
	if err != nil {
		return err
	}
	if err := crdinstall.Apply(ctx, onboarding.Client(), p.Name, 0, onboardingCRDs...); err != nil {
		return fmt.Errorf("install onboarding CRDs: %w", err)
	}
	if err := RegisterServiceKinds(ctx, platform, f.ProviderName, p.ServiceKinds...); err != nil {
		return err
	}
	if p.InitOnboarding != nil {
		if err := p.InitOnboarding(ctx, onboarding.Client()); err != nil {
			return fmt.Errorf("initialize the onboarding cluster: %w", err)
		}
	}
	log.Info("Initialized", "platformCRDs", len(platformCRDs), "onboardingCRDs", len(onboardingCRDs), "serviceKinds", len(p.ServiceKinds))
	return nil
}

// run starts the manager on the onboarding cluster.
func (p Provider) run(ctx context.Context, f *flags, accessOpts []clusteraccess.Option) error {
	log := f.Logger()
	ctrl.SetLogger(log)
	version.RegisterMetrics()
	ctx = logr.NewContext(ctx, log)
	pod, err := contract.PodFromEnv()
	if err != nil {
		return err
	}
	platformCfg, err := f.loadConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	platform, err := cluster.New(platformCfg, func(o *cluster.Options) { o.Scheme = p.Scheme })
	if err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	access, err := clusteraccess.New(platform.GetClient(), f.ProviderName, pod.Namespace,
		append([]clusteraccess.Option{clusteraccess.WithAPIReader(platform.GetAPIReader()), f.rateLimits()}, accessOpts...)...)
	if err != nil {
		return err
	}
	onboarding, err := p.onboarding(ctx, f, platformCfg, platform.GetClient(), pod, "run", p.runPermissions(), access)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(onboarding.RESTConfig(), ctrl.Options{
		Scheme:                  p.Scheme,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        f.ProviderName + "-leader",
		LeaderElectionNamespace: pod.Namespace,
		LeaseDuration:           &f.lease.Duration,
		RenewDeadline:           &f.lease.RenewDeadline,
		RetryPeriod:             &f.lease.RetryPeriod,
		// The provider may hold leases only in its own namespace on the
		// platform cluster.
		LeaderElectionConfig: platformCfg,
		// Exposed metrics are authorized by the platform cluster, where
		// the provider's pods and a scraper's ServiceAccount live.
		Metrics:                metricsauth.ServerOptions(f.metrics, platformCfg),
		HealthProbeBindAddress: f.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.Add(platform); err != nil {
		return fmt.Errorf("add platform cluster: %w", err)
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ping", healthz.Ping)); err != nil {
		return fmt.Errorf("add health checks: %w", err)
	}
	if err := p.Setup(ctx, mgr, Env{Flags: f.Flags, Pod: pod, Platform: platform, Access: access}); err != nil {
		return fmt.Errorf("set up controllers: %w", err)
	}
	log.Info("Starting provider", "provider", f.ProviderName, "environment", f.Environment, "namespace", pod.Namespace)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// onboarding returns the onboarding cluster: the platform cluster with
// --onboarding-is-platform, from --onboarding-kubeconfig, or through a
// ClusterRequest and AccessRequest named after purpose ("init" or "run")
// in the provider's namespace.
func (p Provider) onboarding(ctx context.Context, f *flags, platformCfg *rest.Config, platform client.Client, pod contract.Pod, purpose string, perms clusteraccess.Permissions, m *clusteraccess.Manager) (*spruntime.Cluster, error) {
	if f.onboardingIsPlatform {
		c, err := client.New(rest.CopyConfig(platformCfg), client.Options{Scheme: p.Scheme})
		if err != nil {
			return nil, fmt.Errorf("onboarding client: %w", err)
		}
		return spruntime.NewCluster("onboarding", rest.CopyConfig(platformCfg), c), nil
	}
	if f.onboardingKubeconfig != "" {
		cfg, err := f.loadConfig(f.onboardingKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("onboarding cluster: %w", err)
		}
		c, err := client.New(cfg, client.Options{Scheme: p.Scheme})
		if err != nil {
			return nil, fmt.Errorf("onboarding client: %w", err)
		}
		return spruntime.NewCluster("onboarding", cfg, c), nil
	}
	if m == nil {
		var err error
		if m, err = clusteraccess.New(platform, f.ProviderName, pod.Namespace, clusteraccess.WithScheme(p.Scheme), f.rateLimits()); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := m.Onboarding(ctx, purpose, perms)
	if err != nil {
		return nil, fmt.Errorf("onboarding access: %w", err)
	}
	return c, nil
}

// OnboardingPermissions returns what init (purpose "init") and run (any
// other purpose) ask for on the onboarding cluster. Init may read and
// create CRDs, and update only its own onboarding CRDs, by name: the
// operator's access policy refuses updating CRDs in general, which would let
// one provider rewrite another's API. Init also asks for InitRules.
func (p Provider) OnboardingPermissions(purpose string) clusteraccess.Permissions {
	if purpose != "init" {
		return p.runPermissions()
	}
	const crdResource = "customresourcedefinitions"
	rules := []rbacv1.PolicyRule{{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{crdResource}, Verbs: []string{"get", "list", "watch", "create"}}}
	_, onboardingCRDs := p.split()
	names := make([]string, 0, len(onboardingCRDs))
	for _, crd := range onboardingCRDs {
		names = append(names, crd.Name)
	}
	// Without names the rule would cover every CRD.
	if len(names) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{crdResource}, ResourceNames: names, Verbs: []string{"update", "patch"}})
	}
	rules = append(rules, p.InitRules...)
	return clusteraccess.Permissions{Rules: rules}
}

func (p Provider) runPermissions() clusteraccess.Permissions {
	if p.RunPermissions != nil {
		return *p.RunPermissions
	}
	var groups []string
	for _, gvk := range p.ServiceKinds {
		if !slices.Contains(groups, gvk.Group) {
			groups = append(groups, gvk.Group)
		}
	}
	return clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: groups, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		// The runtime watches ManagedControlPlanes to notice an MCP
		// created after the service object.
		{APIGroups: []string{"core.openmcp.cloud"}, Resources: []string{"managedcontrolplanes"}, Verbs: []string{"get", "list", "watch"}},
	}}
}

// split returns the platform and the onboarding CRDs.
func (p Provider) split() (platform, onboarding []*apiextensionsv1.CustomResourceDefinition) {
	for _, crd := range p.CRDs {
		switch crd.Labels[crds.ClusterLabel] {
		case crds.ClusterPlatform:
			platform = append(platform, crd)
		default:
			onboarding = append(onboarding, crd)
		}
	}
	return platform, onboarding
}

// RegisterServiceKinds adds kinds to the status.resources of the
// ServiceProvider named provider, keeping what is there (the operator and
// other init runs never remove entries). It fails when the ServiceProvider
// does not exist: a provider started outside the operator has nowhere to
// register.
func RegisterServiceKinds(ctx context.Context, platform client.Client, provider string, kinds ...schema.GroupVersionKind) error {
	if len(kinds) == 0 {
		return nil
	}
	sp := &providerv1alpha1.ServiceProvider{}
	if err := platform.Get(ctx, client.ObjectKey{Name: provider}, sp); err != nil {
		return fmt.Errorf("get ServiceProvider %s to register its kinds: %w", provider, err)
	}
	before := sp.DeepCopy()
	for _, gvk := range kinds {
		entry := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		if !slices.Contains(sp.Status.Resources, entry) {
			sp.Status.Resources = append(sp.Status.Resources, entry)
		}
	}
	if len(sp.Status.Resources) == len(before.Status.Resources) {
		return nil
	}
	// An optimistic-lock merge patch: a concurrent writer of the status
	// makes this fail and init is retried, instead of one losing entries.
	if err := platform.Status().Patch(ctx, sp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("register service kinds in ServiceProvider %s: %w", provider, err)
	}
	return nil
}

// FlagOnboardingIsPlatform makes the platform cluster the onboarding
// cluster too: init and run use the platform's credentials (in-cluster, or
// --kubeconfig) for both and request no onboarding access. The
// inter-operator on a sister cluster runs so (docs/multicluster.md).
const FlagOnboardingIsPlatform = "onboarding-is-platform"

// validate checks the contract flags and that at most one source of the
// onboarding cluster is named.
func (f *flags) validate() error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.onboardingIsPlatform && f.onboardingKubeconfig != "" {
		return fmt.Errorf("--%s and --onboarding-kubeconfig exclude each other", FlagOnboardingIsPlatform)
	}
	return nil
}

// addRateLimitFlags defines --kube-api-qps and --kube-api-burst.
func (f *flags) addRateLimitFlags(fs *pflag.FlagSet) {
	fs.Float32Var(&f.qps, "kube-api-qps", DefaultQPS, "client-side limit of requests per second to each API server; negative: no client-side limit (the API server's priority and fairness protects it)")
	fs.IntVar(&f.burst, "kube-api-burst", DefaultBurst, "client-side burst of requests to each API server, when --kube-api-qps is positive")
}

// rateLimits applies the flags' client-side rate limits to the clusters
// obtained through AccessRequests (onboarding, MCP, workload).
func (f *flags) rateLimits() clusteraccess.Option {
	return clusteraccess.WithRESTConfig(func(c *rest.Config) { c.QPS, c.Burst = f.qps, f.burst })
}

// loadConfig loads a kubeconfig file, or in-cluster / $KUBECONFIG when path
// is empty, with the client-side rate limits of the flags.
func (f *flags) loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	return cfg, nil
}
