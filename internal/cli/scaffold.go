package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/marketplane/marketplane/internal/scaffold"
)

// newScaffoldCommand returns `marketplane scaffold`, which writes new
// projects; `scaffold provider` writes a service provider.
func newScaffoldCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scaffold",
		Short: "Write a new project",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newScaffoldProviderCommand())
	return cmd
}

func newScaffoldProviderCommand() *cobra.Command {
	var o scaffold.Options
	cmd := &cobra.Command{
		Use:   "provider --module M --kind K --group G",
		Short: "Write a new service provider project",
		Long: `Write a new service provider project built on Marketplane's provider runtime:
API types (the kind and a ProviderConfig) with their CRDs, a controller with
sample logic (it installs a CRD into each tenant's MCP cluster), the init/run
binary, a Makefile, a README and tests that run against real API servers.

--group velero becomes the API group velero` + scaffold.DefaultGroupSuffix + `; a group with a
dot is used as given. Marketplane is not published, so go.mod replaces it
with a local checkout: --marketplane-path, or the checkout the current
directory is in. No existing file is overwritten.`,
		Example: `  marketplane scaffold provider --module github.com/acme/service-provider-velero --kind Velero --group velero --dir velero
  marketplane scaffold provider --module example.org/foo --kind FooService --group foo.example.org --workload-cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := scaffold.NewProject(o)
			if err != nil {
				return err
			}
			if err := p.Write(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Wrote the %s provider (API group %s) to %s:\n", p.Name, p.Group, p.Dir)
			for _, f := range p.Files {
				fmt.Fprintf(out, "  %s\n", f.Path)
			}
			if p.Replace != "" {
				fmt.Fprintf(out, "go.mod replaces %s with %s.\n", scaffold.MarketplaneModule, p.Replace)
			}
			fmt.Fprintln(out, "Next:")
			for _, n := range p.Notes {
				fmt.Fprintf(out, "  %s\n", n)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Module, "module", "", "Go module path of the new provider (required)")
	f.StringVar(&o.Kind, "kind", "", "kind of the ServiceProviderAPI, UpperCamelCase, e.g. Velero (required)")
	f.StringVar(&o.Group, "group", "", "API group: a name such as velero (becoming velero"+scaffold.DefaultGroupSuffix+") or a full group (required)")
	f.StringVar(&o.Name, "name", "", "provider name: binary, cmd/<name> (default: the last element of --module)")
	f.BoolVar(&o.WorkloadCluster, "workload-cluster", false, "also use a shared workload cluster (a namespace per object in the sample)")
	f.StringVar(&o.Dir, "dir", "", "directory to write to (default: the current directory)")
	f.StringVar(&o.MarketplanePath, "marketplane-path", "", "Marketplane checkout for go.mod's replace directive (default: the one the current directory is in)")
	f.BoolVar(&o.InModule, "in-module", false, "write into the enclosing Go module (no go.mod); --module must be --dir's import path")
	return cmd
}
