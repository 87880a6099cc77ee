package provider

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/providerrequests"
)

// Kind adapts one provider kind to the generic Reconciler: what it is
// called, how its objects abbreviate in names, and where its shared
// DeploymentSpec and DeploymentStatus live.
type Kind[T client.Object] struct {
	// Name is the kind, e.g. "ServiceProvider".
	Name string
	// Prefix abbreviates the kind in the names of everything the operator
	// creates for a provider: "sp", "cp" or "ps".
	Prefix string
	// Resource is the kind's plural resource name in openmcp.cloud, used
	// in the RBAC rule that lets a provider read its own object and write
	// its status.
	Resource string
	// New returns an empty object of the kind.
	New func() T
	// Spec and Status return the shared parts of an object's spec and
	// status, for reading and writing in place.
	Spec   func(T) *providerv1alpha1.DeploymentSpec
	Status func(T) *providerv1alpha1.DeploymentStatus
	// Resources returns the kinds a provider registered in
	// status.resources. It is nil for kinds without that field.
	Resources func(T) []metav1.GroupVersionKind
	// NewList returns an empty list of the kind, for re-evaluating every
	// provider of the kind when API group ownership may have changed.
	NewList func() client.ObjectList
}

// ServiceProviders is the Kind of ServiceProvider objects.
func ServiceProviders() Kind[*providerv1alpha1.ServiceProvider] {
	return Kind[*providerv1alpha1.ServiceProvider]{
		Name:     "ServiceProvider",
		Prefix:   providerrequests.PrefixServiceProvider,
		Resource: "serviceproviders",
		New:      func() *providerv1alpha1.ServiceProvider { return &providerv1alpha1.ServiceProvider{} },
		NewList:  func() client.ObjectList { return &providerv1alpha1.ServiceProviderList{} },
		Spec: func(o *providerv1alpha1.ServiceProvider) *providerv1alpha1.DeploymentSpec {
			return &o.Spec.DeploymentSpec
		},
		Status: func(o *providerv1alpha1.ServiceProvider) *providerv1alpha1.DeploymentStatus {
			return &o.Status.DeploymentStatus
		},
		Resources: func(o *providerv1alpha1.ServiceProvider) []metav1.GroupVersionKind {
			return o.Status.Resources
		},
	}
}

// ClusterProviders is the Kind of ClusterProvider objects.
func ClusterProviders() Kind[*providerv1alpha1.ClusterProvider] {
	return Kind[*providerv1alpha1.ClusterProvider]{
		Name:     "ClusterProvider",
		Prefix:   providerrequests.PrefixClusterProvider,
		Resource: clusterProviders,
		New:      func() *providerv1alpha1.ClusterProvider { return &providerv1alpha1.ClusterProvider{} },
		NewList:  func() client.ObjectList { return &providerv1alpha1.ClusterProviderList{} },
		Spec: func(o *providerv1alpha1.ClusterProvider) *providerv1alpha1.DeploymentSpec {
			return &o.Spec.DeploymentSpec
		},
		Status: func(o *providerv1alpha1.ClusterProvider) *providerv1alpha1.DeploymentStatus {
			return &o.Status.DeploymentStatus
		},
	}
}

// PlatformServices is the Kind of PlatformService objects.
func PlatformServices() Kind[*providerv1alpha1.PlatformService] {
	return Kind[*providerv1alpha1.PlatformService]{
		Name:     "PlatformService",
		Prefix:   providerrequests.PrefixPlatformService,
		Resource: "platformservices",
		New:      func() *providerv1alpha1.PlatformService { return &providerv1alpha1.PlatformService{} },
		NewList:  func() client.ObjectList { return &providerv1alpha1.PlatformServiceList{} },
		Spec: func(o *providerv1alpha1.PlatformService) *providerv1alpha1.DeploymentSpec {
			return &o.Spec.DeploymentSpec
		},
		Status: func(o *providerv1alpha1.PlatformService) *providerv1alpha1.DeploymentStatus {
			return &o.Status.DeploymentStatus
		},
	}
}
