// Package install registers every Marketplane API group, together with the
// Kubernetes built-in and apiextensions types, into a runtime.Scheme.
package install

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// AddToScheme adds the Kubernetes built-in types, CustomResourceDefinitions
// and every Marketplane API group to s.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		providerv1alpha1.AddToScheme,
		clustersv1alpha1.AddToScheme,
		corev2alpha1.AddToScheme,
		controlplanev2alpha1.AddToScheme,
		osbv1alpha1.AddToScheme,
		resourcev1alpha1.AddToScheme,
		interoperatorv1alpha1.AddToScheme,
		marketplacev1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return fmt.Errorf("register API types: %w", err)
		}
	}
	return nil
}

// NewScheme returns a scheme with every type AddToScheme registers.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
