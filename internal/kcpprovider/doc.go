// Package kcpprovider is the kcp ClusterProvider: it serves each Cluster of
// a ClusterProfile that names it with a kcp workspace. For every such
// Cluster it creates a Workspace in kcp, an admin ServiceAccount with a
// token inside it and the Cluster's admin kubeconfig Secret on the platform
// cluster, so that the operator's Cluster controller checks and marks it
// Ready like any other cluster; on deletion it removes the Workspace and
// the Secret. The command in this package runs it under the provider
// contract (docs/kcp.md).
package kcpprovider
