package kcpprovider

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/version"
)

// Names of the provider's own setting.
const (
	// FlagKCPKubeconfig names the kcp admin kubeconfig file.
	FlagKCPKubeconfig = "kcp-kubeconfig"
	// EnvKCPKubeconfig is the default of FlagKCPKubeconfig.
	EnvKCPKubeconfig = "KCP_KUBECONFIG"
)

// options are the flags of init and run.
type options struct {
	contract.Flags
	kubeconfig    string
	kcpKubeconfig string
	leaderElect   bool
	lease         providerapp.LeaseTimes
	metrics       metricsauth.Flags
	probeAddr     string
}

// Command returns the provider's root command with init and run, under
// the provider contract: init checks that kcp answers, run runs the
// Reconciler.
func Command() *cobra.Command {
	o := &options{lease: providerapp.DefaultLeaseTimes}
	root := &cobra.Command{Use: "marketplane-kcp-provider", Short: "Serves Clusters with kcp workspaces", SilenceUsage: true}
	version.AddFlag(root)
	o.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the platform cluster (default: in-cluster or $KUBECONFIG)")
	root.PersistentFlags().StringVar(&o.kcpKubeconfig, FlagKCPKubeconfig, os.Getenv(EnvKCPKubeconfig),
		"admin kubeconfig of kcp, whose server is the workspace the Clusters' workspaces are created in (default $"+EnvKCPKubeconfig+")")
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Check that kcp answers with the admin kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.init(cmd.Context())
		},
	}
	runCmd := &cobra.Command{
		Use:   "run",
		Short: "Serve the provider's Clusters with kcp workspaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context())
		},
	}
	runCmd.Flags().BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader (the operator sets it with more than one replica)")
	runCmd.Flags().DurationVar(&o.lease.Duration, "leader-elect-lease-duration", o.lease.Duration, "how long a leader's lease lasts without renewal")
	runCmd.Flags().DurationVar(&o.lease.RenewDeadline, "leader-elect-renew-deadline", o.lease.RenewDeadline, "how long the leader tries to renew its lease before it gives up leadership")
	runCmd.Flags().DurationVar(&o.lease.RetryPeriod, "leader-elect-retry-period", o.lease.RetryPeriod, "how often replicas try to acquire or renew the lease")
	o.metrics.AddFlags(runCmd.Flags(), metricsauth.DefaultBindAddress)
	runCmd.Flags().StringVar(&o.probeAddr, "health-probe-bind-address", "0", "address of /healthz and /readyz; off by default")
	root.AddCommand(initCmd, runCmd)
	return root
}

// Main runs the command on os.Args with a signal-handling context and
// returns the process exit code.
func Main() int {
	cmd := Command()
	if err := cmd.ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		return 1
	}
	return 0
}

// kcpConfig reads the kcp admin kubeconfig. Credential plugins are refused,
// as in every kubeconfig Marketplane reads.
func (o *options) kcpConfig() (*rest.Config, error) {
	if o.kcpKubeconfig == "" {
		return nil, fmt.Errorf("no kcp admin kubeconfig: set --%s or $%s", FlagKCPKubeconfig, EnvKCPKubeconfig)
	}
	data, err := os.ReadFile(o.kcpKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read kcp admin kubeconfig (--%s or $%s): %w", FlagKCPKubeconfig, EnvKCPKubeconfig, err)
	}
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("kcp admin kubeconfig %s (--%s or $%s): %w", o.kcpKubeconfig, FlagKCPKubeconfig, EnvKCPKubeconfig, err)
	}
	return cfg, nil
}

// init checks that kcp answers GET /version and lets the admin list
// Workspaces, so that a wrong kubeconfig fails the init Job.
func (o *options) init(ctx context.Context) error {
	log := o.Logger().WithName("init")
	cfg, err := o.kcpConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = DefaultKCPTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kcp client: %w", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("kcp at %s does not answer: %w", cfg.Host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kcp client: %w", err)
	}
	if _, err := dyn.Resource(WorkspaceGVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("list Workspaces in kcp at %s: %w", cfg.Host, err)
	}
	log.Info("kcp answers", "server", cfg.Host, "version", info.GitVersion)
	return nil
}

// Scheme returns the types the provider reads on the platform cluster.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), clustersv1alpha1.AddToScheme(s)); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	return s, nil
}

// run runs the Reconciler in a manager of the platform cluster.
func (o *options) run(ctx context.Context) error {
	log := o.Logger()
	ctrl.SetLogger(log)
	version.RegisterMetrics()
	ctx = logr.NewContext(ctx, log)
	pod, err := contract.PodFromEnv()
	if err != nil {
		return err
	}
	kcpCfg, err := o.kcpConfig()
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	platformCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("platform cluster: load kubeconfig: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(platformCfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.ProviderName + "-leader",
		LeaderElectionNamespace: pod.Namespace,
		LeaseDuration:           &o.lease.Duration,
		RenewDeadline:           &o.lease.RenewDeadline,
		RetryPeriod:             &o.lease.RetryPeriod,
		Metrics:                 metricsauth.ServerOptions(o.metrics, platformCfg),
		HealthProbeBindAddress:  o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ping", healthz.Ping)); err != nil {
		return fmt.Errorf("add health checks: %w", err)
	}
	if err := New(mgr.GetClient(), kcpCfg, o.ProviderName).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up controller: %w", err)
	}
	log.Info("Starting kcp provider", "provider", o.ProviderName, "environment", o.Environment, "namespace", pod.Namespace, "kcp", kcpCfg.Host)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
