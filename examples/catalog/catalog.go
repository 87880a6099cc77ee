// Package catalog embeds the sample catalog (the kubernetes-namespace
// service and its plans, the asynchronous cache and dedicated-cluster
// services, the inter-operator's ProviderConfig and the SFClusters) and its
// Helm chart, so that the local landscape can load them without reading
// the source tree.
//
// The dedicated-cluster plan renders ClusterRequests and AccessRequests
// into the platform cluster's namespace "dedicated-clusters", through the
// SFCluster of that name, whose kubeconfig the landscape makes for an
// identity confined to that namespace (internal/landscape/stack,
// docs/multicluster.md "Dedicated clusters"). The ProviderConfig's
// defaultCluster keeps every other plan on the workload cluster, and its
// renderPolicies grant that namespace to that plan only.
package catalog

import "embed"

// Files holds the catalog's YAML files and the charts directory.
//
//go:embed *.yaml charts
var Files embed.FS
