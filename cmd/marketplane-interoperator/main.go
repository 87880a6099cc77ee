// Command marketplane-interoperator is Marketplane's inter-operator: the
// Service Fabrik catalog, provisioner and binder, run as a service provider
// by the provider contract. `init` installs its CRDs into the platform and
// onboarding clusters; `run` runs its controllers (flags: see --help; for
// development --kubeconfig names the platform cluster and
// --onboarding-kubeconfig the onboarding cluster).
package main

import (
	"fmt"
	"os"

	"github.com/marketplane/marketplane/internal/interoperator"
)

func main() {
	app, err := interoperator.Provider()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(app.Main())
}
