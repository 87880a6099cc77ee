//go:build tools

// Package tools pins kcp, built by `make tools` into bin/kcp for the landscape's
// kcp backend and its tests. kcp needs its own module: it builds against its
// forks of the Kubernetes libraries (the replace list in go.mod, kcp's own),
// which the cluster tools module and the main module must not see.
package tools

import (
	_ "github.com/kcp-dev/kcp/cmd/kcp"
)
