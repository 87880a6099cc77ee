// Package replicate is the inter-operator's provisioning mode replicate,
// Service Fabrik's MultiClusterDeployer: an SFServiceInstance or
// SFServiceBinding scheduled on an SFCluster whose spec.provisioningMode is
// replicate is not rendered by this inter-operator but copied to that
// cluster (the sister), where an inter-operator of its own provisions it.
//
// The Replicator implements provisioner.Replicator. For an object on the
// onboarding cluster (the original) it keeps, on the sister:
//
//   - the Service Fabrik CRDs, installed when missing (never updated: the
//     sister's own inter-operator owns their versions);
//   - a namespace of the original's name, created when missing and labelled
//     as the replicator's, deleted once no replica is left in it;
//   - the original's SFService and SFPlan, in a namespace named like the
//     catalog namespace, for the sister's inter-operator to render with
//     (before the replica; the CatalogMirror, catalog.go, keeps the whole
//     catalog there, Service Fabrik's Service Replicator);
//   - the replica: the original's spec (spec.clusterId set to "1", Service
//     Fabrik's id of the cluster an inter-operator runs on) and labels.
//
// A sister may serve other masters and tenants of its own, with the same
// namespace and object names (identity.go): what the replicator creates
// carries its master's identity, the UID of its ProviderConfig, and a
// replica its original's UID. A namespace, replica, catalog entry or bind
// Secret that is not this master's or this original's is never updated,
// adopted or deleted; the operation fails with ReplicaConflict.
//
// Spec goes to the sister; status (state, error, description, dashboard
// URL, resources, the binding's response) and the bind response Secret
// come back, into the original, which the provider runtime writes. A
// deleted original waits until its replica is gone.
//
// Per sister it runs a cache of the replicas, started when an object is
// first replicated there and stopped when the SFCluster is deleted, leaves
// the replicate mode or changes its kubeconfig, or when the inter-operator
// stops; its events bring the originals back to their controllers. An
// unreachable sister makes the originals report it (Ready=False, reason
// ClusterUnreachable) and retry with backoff: nothing is given up, and the
// replication continues when the sister answers again.
package replicate
