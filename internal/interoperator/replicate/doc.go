// Package replicate is the inter-operator's provisioning mode replicate,
// Service Fabrik's MultiClusterDeployer: an instance or binding scheduled on
// an SFCluster in that mode is copied to that cluster (the sister), with its
// catalog entries, for the sister's own inter-operator to provision, and
// the replica's status and bind response come back into the original.
// Everything the Replicator writes carries its master's and original's
// identity and never touches another's. docs/multicluster.md describes it.
package replicate
