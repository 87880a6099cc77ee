package version

import "github.com/spf13/cobra"

// Line is what --version and `marketplane version` print: the binary's
// name and Get's one line, e.g. "marketplane-broker v0.2.0 (revision ...)".
func Line(binary string) string {
	return binary + " " + Get().String()
}

// AddFlag gives cmd, a binary's root command, the flag --version, which
// prints Line for the command's name and exits. It has no shorthand: -v
// means the log verbosity on every Marketplane command (cobra's own
// version flag would take -v on a command that has no verbosity flag).
func AddFlag(cmd *cobra.Command) {
	cmd.Version = Get().String()
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	cmd.Flags().Bool("version", false, "print the version and exit")
}
