// Command marketplane-marketplace is Marketplane's marketplace: a
// PlatformService, run by the provider contract, that keeps one Offering per
// ServiceProvider and per valid SFService on the onboarding cluster
// (docs/marketplace.md). `init` installs the Offering CRD and the RBAC that
// lets every authenticated user read Offerings; `run` keeps them current
// (flags: see --help; for development --kubeconfig names the platform
// cluster and --onboarding-kubeconfig the onboarding cluster).
package main

import (
	"fmt"
	"os"

	"github.com/marketplane/marketplane/internal/marketplace"
)

func main() {
	app, err := marketplace.Provider()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(app.Main())
}
