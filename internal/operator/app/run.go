package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/install"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/clusters/socketprovisioner"
	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/deploy/kube"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/internal/operator/mcp"
	"github.com/marketplane/marketplane/internal/operator/mcpaccess"
	"github.com/marketplane/marketplane/internal/operator/provider"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/version"
)

// Deployer names accepted by --deployer.
const (
	DeployerKubernetes = "kubernetes"
	DeployerProcess    = "process"
)

// runOptions are the flags of run beyond the shared ones.
type runOptions struct {
	namespace      string
	deployer       string
	imageMap       string
	stateDir       string
	leaderElect    bool
	lease          providerapp.LeaseTimes
	metrics        metricsauth.Flags
	probeAddr      string
	tenancies      map[string]string
	onboardingWait time.Duration
	provisioner    string
	profiles       []string
	profileMap     map[string]string
	tenantRoles    bool
}

func newRunCommand(o *options) *cobra.Command {
	ro := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the operator's controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			profiles, err := parseClusterProfiles(ro.profiles)
			if err != nil {
				return err
			}
			ro.profileMap = profiles
			if ro.namespace == "" {
				ro.namespace = os.Getenv(contract.EnvPodNamespace)
			}
			if ro.namespace == "" {
				ro.namespace = provider.DefaultOperatorNamespace
			}
			return run(cmd.Context(), o, ro)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ro.namespace, "namespace", "", "the operator's namespace: leader-election lease, image pull secrets (default $POD_NAMESPACE, else "+provider.DefaultOperatorNamespace+")")
	f.StringVar(&ro.deployer, "deployer", DeployerKubernetes, "how providers run: kubernetes (Job + Deployment) or process (local processes, for the local landscape)")
	f.StringVar(&ro.imageMap, "process-images", "", "with --deployer=process: file mapping provider images to local binaries")
	f.StringVar(&ro.stateDir, "state-dir", "", "with --deployer=process: directory for logs, tokens and init records")
	f.BoolVar(&ro.leaderElect, "leader-elect", false, "elect a leader, so that several replicas can run")
	ro.lease = providerapp.DefaultLeaseTimes
	f.DurationVar(&ro.lease.Duration, "leader-elect-lease-duration", providerapp.DefaultLeaseTimes.Duration, "how long the leader's lease lasts without renewal: a replica takes over at most this long after the leader died")
	f.DurationVar(&ro.lease.RenewDeadline, "leader-elect-renew-deadline", providerapp.DefaultLeaseTimes.RenewDeadline, "how long the leader tries to renew its lease before it gives up leadership (and exits)")
	f.DurationVar(&ro.lease.RetryPeriod, "leader-elect-retry-period", providerapp.DefaultLeaseTimes.RetryPeriod, "how often replicas try to acquire or renew the lease")
	ro.metrics.AddFlags(f, metricsauth.DefaultBindAddress)
	f.StringVar(&ro.probeAddr, "health-probe-bind-address", metricsauth.DefaultProbeBindAddress, `address of the /healthz and /readyz endpoints ("0" disables them); loopback by default, set ":8081" in a pod for the kubelet's probes`)
	f.StringToStringVar(&ro.tenancies, "tenancy", nil, "purpose=Exclusive|Shared overrides of the ClusterRequest tenancy (default mcp=Exclusive, others Shared)")
	f.StringVar(&ro.provisioner, "cluster-provisioner", "", "unix:///path of a cluster provider that creates Exclusive clusters when none is free (the local landscape's; see package socketprovisioner); without it such requests are Denied")
	f.StringArrayVar(&ro.profiles, "cluster-profile", nil, "purpose=ClusterProfile (repeatable): an Exclusive request of the purpose that finds no free cluster gets a new Cluster of that profile, made by the profile's ClusterProvider (e.g. mcp=kcp); --cluster-provisioner serves the other purposes")
	f.DurationVar(&ro.onboardingWait, "onboarding-retry-interval", 10*time.Second, "how often to look for the onboarding Cluster until it is registered")
	f.BoolVar(&ro.tenantRoles, "aggregate-tenant-roles", true, "keep, on the onboarding cluster, ClusterRoles that add each ServiceProvider's service kinds to the built-in view, edit and admin roles")
	return cmd
}

// run starts the manager on the platform cluster with every controller.
func run(ctx context.Context, o *options, ro *runOptions) error {
	log := o.Logger()
	ctrl.SetLogger(log)
	version.RegisterMetrics()
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	scheme, err := install.NewScheme()
	if err != nil {
		return err
	}
	// Jobs and Deployments are cached only when the operator manages them,
	// not every one in the platform cluster.
	managed := labels.SelectorFromSet(labels.Set{providerv1alpha1.ManagedByLabel: provider.ManagedByValue})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          ro.leaderElect,
		LeaderElectionID:        "marketplane-operator-" + o.ProviderName,
		LeaderElectionNamespace: ro.namespace,
		LeaseDuration:           &ro.lease.Duration,
		RenewDeadline:           &ro.lease.RenewDeadline,
		RetryPeriod:             &ro.lease.RetryPeriod,
		// Exposed metrics are authorized by the platform cluster itself.
		Metrics:                metricsauth.ServerOptions(ro.metrics, nil),
		HealthProbeBindAddress: ro.probeAddr,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:       {Label: managed},
			&appsv1.Deployment{}: {Label: managed},
		}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	var provisioner clusters.Provisioner
	if ro.provisioner != "" {
		c, err := socketprovisioner.NewClient(ro.provisioner)
		if err != nil {
			return fmt.Errorf("--cluster-provisioner: %w", err)
		}
		provisioner = c
	}
	closeDeployer, err := Setup(mgr, Config{
		Environment:       o.Environment,
		Namespace:         ro.namespace,
		Deployer:          ro.deployer,
		ImageMap:          ro.imageMap,
		StateDir:          ro.stateDir,
		Tenancies:         ro.tenancies,
		Provisioner:       provisioner,
		Profiles:          ro.profileMap,
		OnboardingConfig:  onboardingConfigSource(o.onboardingKubeconfig),
		OnboardingRetries: ro.onboardingWait,
		TenantRoles:       ro.tenantRoles,
	})
	if err != nil {
		return err
	}
	defer closeDeployer()
	log.Info("Starting operator", "environment", o.Environment, "deployer", ro.deployer, "namespace", ro.namespace)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// Config is what Setup needs besides the manager.
type Config struct {
	// Environment is passed to providers as --environment.
	Environment string
	// Namespace is the operator's namespace.
	Namespace string
	// Deployer is DeployerKubernetes or DeployerProcess; ImageMap and
	// StateDir configure the process deployer.
	Deployer, ImageMap, StateDir string
	// Tenancies override the tenancy of ClusterRequest purposes.
	Tenancies map[string]string
	// Provisioner, when set, creates exclusive clusters for ClusterRequests
	// (the local landscape's cluster provider).
	Provisioner clusters.Provisioner
	// Profiles map purposes to ClusterProfiles: an Exclusive request of
	// such a purpose that finds no free cluster gets a new Cluster of the
	// profile (clusters.NewProfileProvisioner); Provisioner serves the
	// other purposes.
	Profiles map[string]string
	// OnboardingConfig returns the onboarding cluster's REST config, or
	// (nil, nil) while it is not known yet; nil disables the
	// ManagedControlPlane controller.
	OnboardingConfig func(ctx context.Context, platform client.Reader) (*rest.Config, error)
	// OnboardingRetries is how often OnboardingConfig is retried.
	OnboardingRetries time.Duration
	// TenantRoles makes the ServiceProvider reconciler keep aggregated
	// ClusterRoles for each provider's service kinds on the onboarding
	// cluster (--aggregate-tenant-roles); it needs OnboardingConfig.
	TenantRoles bool
}

// Setup registers every operator controller with mgr, a manager on the
// platform cluster, and returns a function that stops what the deployer
// started. The ManagedControlPlane controller is added once the onboarding
// cluster is known, which may be after mgr started.
func Setup(mgr ctrl.Manager, cfg Config) (func(), error) {
	d, notifier, closeFn, err := newDeployer(mgr, cfg)
	if err != nil {
		return nil, err
	}
	popts := []provider.Option{provider.WithEnvironment(cfg.Environment), provider.WithOperatorNamespace(cfg.Namespace)}
	if notifier != nil {
		popts = append(popts, provider.WithNotifier(notifier))
	}
	var tenantRoles *onboardingClient
	if cfg.TenantRoles && cfg.OnboardingConfig != nil {
		tenantRoles = &onboardingClient{}
		popts = append(popts, provider.WithTenantRoles(tenantRoles.get))
	}
	if err := provider.Setup(mgr, d, popts...); err != nil {
		closeFn()
		return nil, err
	}
	var ropts []clusters.RequestOption
	for purpose, t := range cfg.Tenancies {
		tenancy := clustersv1alpha1.Tenancy(t)
		if tenancy != clustersv1alpha1.TenancyExclusive && tenancy != clustersv1alpha1.TenancyShared {
			closeFn()
			return nil, fmt.Errorf("--tenancy %s=%s: want %s or %s", purpose, t, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.TenancyShared)
		}
		ropts = append(ropts, clusters.WithTenancy(purpose, tenancy))
	}
	if p := provisionerOf(mgr.GetClient(), cfg); p != nil {
		ropts = append(ropts, clusters.WithProvisioner(p))
	}
	// One client of the onboarding cluster for the tenant checks of both
	// request controllers.
	onboarding := clusters.OnboardingFromClusters(mgr.GetClient(), access.TargetTimeout)
	for _, setup := range []func(ctrl.Manager) error{
		clusters.NewClusterReconciler(mgr.GetClient()).SetupWithManager,
		clusters.NewRequestReconciler(mgr.GetClient(), append(ropts, clusters.WithRequestOnboarding(onboarding))...).SetupWithManager,
		access.NewReconciler(mgr.GetClient(), access.WithOnboarding(onboarding)).SetupWithManager,
		func(mgr ctrl.Manager) error { return mcpaccess.Setup(mgr, cfg.Namespace) },
	} {
		if err := setup(mgr); err != nil {
			closeFn()
			return nil, err
		}
	}
	if cfg.OnboardingConfig != nil {
		if err := mgr.Add(&onboardingStarter{mgr: mgr, cfg: cfg, tenantRoles: tenantRoles}); err != nil {
			closeFn()
			return nil, fmt.Errorf("add onboarding starter: %w", err)
		}
	}
	return closeFn, nil
}

// provisionerOf returns the Provisioner of the ClusterRequest controller:
// the profile provisioner for the purposes of cfg.Profiles, cfg.Provisioner
// for the others; nil when there is neither.
func provisionerOf(c client.Client, cfg Config) clusters.Provisioner {
	if len(cfg.Profiles) == 0 {
		return cfg.Provisioner
	}
	byProfile := clusters.NewProfileProvisioner(c, cfg.Profiles)
	byPurpose := map[string]clusters.Provisioner{}
	for purpose := range cfg.Profiles {
		byPurpose[purpose] = byProfile
	}
	return clusters.ByPurpose(cfg.Provisioner, byPurpose)
}

// parseClusterProfiles parses the values of --cluster-profile, each
// purpose=ClusterProfile, into a map from purpose to profile name. A value
// without "=", with an empty side, a profile name that is no object name, or
// a purpose given twice is an error.
func parseClusterProfiles(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		purpose, profile, ok := strings.Cut(v, "=")
		purpose, profile = strings.TrimSpace(purpose), strings.TrimSpace(profile)
		if !ok || purpose == "" || profile == "" {
			return nil, fmt.Errorf("--cluster-profile %q: want purpose=ClusterProfile, e.g. mcp=kcp", v)
		}
		if errs := validation.IsDNS1123Subdomain(profile); len(errs) > 0 {
			return nil, fmt.Errorf("--cluster-profile %q: %q is not a ClusterProfile name: %s", v, profile, strings.Join(errs, "; "))
		}
		if prev, dup := out[purpose]; dup {
			return nil, fmt.Errorf("--cluster-profile %q: purpose %q already has ClusterProfile %q", v, purpose, prev)
		}
		out[purpose] = profile
	}
	return out, nil
}

func newDeployer(mgr ctrl.Manager, cfg Config) (deploy.Deployer, *provider.Notifier, func(), error) {
	switch cfg.Deployer {
	case DeployerKubernetes, "":
		return kube.New(mgr.GetClient(), kube.WithAPIReader(mgr.GetAPIReader())), nil, func() {}, nil
	case DeployerProcess:
		if cfg.ImageMap == "" || cfg.StateDir == "" {
			return nil, nil, nil, errors.New("--deployer=process needs --process-images and --state-dir")
		}
		images, err := process.LoadImageMap(cfg.ImageMap)
		if err != nil {
			return nil, nil, nil, err
		}
		notifier := provider.NewNotifier()
		d, err := process.New(process.Config{
			StateDir: cfg.StateDir,
			Images:   images,
			Platform: mgr.GetConfig(),
			Client:   mgr.GetClient(),
		}, process.WithOnChange(notifier.Notify))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("process deployer: %w", err)
		}
		return d, notifier, func() { _ = d.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("--deployer=%q: want %s or %s", cfg.Deployer, DeployerKubernetes, DeployerProcess)
}

// onboardingStarter waits, as the leader, until the onboarding cluster is
// known, installs the ManagedControlPlane CRD there and adds the
// ManagedControlPlane controller to the running manager. It hands the
// ServiceProvider reconciler the onboarding cluster's client for the
// tenants' roles, when they are on.
type onboardingStarter struct {
	mgr         ctrl.Manager
	cfg         Config
	tenantRoles *onboardingClient
}

// onboardingClient holds the onboarding cluster's client once the
// onboardingStarter found the cluster; until then it holds none.
type onboardingClient struct {
	mu sync.Mutex
	c  client.Client
}

// get implements provider.OnboardingClient.
func (o *onboardingClient) get(context.Context) (client.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.c, nil
}

func (o *onboardingClient) set(c client.Client) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.c = c
}

var _ manager.LeaderElectionRunnable = &onboardingStarter{}

// NeedLeaderElection makes only the leader start the controller.
func (s *onboardingStarter) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (s *onboardingStarter) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("onboarding")
	interval := s.cfg.OnboardingRetries
	if interval <= 0 {
		interval = 10 * time.Second
	}
	var onboarding *rest.Config
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		c, err := s.cfg.OnboardingConfig(ctx, s.mgr.GetAPIReader())
		if err != nil {
			log.Info("Onboarding cluster not usable yet; ManagedControlPlanes wait", "reason", err.Error())
			return false, nil
		}
		if c == nil {
			log.Info("No onboarding Cluster registered yet; ManagedControlPlanes wait")
			return false, nil
		}
		onboarding = c
		return true, nil
	})
	if err != nil {
		// Only a cancelled context ends the poll: the operator is stopping.
		return nil
	}
	direct, err := client.New(onboarding, client.Options{Scheme: s.mgr.GetScheme()})
	if err != nil {
		return fmt.Errorf("onboarding cluster: %w", err)
	}
	if err := installOnboardingCRDs(ctx, direct); err != nil {
		return err
	}
	if s.tenantRoles != nil {
		s.tenantRoles.set(direct)
	}
	oc, err := cluster.New(onboarding, func(o *cluster.Options) { o.Scheme = s.mgr.GetScheme() })
	if err != nil {
		return fmt.Errorf("onboarding cluster: %w", err)
	}
	if err := s.mgr.Add(oc); err != nil {
		return fmt.Errorf("add onboarding cluster: %w", err)
	}
	if err := mcp.NewReconciler(oc, s.mgr).SetupWithManager(s.mgr); err != nil {
		return fmt.Errorf("set up ManagedControlPlane controller: %w", err)
	}
	log.Info("ManagedControlPlane controller started", "host", onboarding.Host)
	<-ctx.Done()
	return nil
}

// onboardingConfigSource returns how to find the onboarding cluster: the
// given kubeconfig file, or else the admin kubeconfig of the Cluster with
// purpose onboarding.
func onboardingConfigSource(kubeconfig string) func(context.Context, client.Reader) (*rest.Config, error) {
	if kubeconfig != "" {
		return func(context.Context, client.Reader) (*rest.Config, error) { return restConfig(kubeconfig) }
	}
	return func(ctx context.Context, c client.Reader) (*rest.Config, error) {
		list := &clustersv1alpha1.ClusterList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list Clusters: %w", err)
		}
		for i := range list.Items {
			cl := &list.Items[i]
			for _, p := range cl.Spec.Purposes {
				if p == clustersv1alpha1.PurposeOnboarding {
					return clusters.AdminConfig(ctx, c, cl)
				}
			}
		}
		return nil, nil
	}
}
