package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "sample.services.openmcp.cloud", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes lists every kind of this package with its list type. A new kind
// is added here: unlike kubebuilder's layout, no init function registers
// types, so the list is the one place that says what AddToScheme adds.
var knownTypes = []runtime.Object{
	&Sample{}, &SampleList{},
	&ProviderConfig{}, &ProviderConfigList{},
}

// addKnownTypes registers knownTypes under GroupVersion, together with the
// meta types (ListOptions, WatchEvent and the like) that every group version
// served by an API server needs.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
