package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// mcpPermissions is what the provider needs in a tenant's control plane:
// read and create CRDs, manage its own Greeting CRD by name, and Greetings.
func mcpPermissions() []clustersv1alpha1.PermissionsRequest {
	group := v1alpha1.GroupVersion.Group
	return []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{controller.GreetingCRDName}, Verbs: []string{"update", "patch", "delete"}},
		{APIGroups: []string{group}, Resources: []string{"greetings"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}}}
}

// workloadAccess lets the provider keep one namespace per tenant with a
// ConfigMap in it on the shared workload cluster: rights on namespaces
// cluster-wide, and on ConfigMaps only in the tenant's namespace (which
// the AccessRequest creates). Rights inside a namespace must name it: the
// shared cluster holds other tenants' namespaces too.
func workloadAccess(req reconcile.Request, _ ...any) (*clustersv1alpha1.TokenConfig, error) {
	return &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{
		{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		}},
		{Namespace: controller.WorkloadNamespace(req.Namespace, req.Name), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		}},
	}}, nil
}

func run(ctx context.Context, s *shared, f *runFlags) error {
	manager := clusteraccess.NewClusterAccessManager(s.platform.Client(), s.providerName, s.namespace).
		WithLogger(&s.log).
		WithInterval(time.Second).
		WithTimeout(5 * time.Minute)
	onboarding, err := manager.CreateAndWaitForCluster(ctx, clustersv1alpha1.PURPOSE_ONBOARDING+"-run", clustersv1alpha1.PURPOSE_ONBOARDING,
		onboardingScheme(), []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"echoes", "echoes/status"}, Verbs: []string{"*"}},
		}}})
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

	// The tenant's control plane: the ClusterRequest the control plane's
	// own controller created, named like it in its platform namespace.
	mcp := advanced.ExistingClusterRequest("mcp", "mcp", func(req reconcile.Request, _ ...any) (*commonapi.ObjectReference, error) {
		namespace, err := libutils.StableMCPNamespace(req.Name, req.Namespace)
		if err != nil {
			return nil, err
		}
		return &commonapi.ObjectReference{Name: req.Name, Namespace: namespace}, nil
	}).
		WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{Permissions: mcpPermissions()}).
		WithScheme(targetScheme()).
		Build()
	workload := advanced.NewClusterRequest("workload", "wl", advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{
		Purpose: clustersv1alpha1.PURPOSE_WORKLOAD,
	})).
		WithNamespaceGenerator(advanced.DefaultNamespaceGeneratorForMCP).
		WithTokenAccessGenerator(workloadAccess).
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
		WithRetryInterval(time.Second)

	reconciler := serviceprovider.NewAPIReconcilerBuilder[*v1alpha1.Echo, *v1alpha1.ProviderConfig]().
		EmptyObjectProvider(func() *v1alpha1.Echo { return &v1alpha1.Echo{} }).
		EmptyConfigProvider(func() *v1alpha1.ProviderConfig { return &v1alpha1.ProviderConfig{} }).
		PlatformCluster(s.platform).
		OnboardingCluster(onboarding).
		AdvancedClusterAccessReconciler(access).
		WorkloadCluster(true).
		Reconciler(&controller.Echo{}).
		MustBuild()
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
