// Package sisters installs the inter-operator's provisioner on its sister
// clusters: Service Fabrik's MultiClusterDeployer Provisioner Controller.
// A sister is an SFCluster of the catalog namespace in provisioning mode
// replicate, to which package replicate copies instances and bindings; an
// inter-operator on the sister provisions them there.
//
// When the ProviderConfig sets spec.sisterProvisioner, the Reconciler keeps
// on every sister, with the credentials of the SFCluster's kubeconfig:
//
//   - the inter-operator's CRDs, installed when missing;
//   - a namespace (spec.sisterProvisioner.namespace) with a ServiceAccount,
//     the image pull Secrets and a Deployment running the image with run
//     and the contract flags, its onboarding cluster being its platform
//     cluster, the sister itself, reached in-cluster;
//   - RBAC for the ServiceAccount: what the inter-operator needs on its
//     platform and onboarding cluster (interoperator.RunPermissions,
//     PlatformPermissions, CatalogPermissions), no wildcard and no
//     cluster-admin; the kubeconfig Secret is readable by name only;
//   - the sister's ProviderConfig: the master's catalog namespace, limits,
//     poll interval and render policies;
//   - in the catalog namespace, the SFCluster "1" with a copy of the
//     master's kubeconfig of the sister, the cluster the sister's
//     inter-operator provisions onto.
//
// Every object carries the master's identity (replicate.LabelMaster, the
// UID of the ProviderConfig): an object of the same name that is not this
// master's is never updated, adopted or deleted. A sister runs one
// provisioner; a second master finds the first's and reports a conflict.
//
// The objects follow the master's configuration on every reconcile
// (image, replicas, rules). A condition ProvisionerReady on the master's
// SFCluster says whether the provisioner is installed and available; the
// SFCluster status controller's conditions are left alone.
//
// When the SFCluster is deleted, leaves the replicate mode or the
// ProviderConfig drops spec.sisterProvisioner, the Reconciler waits until
// no replica of this master is left on the sister, then removes what it
// installed (CRDs and the catalog namespace stay: other masters and the
// replicator share them); a finalizer keeps the SFCluster until then.
package sisters
