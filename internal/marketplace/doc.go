// Package marketplace keeps the marketplace API current: one Offering
// (marketplace.services.openmcp.cloud/v1alpha1, cluster-scoped, on the
// onboarding cluster) per ServiceProvider and per valid SFService of the
// platform cluster.
//
// One reconcile computes every wanted Offering from the sources — a
// ServiceProvider's status.resources with the spec schema of each kind's CRD
// on the onboarding cluster, its image tag and Ready condition; an SFService
// with the SFPlans that the inter-operator's catalog validation accepts
// (internal/interoperator/catalog) — applies them server-side as field owner
// FieldOwner, and deletes the Offerings whose source is gone. Because the
// whole set is recomputed each time, the result does not depend on what an
// earlier reconcile saw, and one bad source only leaves out its own
// Offering (or plan). Init installs what the controller needs on the
// onboarding cluster: the Offering CRD and the ClusterRole that lets every
// namespace viewer read Offerings (docs/marketplace.md).
package marketplace
