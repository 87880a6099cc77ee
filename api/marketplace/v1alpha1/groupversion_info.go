/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "marketplace.services.openmcp.cloud", Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package so that AddToScheme can
	// register them with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme registers every kind of this package with a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes lists every kind of this package with its list type. A new kind
// is added here: unlike kubebuilder's layout, no init function registers
// types, so the list is the one place that says what AddToScheme adds.
var knownTypes = []runtime.Object{
	&Offering{}, &OfferingList{},
}

// addKnownTypes registers knownTypes under GroupVersion, together with the
// meta types (ListOptions, WatchEvent and the like) that every group version
// served by an API server needs.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
