// Package provisioner is the inter-operator's provisioner: it reconciles
// SFServiceInstances and SFServiceBindings on the onboarding cluster by
// rendering their SFPlan's templates (package render) and applying the
// result to the SFCluster the instance is scheduled on (packages scheduling,
// clusters and apply), then reports Service Fabrik's status.state back to
// the broker. It is a provider on pkg/spruntime: InstanceReconciler and
// BindingReconciler are its Reconcilers, InstanceAccess and BindingAccess
// its ClusterAccess. docs/interoperator.md describes operations, states and
// errors.
package provisioner
