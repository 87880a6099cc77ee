package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the provider kinds.
const GroupName = "openmcp.cloud"

var (
	// GroupVersion is the group and version of the kinds in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes lists every kind of this package with its list type. A new kind
// is added here: unlike kubebuilder's layout, no init function registers
// types, so the list is the one place that says what AddToScheme adds.
var knownTypes = []runtime.Object{
	&ClusterProvider{}, &ClusterProviderList{},
	&PlatformService{}, &PlatformServiceList{},
	&ServiceProvider{}, &ServiceProviderList{},
}

// addKnownTypes registers knownTypes under GroupVersion, together with the
// meta types (ListOptions, WatchEvent and the like) that every group version
// served by an API server needs.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
