package testapi

import (
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/marketplane/marketplane/api/crds"
)

// `make generate` regenerates the deepcopy code and the CRDs in crds/ after
// types.go changes, and `make verify-generate` fails while they are stale.

//go:embed crds/*.yaml
var manifests embed.FS

// CRDs returns the CRDs of TestService and ProviderConfig, fresh copies on
// each call.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crds.Load(manifests, "crds")
}
