// Command marketplane-kcp-provider is the kcp ClusterProvider: it serves
// the Clusters of its ClusterProfiles with kcp workspaces, under the
// provider contract. `init` checks that kcp answers with the admin
// kubeconfig (--kcp-kubeconfig, default $KCP_KUBECONFIG); `run` runs the
// controller (docs/kcp.md).
package main

import (
	"os"

	"github.com/marketplane/marketplane/internal/kcpprovider"
)

func main() {
	os.Exit(kcpprovider.Main())
}
