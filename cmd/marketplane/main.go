// Command marketplane is the Marketplane command-line tool.
package main

import (
	"os"

	"github.com/marketplane/marketplane/internal/cli"
)

func main() {
	if err := cli.NewRootCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}
