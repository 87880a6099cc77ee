package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdutil "github.com/openmcp-project/controller-utils/pkg/crds"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"

	"github.com/marketplane/marketplane/test/openmcp-compat/api/crds"
	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
)

func newInitCommand(s *shared) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Install the CRDs and register the service kinds",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.complete(platformScheme()); err != nil {
				return err
			}
			return runInit(cmd.Context(), s)
		},
	}
}

// runInit asks for onboarding access as its shape does (the template: CRDs;
// Velero: everything), installs
// every CRD on the cluster its openmcp.cloud/cluster label names, and
// registers Echo in the ServiceProvider's status.resources.
func runInit(ctx context.Context, s *shared) error {
	manager := clusteraccess.NewClusterAccessManager(s.platform.Client(), s.shape.manager, s.namespace).
		WithLogger(&s.log).
		WithInterval(s.shape.interval).
		WithTimeout(s.shape.timeout)
	onboarding, err := manager.CreateAndWaitForCluster(ctx, clustersv1alpha1.PURPOSE_ONBOARDING+"-init", clustersv1alpha1.PURPOSE_ONBOARDING,
		onboardingScheme(), []clustersv1alpha1.PermissionsRequest{{Rules: s.shape.initRules}})
	// Like openMCP's template, init logs a failed or denied onboarding
	// request, installs what it can and exits 0: the operator then sees a
	// successful init, and only the request itself says what went wrong.
	list := func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
		all, err := crdutil.CRDsFromFileSystem(crds.CRDs, "manifests")
		if err != nil || onboarding != nil {
			return all, err
		}
		return slices.DeleteFunc(all, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			return crd.Labels[openmcpconst.ClusterLabel] == clustersv1alpha1.PURPOSE_ONBOARDING
		}), nil
	}
	if err != nil {
		s.log.Error(err, "Onboarding cluster access failed; the CRDs of the onboarding cluster are not installed")
		onboarding = nil
	}
	crdManager := crdutil.NewCRDManager(openmcpconst.ClusterLabel, list)
	crdManager.AddCRDLabelToClusterMapping(clustersv1alpha1.PURPOSE_PLATFORM, s.platform)
	if onboarding != nil {
		crdManager.AddCRDLabelToClusterMapping(clustersv1alpha1.PURPOSE_ONBOARDING, onboarding)
	}
	if err := crdManager.CreateOrUpdateCRDs(ctx, &s.log); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	echo := metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "Echo"}
	if err := libutils.RegisterGVKsAtServiceProvider(ctx, s.platform.Client(), s.providerName, echo); err != nil {
		return fmt.Errorf("register service kinds: %w", err)
	}
	s.log.Info("Init done")
	return nil
}
