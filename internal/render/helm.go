package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/adler32"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// ReleaseName is the Helm release name of the instance or binding with the
// given id: "in-" and the decimal Adler-32 checksum of the id, as Service
// Fabrik names releases (templates compute it as
// printf "in-%s" (adler32sum .instance.metadata.name)).
func ReleaseName(id string) string {
	return "in-" + strconv.FormatUint(uint64(adler32.Checksum([]byte(id))), 10)
}

// hookAnnotation marks a Helm hook; test hooks are left out of a render.
const hookAnnotation = "helm.sh/hook"

// renderHelm renders a helm template: its content (a gotemplate) into the
// chart's values, and the chart at url, client side, into objects.
func (r *Renderer) renderHelm(ctx context.Context, in Input) ([]*unstructured.Unstructured, error) {
	t := in.Template
	if t.URL == "" {
		return nil, newError(t, "", StageSource, errors.New("a helm template needs url, the location of the chart archive (.tgz)"))
	}
	origin := redactURL(t.URL)

	// The values: the template's content rendered as a gotemplate.
	var vals chartutil.Values = map[string]any{}
	text, valuesOrigin, err := r.templateText(ctx, t, false)
	if err != nil {
		return nil, err
	}
	if text != "" {
		valuesTemplate := t
		valuesTemplate.Type = osbv1alpha1.TypeGoTemplate
		out, err := r.execute(ctx, valuesTemplate, valuesOrigin, text, in.Values)
		if err != nil {
			var re *Error
			if errors.As(err, &re) {
				re.Type = osbv1alpha1.TypeHelm
				re.Err = fmt.Errorf("values: %w", re.Err)
			}
			return nil, err
		}
		if vals, err = chartutil.ReadValues([]byte(out)); err != nil {
			return nil, newError(t, valuesOrigin, StageDecode, fmt.Errorf("values are not a YAML mapping: %w", err))
		}
	}

	ch, err := r.loadChart(ctx, t, origin)
	if err != nil {
		return nil, err
	}
	kubeVersion, err := chartutil.ParseKubeVersion(r.kubeVersion)
	if err != nil {
		return nil, newError(t, origin, StageExecute, fmt.Errorf("kube version %q: %w", r.kubeVersion, err))
	}
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = *kubeVersion

	var files map[string]string
	err = r.bounded(ctx, nil, func() error {
		if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
			return fmt.Errorf("dependencies: %w", err)
		}
		top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
			Name:      ReleaseName(releaseID(in)),
			Namespace: releaseNamespace(in),
			Revision:  1,
			IsInstall: true,
		}, &caps)
		if err != nil {
			return err
		}
		files, err = engine.Engine{}.Render(ch, top)
		return err
	})
	if err != nil {
		return nil, newError(t, origin, StageExecute, err)
	}

	objs, err := r.chartObjects(ch, files)
	if err != nil {
		return nil, newError(t, origin, StageDecode, err)
	}
	return objs, nil
}

// loadChart fetches and loads the chart at t.URL, from the cache when an
// archive with the same content was loaded before. The result is a copy the
// caller may change.
func (r *Renderer) loadChart(ctx context.Context, t osbv1alpha1.TemplateSpec, origin string) (*chart.Chart, error) {
	data, err := r.fetcher.Fetch(ctx, t.URL, r.limits.MaxChartBytes)
	if err != nil {
		return nil, newError(t, origin, StageSource, err)
	}
	key := sha256.Sum256(data)
	ch, ok := r.charts.Get(key)
	if !ok {
		r.chartLoads.Add(1)
		ch, err = loader.LoadArchive(bytes.NewReader(data))
		if err != nil {
			return nil, newError(t, origin, StageParse, fmt.Errorf("load chart: %w", err))
		}
		r.charts.Add(key, ch, int64(len(data)))
	}
	return cloneChart(ch), nil
}

// cloneChart copies what rendering a chart changes: the metadata of its
// dependencies (enabled, import values), its values and its tree of
// subcharts. Templates and files are shared; nothing writes them.
func cloneChart(c *chart.Chart) *chart.Chart {
	out := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = make([]*chart.Dependency, len(c.Metadata.Dependencies))
		for i, d := range c.Metadata.Dependencies {
			dc := *d
			dc.ImportValues = slices.Clone(d.ImportValues)
			md.Dependencies[i] = &dc
		}
		out.Metadata = &md
	}
	out.Values = copyMap(c.Values)
	deps := c.Dependencies()
	cloned := make([]*chart.Chart, len(deps))
	for i, d := range deps {
		cloned[i] = cloneChart(d)
	}
	out.SetDependencies(cloned...)
	return &out
}

// chartObjects decodes a rendered chart: the CRDs of its crds/ directories
// first, then the rendered templates ordered by kind as Helm installs them.
// NOTES.txt and test hooks are left out; other hooks are kept and applied
// like any other object, since there is no release to run them.
func (r *Renderer) chartObjects(ch *chart.Chart, files map[string]string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	size := int64(0)
	for _, crd := range ch.CRDObjects() {
		size += int64(len(crd.File.Data))
		decoded, err := decodeObjects(string(crd.File.Data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		objs = append(objs, decoded...)
	}
	crds := len(objs)

	names := make([]string, 0, len(files))
	for name, text := range files {
		size += int64(len(text))
		if path.Base(name) == "NOTES.txt" {
			continue
		}
		names = append(names, name)
	}
	if size > r.limits.MaxOutputBytes {
		return nil, fmt.Errorf("the chart renders %d bytes, more than %d: %w", size, r.limits.MaxOutputBytes, ErrSizeLimit)
	}
	sort.Strings(names)
	for _, name := range names {
		decoded, err := decodeObjects(files[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, o := range decoded {
			if isTestHook(o) {
				continue
			}
			objs = append(objs, o)
		}
	}
	rank := func(kind string) int {
		if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
			return i
		}
		return len(releaseutil.InstallOrder)
	}
	templated := objs[crds:]
	sort.SliceStable(templated, func(i, j int) bool {
		ki, kj := templated[i].GetKind(), templated[j].GetKind()
		ri, rj := rank(ki), rank(kj)
		if ri != rj {
			return ri < rj
		}
		// Kinds Helm does not know come last, by name.
		return ri == len(releaseutil.InstallOrder) && ki < kj
	})
	return objs, nil
}

func isTestHook(o *unstructured.Unstructured) bool {
	for _, h := range strings.Split(o.GetAnnotations()[hookAnnotation], ",") {
		switch strings.TrimSpace(h) {
		case "test", "test-success":
			return true
		}
	}
	return false
}

// releaseID is the id the release is named by: in.ReleaseID, else the
// binding's name, else the instance's name.
func releaseID(in Input) string {
	if in.ReleaseID != "" {
		return in.ReleaseID
	}
	if name := nestedString(in.Values, VarBinding, "metadata", "name"); name != "" {
		return name
	}
	return nestedString(in.Values, VarInstance, "metadata", "name")
}

// releaseNamespace is in.Namespace, else the instance's namespace.
func releaseNamespace(in Input) string {
	if in.Namespace != "" {
		return in.Namespace
	}
	return nestedString(in.Values, VarInstance, "metadata", "namespace")
}

func nestedString(m map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(m, fields...)
	return s
}
