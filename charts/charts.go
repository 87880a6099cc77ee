// Package charts embeds Marketplane's Helm chart (charts/marketplane) and
// renders it in process with the Helm SDK, the same way `helm template` and
// `helm install` do: the values are merged with the chart's values.yaml,
// checked against values.schema.json, and the templates rendered by Helm's
// engine. Tests apply the result to real API servers, hack/manifests writes
// the plain manifests under config/ from it, and the install tests deploy
// the operator with it.
package charts

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The chart's files, dotfiles (.helmignore) included.
//
//go:embed all:marketplane
var chartFiles embed.FS

// ChartName is the chart's name and its directory in this package.
const ChartName = "marketplane"

// Defaults of the release Render renders.
const (
	DefaultReleaseName = "marketplane"
	DefaultNamespace   = "marketplane-system"
)

// ExampleImageRegistry is the registry host of the repository's own renders
// (its tests, the plain manifests under config/): the chart has no default
// registry. It is an example host; an install names its own.
const ExampleImageRegistry = "registry.example.com"

// WithExampleRegistry returns values (nil for the defaults) with
// global.imageRegistry set to ExampleImageRegistry unless values set it.
// values itself is not changed.
func WithExampleRegistry(values map[string]any) map[string]any {
	out := make(map[string]any, len(values)+1)
	maps.Copy(out, values)
	global := map[string]any{}
	if g, ok := values["global"].(map[string]any); ok {
		maps.Copy(global, g)
	}
	if _, ok := global["imageRegistry"]; !ok {
		global["imageRegistry"] = ExampleImageRegistry
	}
	out["global"] = global
	return out
}

// RenderOption configures Render.
type RenderOption func(*renderOptions)

type renderOptions struct {
	releaseName, namespace string
}

// WithReleaseName sets the release name (default DefaultReleaseName); it
// prefixes the names of the chart's objects.
func WithReleaseName(name string) RenderOption {
	return func(o *renderOptions) { o.releaseName = name }
}

// WithNamespace sets the release namespace (default DefaultNamespace), where
// the operator and the broker run.
func WithNamespace(namespace string) RenderOption {
	return func(o *renderOptions) { o.namespace = namespace }
}

// Load returns the embedded chart as Helm's loader reads a chart directory.
func Load() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(chartFiles, ChartName, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartFiles.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, ChartName+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded chart %s: %w", ChartName, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", ChartName, err)
	}
	return ch, nil
}

// Render renders the chart for values (merged over values.yaml, nil for the
// defaults) and returns every object: first the CRDs of the chart's crds/
// (by name), then the templates' objects in Helm's install order (by kind,
// then namespace and name). It fails when the values do not satisfy
// values.schema.json; the error then names each offending field.
func Render(values map[string]any, opts ...RenderOption) ([]*unstructured.Unstructured, error) {
	o := renderOptions{releaseName: DefaultReleaseName, namespace: DefaultNamespace}
	for _, opt := range opts {
		opt(&o)
	}
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}
	release := chartutil.ReleaseOptions{Name: o.releaseName, Namespace: o.namespace, Revision: 1, IsInstall: true}
	// ToRenderValues merges values.yaml and validates against
	// values.schema.json, as helm install does.
	top, err := chartutil.ToRenderValues(ch, values, release, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s, release %s/%s: %w", ChartName, o.namespace, o.releaseName, err)
	}
	rendered, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", ChartName, err)
	}

	var crds []*unstructured.Unstructured
	for _, f := range ch.CRDObjects() {
		objs, err := decode(f.Filename, f.File.Data)
		if err != nil {
			return nil, err
		}
		crds = append(crds, objs...)
	}
	sort.SliceStable(crds, func(i, j int) bool { return crds[i].GetName() < crds[j].GetName() })

	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		got, err := decode(name, []byte(rendered[name]))
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	sort.SliceStable(objs, func(i, j int) bool { return less(objs[i], objs[j]) })
	return append(crds, objs...), nil
}

// less orders objects by Helm's install order of their kinds (unknown kinds
// last), then by namespace and name.
func less(a, b *unstructured.Unstructured) bool {
	ka, kb := kindRank(a.GetKind()), kindRank(b.GetKind())
	if ka != kb {
		return ka < kb
	}
	if a.GetKind() != b.GetKind() {
		return a.GetKind() < b.GetKind()
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

func kindRank(kind string) int {
	if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
		return i
	}
	return len(releaseutil.InstallOrder)
}

// decode splits a rendered file into its YAML documents and decodes each
// non-empty one; every object must have an apiVersion, a kind and a name.
func decode(file string, data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read document %d: %w", file, i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("{}")) {
			continue
		}
		// UnmarshalJSON keeps integers as int64, as the API machinery expects.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion, kind and metadata.name are required", file, i)
		}
		out = append(out, u)
	}
}
