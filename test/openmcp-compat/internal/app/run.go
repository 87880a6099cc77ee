package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/controller-utils/pkg/clusters"
	"github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"

	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
	"github.com/marketplane/marketplane/test/openmcp-compat/internal/controller"
)

// runFlags are kubebuilder's usual manager flags, the ones openMCP's
// operator passes (and Marketplane's process deployer rewrites).
type runFlags struct {
	metricsAddr   string
	probeAddr     string
	pprofAddr     string
	leaderElect   bool
	secureMetrics bool
}

func newRunCommand(s *shared) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the Echo controller",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.complete(platformScheme()); err != nil {
				return err
			}
			return run(cmd.Context(), s, f)
		},
	}
	cmd.Flags().StringVar(&f.metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (0 disables it).")
	cmd.Flags().StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of the health probe endpoint.")
	cmd.Flags().StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address of the pprof endpoint (empty disables it).")
	cmd.Flags().BoolVar(&f.leaderElect, "leader-elect", false, "Enable leader election.")
	cmd.Flags().BoolVar(&f.secureMetrics, "metrics-secure", false, "Serve metrics over HTTPS.")
	return cmd
}

// templateTokenAccess is what openMCP's service-provider-template (commit
// 94af197) asks for on the tenant's control plane and on the workload
// cluster, and so this provider too: every rule, cluster-wide, and a
// roleRef to cluster-admin. Marketplane grants it only with the platform
// operator's spec.accessPolicy (docs/openmcp-compat.md).
func templateTokenAccess() *clustersv1alpha1.TokenConfig {
	return &clustersv1alpha1.TokenConfig{
		Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		}}},
		RoleRefs: []commonapi.RoleRef{{Name: "cluster-admin", Kind: "ClusterRole"}},
	}
}

func run(ctx context.Context, s *shared, f *runFlags) error {
	manager := clusteraccess.NewClusterAccessManager(s.platform.Client(), s.shape.manager, s.namespace).
		WithLogger(&s.log).
		WithInterval(s.shape.interval).
		WithTimeout(s.shape.timeout)
	onboarding, err := manager.CreateAndWaitForCluster(ctx, clustersv1alpha1.PURPOSE_ONBOARDING+"-run", clustersv1alpha1.PURPOSE_ONBOARDING,
		onboardingScheme(), []clustersv1alpha1.PermissionsRequest{{Rules: s.shape.runRules}})
	if err != nil {
		return fmt.Errorf("onboarding cluster access: %w", err)
	}

	mgr, err := ctrl.NewManager(onboarding.RESTConfig(), ctrl.Options{
		Scheme:                 onboarding.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.secureMetrics},
		HealthProbeBindAddress: f.probeAddr,
		PprofBindAddress:       f.pprofAddr,
		LeaderElection:         f.leaderElect,
		LeaderElectionID:       "compat-provider." + v1alpha1.GroupVersion.Group,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := mgr.Add(s.platform.Cluster()); err != nil {
		return fmt.Errorf("add platform cluster: %w", err)
	}

	var reconciler *serviceprovider.APIReconciler[*v1alpha1.Echo, *v1alpha1.ProviderConfig]
	if s.shape.name == ShapeVelero {
		reconciler = veleroReconciler(s, onboarding)
	} else {
		reconciler = templateReconciler(s, onboarding)
	}
	if err := reconciler.SetupWithManager(mgr, s.providerName); err != nil {
		return fmt.Errorf("set up Echo controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("ready check: %w", err)
	}
	s.log.Info("Starting manager")
	return mgr.Start(ctx)
}

// templateReconciler is the template's: the advanced clusteraccess
// reconciler with the tenant's control plane (the ClusterRequest the
// control plane's own controller created, named like it in its platform
// namespace) and a workload cluster, a token with every rule and a roleRef
// to cluster-admin on each, and a Secret watch over every namespace.
func templateReconciler(s *shared, onboarding *clusters.Cluster) *serviceprovider.APIReconciler[*v1alpha1.Echo, *v1alpha1.ProviderConfig] {
	mcp := advanced.ExistingClusterRequest("mcp", "mcp", func(req reconcile.Request, _ ...any) (*commonapi.ObjectReference, error) {
		namespace, err := libutils.StableMCPNamespace(req.Name, req.Namespace)
		if err != nil {
			return nil, err
		}
		return &commonapi.ObjectReference{Name: req.Name, Namespace: namespace}, nil
	}).
		WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).
		WithTokenAccess(templateTokenAccess()).
		WithScheme(targetScheme()).
		Build()
	workload := advanced.NewClusterRequest("workload", "wl", advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{
		Purpose: clustersv1alpha1.PURPOSE_WORKLOAD,
	})).
		WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).
		WithTokenAccess(templateTokenAccess()).
		WithScheme(targetScheme()).
		Build()
	access := advanced.NewClusterAccessReconciler(s.platform.Client(), s.providerName).
		WithManagedLabels(func(controllerName string, req reconcile.Request, reg advanced.ClusterRegistration) (string, string, map[string]string) {
			_, purpose, _ := advanced.DefaultManagedLabelGenerator(controllerName, req, reg)
			return controllerName, purpose, map[string]string{
				openmcpconst.OnboardingNameLabel:      req.Name,
				openmcpconst.OnboardingNamespaceLabel: req.Namespace,
			}
		}).
		Register(mcp).
		Register(workload).
		WithRetryInterval(s.shape.retry)

	return serviceprovider.NewAPIReconcilerBuilder[*v1alpha1.Echo, *v1alpha1.ProviderConfig]().
		EmptyObjectProvider(func() *v1alpha1.Echo { return &v1alpha1.Echo{} }).
		EmptyConfigProvider(func() *v1alpha1.ProviderConfig { return &v1alpha1.ProviderConfig{} }).
		PlatformCluster(s.platform).
		OnboardingCluster(onboarding).
		// The template watches Secrets in every namespace.
		SecretNamespace(s.namespace).
		AdvancedClusterAccessReconciler(access).
		WorkloadCluster(true).
		Reconciler(&controller.Echo{}).
		MustBuild()
}

// veleroReconciler is Velero's: the (non-advanced) clusteraccess
// reconciler named VeleroControllerName with Velero's rules on the
// control plane and the workload cluster, no Secret watch beyond its own
// namespace, and the reconciler of Echo objects as Velero reconciles its.
func veleroReconciler(s *shared, onboarding *clusters.Cluster) *serviceprovider.APIReconciler[*v1alpha1.Echo, *v1alpha1.ProviderConfig] {
	access := clusteraccess.NewClusterAccessReconciler(s.platform.Client(), VeleroControllerName).
		WithMCPScheme(targetScheme()).
		WithWorkloadScheme(targetScheme()).
		WithRetryInterval(s.shape.retry).
		WithMCPPermissions(veleroMCPRules()).
		WithWorkloadPermissions(veleroWorkloadRules())
	return serviceprovider.NewAPIReconcilerBuilder[*v1alpha1.Echo, *v1alpha1.ProviderConfig]().
		EmptyObjectProvider(func() *v1alpha1.Echo { return &v1alpha1.Echo{} }).
		EmptyConfigProvider(func() *v1alpha1.ProviderConfig { return &v1alpha1.ProviderConfig{} }).
		PlatformCluster(s.platform).
		OnboardingCluster(onboarding).
		WorkloadCluster(true).
		Reconciler(&controller.EchoAsVelero{}).
		ClusterAccessReconciler(access).
		MustBuild()
}
