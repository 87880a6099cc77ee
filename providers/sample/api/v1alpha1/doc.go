// Package v1alpha1 is the API of the sample service provider:
//
//   - Sample, the ServiceProviderAPI. Tenants create one on the onboarding
//     cluster, named like their ManagedControlPlane and in its namespace, to
//     get the domain service in that control plane.
//   - ProviderConfig, the provider's configuration. It is cluster-scoped, on
//     the platform cluster, and named like the provider (--provider-name,
//     the name of its ServiceProvider).
//
// After changing the types, run `make generate` to update the deepcopy code
// and the CRDs in api/crds/manifests.
//
// +kubebuilder:object:generate=true
// +groupName=sample.services.openmcp.cloud
package v1alpha1
