// Package crds embeds the CustomResourceDefinitions that controller-gen
// generates from the Go types under api/, so that binaries can install them
// and tests can load them without reading files from disk.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// ClusterLabel is the label on every CRD that names the cluster role the CRD
// belongs to. It uses the same key as openMCP so that CRD managers written for
// openMCP route Marketplane CRDs the same way.
const ClusterLabel = "openmcp.cloud/cluster"

// Cluster roles a CRD can be installed into.
const (
	// ClusterPlatform is the platform operators' cluster.
	ClusterPlatform = "platform"
	// ClusterOnboarding is the tenants' entry point.
	ClusterOnboarding = "onboarding"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// All returns every embedded CRD, sorted by name. Each call returns fresh
// copies, so callers may modify them.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out, err := Load(manifests, "manifests")
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Load decodes every .yaml file directly in dir of fsys, in the order of
// their file names, as a CustomResourceDefinition. It is the one loader of
// embedded CRDs: Marketplane's own (All), each provider's api/crds package
// and the runtime's test API pass it their embed.FS. Decoding is strict, so
// a manifest with a field the CRD type does not know is an error rather than
// a CRD that silently lacks it; an error names the file. Each call returns
// fresh copies, so callers may modify them.
func Load(fsys fs.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read CRD manifests in %s: %w", dir, err)
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			continue
		}
		name := path.Join(dir, e.Name())
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// ForCluster returns the embedded CRDs labelled for the given cluster role
// (ClusterPlatform or ClusterOnboarding).
func ForCluster(role string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if crd.Labels[ClusterLabel] == role {
			out = append(out, crd)
		}
	}
	return out, nil
}
