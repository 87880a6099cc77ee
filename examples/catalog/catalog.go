// Package catalog embeds the sample catalog (the kubernetes-namespace
// service, its plans, the inter-operator's ProviderConfig and the SFCluster)
// and its Helm chart, so that the local landscape can load them without
// reading the source tree.
package catalog

import "embed"

// Files holds the catalog's YAML files and the charts directory.
//
//go:embed *.yaml charts
var Files embed.FS
