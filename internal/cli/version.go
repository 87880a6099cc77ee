package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/marketplane/marketplane/pkg/version"
)

// newVersionCommand returns `marketplane version`: the line --version
// prints, or with --output json the build information as an object.
func newVersionCommand() *cobra.Command {
	output := outputText
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, revision and build date of this binary",
		Long: "Print the release version, source revision, build date, Go version and platform this binary\n" +
			"was built with (the line --version prints); --output json prints them as a JSON object.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case outputText:
				_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Line(cmd.Root().Name()))
				return err
			case outputJSON:
				raw, err := json.MarshalIndent(version.Get(), "", "  ")
				if err != nil {
					return fmt.Errorf("encode version: %w", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", raw)
				return err
			default:
				return fmt.Errorf("--output %q: want %q or %q", output, outputText, outputJSON)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", output, "text or json")
	return cmd
}
