// Package crds embeds the CRDs of the compatibility provider, labelled with
// openmcp.cloud/cluster so that controller-utils' CRD manager installs each
// on its cluster, as the provider's init does.
package crds

import (
	"embed"
)

// CRDs holds the generated CRD manifests.
//
//go:embed manifests
var CRDs embed.FS
