package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the provider's API group and version.
var GroupVersion = schema.GroupVersion{Group: "echo.services.open-control-plane.io", Version: "v1alpha1"}

// AddToScheme registers Echo, ProviderConfig and their lists.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Echo{}, &EchoList{}, &ProviderConfig{}, &ProviderConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
