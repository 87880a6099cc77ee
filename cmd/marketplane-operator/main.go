// Command marketplane-operator is the provider operator. It follows the
// provider contract itself: `init` installs the CRDs it serves, `run` runs
// its controllers.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/marketplane/marketplane/internal/operator/app"
)

func main() {
	if err := app.NewCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
}
