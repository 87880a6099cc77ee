// Package interoperator wires Marketplane's inter-operator: the catalog
// controller (package catalog) on the platform cluster, and the instance
// and binding controllers (package provisioner) on the onboarding cluster,
// which render SFPlans (package render) onto the SFClusters' target
// clusters (packages clusters and apply).
//
// Setup registers them with a manager; Provider describes the
// marketplane-interoperator binary for package providerapp (init installs
// the Service Fabrik and ProviderConfig CRDs, run calls Setup).
package interoperator
