// Package v1alpha1 is the API of the compatibility provider: the
// ServiceProviderAPI kind Echo on the onboarding cluster, its ProviderConfig
// on the platform cluster, and the DomainServiceAPI kind Greeting that the
// provider installs into each tenant's control plane. All three live in the
// provider's own group, as openMCP's service-provider template lays them out.
//
// +kubebuilder:object:generate=true
// +groupName=echo.services.open-control-plane.io
package v1alpha1
