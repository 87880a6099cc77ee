package testapi

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Regenerate the deepcopy code and the CRDs after changing types.go.
//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0 object:headerFile=../../../../hack/boilerplate.go.txt crd paths=. output:crd:artifacts:config=crds

//go:embed crds/*.yaml
var manifests embed.FS

// CRDs returns the CRDs of TestService and ProviderConfig, fresh copies on
// each call.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(manifests, "crds")
	if err != nil {
		return nil, fmt.Errorf("read embedded test CRDs: %w", err)
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(entries))
	for _, e := range entries {
		raw, err := manifests.ReadFile(path.Join("crds", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", e.Name(), err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}
