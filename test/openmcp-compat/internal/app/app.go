// Package app holds the compatibility provider's commands, init and run,
// with the flags, environment and cluster access of an openMCP provider:
// the platform cluster from --kubeconfig or, without it, the in-cluster
// configuration; the onboarding cluster through a ClusterRequest and an
// AccessRequest in POD_NAMESPACE; each tenant's control plane and a
// workload cluster through openMCP's clusteraccess library.
package app

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openmcp-project/controller-utils/pkg/clusters"
	"github.com/openmcp-project/controller-utils/pkg/logging"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"

	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
)

// shared are the flags and the platform cluster both commands use.
type shared struct {
	environment  string
	providerName string
	platform     *clusters.Cluster
	namespace    string
	log          logging.Logger
	shape        shape
}

// NewCommand returns the provider's root command with init and run.
func NewCommand() *cobra.Command {
	s := &shared{platform: clusters.New("platform")}
	cmd := &cobra.Command{
		Use:           "compat-provider",
		Short:         "A service provider built on openMCP's libraries",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags := cmd.PersistentFlags()
	logging.InitFlags(flags)
	s.platform.RegisterSingleConfigPathFlag(flags)
	flags.StringVar(&s.environment, "environment", "", "Name of the environment (required).")
	flags.StringVar(&s.providerName, "provider-name", "", "Name of the ServiceProvider object (required).")
	cmd.AddCommand(newInitCommand(s), newRunCommand(s))
	return cmd
}

// complete checks the flags and environment and loads the platform
// cluster's configuration.
func (s *shared) complete(scheme *runtime.Scheme) error {
	if s.environment == "" || s.providerName == "" {
		return errors.New("--environment and --provider-name are required")
	}
	s.namespace = os.Getenv(openmcpconst.EnvVariablePodNamespace)
	if s.namespace == "" {
		return fmt.Errorf("environment variable %s is not set", openmcpconst.EnvVariablePodNamespace)
	}
	sh, err := shapeFromEnv()
	if err != nil {
		return err
	}
	s.shape = sh
	log, err := logging.GetLogger()
	if err != nil {
		return fmt.Errorf("logger: %w", err)
	}
	s.log = log
	ctrl.SetLogger(log.Logr())
	if err := s.platform.InitializeRESTConfig(); err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	if err := s.platform.InitializeClient(scheme); err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	return nil
}

// newScheme returns a scheme with the kinds of every add.
func newScheme(add ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, a := range add {
		must(a(s))
	}
	return s
}

// platformScheme knows the openMCP platform kinds and the ProviderConfig.
func platformScheme() *runtime.Scheme {
	return newScheme(clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clustersv1alpha1.AddToScheme, providerv1alpha1.AddToScheme, v1alpha1.AddToScheme)
}

// onboardingScheme knows the service kind and CRDs.
func onboardingScheme() *runtime.Scheme {
	return newScheme(clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme)
}

// targetScheme is the scheme of the control plane and workload clients.
func targetScheme() *runtime.Scheme {
	return newScheme(clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
