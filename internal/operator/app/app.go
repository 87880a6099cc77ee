package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/api/install"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/version"
)

// FieldOwner is the server-side-apply field manager of the operator.
const FieldOwner = "marketplane-operator"

// options are the flags shared by init and run.
type options struct {
	contract.Flags
	kubeconfig           string
	onboardingKubeconfig string
}

// NewCommand returns the operator's root command with init and run.
func NewCommand() *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:           "marketplane-operator",
		Short:         "Deploys providers, grants clusters and access, runs ManagedControlPlanes",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	version.AddFlag(root)
	o.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the platform cluster (default: in-cluster or $KUBECONFIG)")
	root.PersistentFlags().StringVar(&o.onboardingKubeconfig, "onboarding-kubeconfig", "", "kubeconfig of the onboarding cluster (default: the Cluster with purpose onboarding)")
	root.AddCommand(newInitCommand(o), newRunCommand(o))
	return root
}

func newInitCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Install the operator's CRDs into the platform (and onboarding) cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runInit(cmd.Context(), o)
		},
	}
}

// runInit installs the platform CRDs of the openmcp.cloud and
// clusters.openmcp.cloud groups and, when an onboarding kubeconfig is given,
// the ManagedControlPlane CRD there (run installs it otherwise, once it has
// found the onboarding cluster). Any failure is an error, so the init Job
// fails visibly instead of pretending.
func runInit(ctx context.Context, o *options) error {
	log := o.Logger().WithName("init")
	platform, err := newClient(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	platformCRDs, err := operatorCRDs(crds.ClusterPlatform, providerv1alpha1.GroupVersion.Group, clustersv1alpha1.GroupVersion.Group)
	if err != nil {
		return err
	}
	if err := crdinstall.Apply(ctx, platform, FieldOwner, 0, platformCRDs...); err != nil {
		return fmt.Errorf("install platform CRDs: %w", err)
	}
	log.Info("Installed platform CRDs", "count", len(platformCRDs))
	if o.onboardingKubeconfig == "" {
		return nil
	}
	onboarding, err := newClient(o.onboardingKubeconfig)
	if err != nil {
		return fmt.Errorf("onboarding cluster: %w", err)
	}
	if err := installOnboardingCRDs(ctx, onboarding); err != nil {
		return err
	}
	log.Info("Installed onboarding CRDs")
	return nil
}

// installOnboardingCRDs installs the control-plane kinds on the onboarding
// cluster: ManagedControlPlane and openMCP's current name for it,
// ControlPlane. Both at once, because the control-plane controller watches
// both.
func installOnboardingCRDs(ctx context.Context, c client.Client) error {
	list, err := operatorCRDs(crds.ClusterOnboarding, corev2alpha1.GroupVersion.Group, controlplanev2alpha1.GroupVersion.Group)
	if err != nil {
		return err
	}
	if err := crdinstall.Apply(ctx, c, FieldOwner, 0, list...); err != nil {
		return fmt.Errorf("install onboarding CRDs: %w", err)
	}
	return nil
}

// operatorCRDs returns the embedded CRDs for a cluster role that belong to
// the given groups: the operator installs its own kinds, not the
// inter-operator's.
func operatorCRDs(role string, groups ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.ForCluster(role)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if slices.Contains(groups, crd.Spec.Group) {
			out = append(out, crd)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no embedded %s CRDs for groups %v", role, groups)
	}
	return out, nil
}

// restConfig loads a kubeconfig file, or the in-cluster / $KUBECONFIG
// configuration when path is empty.
func restConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	// No client-side limit (a negative QPS turns client-go's limiter off):
	// the operator writes in bursts when many providers or requests change
	// at once, and the API server's priority and fairness, not a fixed
	// limit per client, protects the server (docs/architecture.md).
	cfg.QPS, cfg.Burst = -1, 100
	return cfg, nil
}

func newClient(kubeconfig string) (client.Client, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme, err := install.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return c, nil
}
