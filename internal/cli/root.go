package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/version"
)

// NewRootCommand returns the marketplane command with its subcommands; output
// goes to out.
func NewRootCommand(out io.Writer, opts ...Option) *cobra.Command {
	var cfg rootConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	root := &cobra.Command{
		Use:           "marketplane",
		Short:         "Managed services for many tenants on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.SetOut(out)
	version.AddFlag(root)
	root.AddCommand(newConsoleCommand())
	root.AddCommand(newCRDsCommand())
	root.AddCommand(newLandscapeCommand())
	root.AddCommand(newOfferingsCommand())
	root.AddCommand(newScaffoldCommand())
	root.AddCommand(newKubeconfigFromCredentialsCommand())
	root.AddCommand(newValidateCommand(cfg.inProcessTarget))
	root.AddCommand(newVersionCommand())
	return root
}

func newCRDsCommand() *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "crds",
		Short: "Print Marketplane's CustomResourceDefinitions as YAML",
		Long: "Print the CRDs built into this binary, for `kubectl apply -f -`.\n" +
			"With --cluster, only those labelled for that cluster role (platform or onboarding).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := crds.All()
			switch cluster {
			case "":
			case crds.ClusterPlatform, crds.ClusterOnboarding:
				list, err = crds.ForCluster(cluster)
			default:
				return fmt.Errorf("--cluster %q: want %q or %q", cluster, crds.ClusterPlatform, crds.ClusterOnboarding)
			}
			if err != nil {
				return err
			}
			for _, crd := range list {
				crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
				raw, err := yaml.Marshal(crd)
				if err != nil {
					return fmt.Errorf("encode %s: %w", crd.Name, err)
				}
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "---\n%s", raw); err != nil {
					return fmt.Errorf("write %s: %w", crd.Name, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "only CRDs for this cluster role: platform or onboarding")
	return cmd
}
