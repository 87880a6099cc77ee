// Command marketplane-broker serves the Open Service Broker API v2.17 in
// front of the Marketplane inter-operator.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/marketplane/marketplane/internal/broker/app"
)

func main() {
	if err := app.NewCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
}
