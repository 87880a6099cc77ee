// Package sisters installs the inter-operator's provisioner on its sister
// clusters, as Service Fabrik's MultiClusterDeployer Provisioner Controller
// does: for each SFCluster in replicate mode, when the ProviderConfig sets
// spec.sisterProvisioner, the Reconciler keeps there the CRDs, a
// least-privilege Deployment of the inter-operator, its ProviderConfig and
// the SFCluster "1", all marked with the master's identity, reports
// ProvisionerReady, and removes them once no replica is left.
// docs/multicluster.md describes it.
package sisters
