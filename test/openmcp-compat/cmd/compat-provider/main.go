// Command compat-provider is a service provider written only on openMCP's
// own libraries (opencontrolplane-runtime, openmcp-operator/lib and /api,
// controller-utils), the way openMCP's service-provider template writes
// one. Marketplane's compatibility test deploys it unchanged through the
// operator's init/run contract.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/marketplane/marketplane/test/openmcp-compat/internal/app"
)

func main() {
	if err := app.NewCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
