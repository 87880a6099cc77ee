// Package clusters gives the inter-operator access to the clusters service
// instances run on, registered as SFClusters on the platform cluster: a
// Registry turns an SFCluster into a Target (a client from the kubeconfig
// in its Secret, never logged, and an Applier), and StatusReconciler keeps
// each SFCluster's status live and offboards it once no instance runs
// there. docs/multicluster.md describes the registry and offboarding.
package clusters
