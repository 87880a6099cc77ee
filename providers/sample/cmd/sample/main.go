// Command sample is the sample service provider. The provider operator
// runs `sample init` (install the CRDs, register the Sample kind) once for
// each version of its ServiceProvider, then `sample run` (the controllers),
// both with --environment, --provider-name and --verbosity and the POD_*
// environment variables of the deployment contract.
package main

import (
	"fmt"
	"os"

	"github.com/marketplane/marketplane/providers/sample/internal/controller"
)

func main() {
	p, err := controller.Provider()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(p.Main(controller.AccessOptions()...))
}
