// Command marketplane is the Marketplane command-line tool.
package main

import (
	"fmt"
	"os"

	"github.com/marketplane/marketplane/internal/cli"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"
)

func main() {
	if err := cli.NewRootCommand(os.Stdout, cli.WithInProcessTarget(inProcessTarget)).Execute(); err != nil {
		os.Exit(1)
	}
}

// inProcessTarget is the default target of `marketplane validate`: API
// servers and the operator in this process.
func inProcessTarget() (validation.Target, error) {
	if _, err := testenv.BinaryDir(); err != nil {
		return nil, fmt.Errorf("find etcd and kube-apiserver (or pass --bin-dir): %w", err)
	}
	return providertest.InProcess(), nil
}
