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

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render/internal/helmworker"
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

// ChartCRD is a CustomResourceDefinition of a Helm chart's crds/
// directories (or a subchart's). Helm does not template these files, and
// installs them before the templates only when they are missing; it never
// updates or deletes them.
type ChartCRD struct {
	// File is the file's path in the chart, such as "postgresql/crds/sample.yaml".
	File string
	// Object is the CRD as the file holds it.
	Object *unstructured.Unstructured
}

// renderHelm renders a helm template: its content (a gotemplate) into the
// chart's values, and the chart at url, client side, into objects.
func (r *Renderer) renderHelm(ctx context.Context, in Input) (Objects, error) {
	t := in.Template
	if t.URL == "" {
		return Objects{}, newError(t, "", StageSource, errors.New("a helm template needs url, the location of the chart archive (.tgz)"))
	}
	origin := redactURL(t.URL)

	// The values: the template's content rendered as a gotemplate.
	text, valuesOrigin, err := r.templateText(ctx, t, false)
	if err != nil {
		return Objects{}, err
	}
	values := ""
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
			return Objects{}, err
		}
		if _, err := chartutil.ReadValues([]byte(out)); err != nil {
			return Objects{}, newError(t, valuesOrigin, StageDecode, fmt.Errorf("values are not a YAML mapping: %w", err))
		}
		values = out
	}

	archive, key, err := r.loadChart(ctx, t, origin)
	if err != nil {
		return Objects{}, err
	}
	if _, err := chartutil.ParseKubeVersion(r.kubeVersion); err != nil {
		return Objects{}, newError(t, origin, StageExecute, fmt.Errorf("kube version %q: %w", r.kubeVersion, err))
	}

	// Helm's engine cannot be stopped from outside: the chart renders in a
	// worker process that is killed when the render runs out of time or
	// memory (package helmworker).
	resp, err := r.helm.Render(ctx, helmworker.Request{
		Key:     key,
		Archive: archive,
		Values:  values,
		Release: chartutil.ReleaseOptions{
			Name:      ReleaseName(releaseID(in)),
			Namespace: releaseNamespace(in),
			Revision:  1,
			IsInstall: true,
		},
		KubeVersion:    r.kubeVersion,
		MaxOutputBytes: r.limits.MaxOutputBytes,
		Timeout:        r.limits.Timeout,
		MaxMemoryBytes: r.limits.MaxHelmMemoryBytes,
	})
	if err != nil {
		return Objects{}, newError(t, origin, StageExecute, r.helmError(ctx, err))
	}
	switch resp.Kind {
	case helmworker.KindRender:
		return Objects{}, newError(t, origin, StageExecute, errors.New(resp.Err))
	case helmworker.KindLoad:
		return Objects{}, newError(t, origin, StageParse, fmt.Errorf("load chart: %s", resp.Err))
	case helmworker.KindSize:
		return Objects{}, newError(t, origin, StageDecode, renderedSizeError(resp.Size, r.limits.MaxOutputBytes))
	}

	out, err := r.chartObjects(resp.CRDs, resp.Files)
	if err != nil {
		return Objects{}, newError(t, origin, StageDecode, err)
	}
	return out, nil
}

// helmError turns an error of the worker pool into the renderer's: the
// time limit and the memory ceiling as ErrTimeLimit and ErrSizeLimit, the
// caller's context ending as its error.
func (r *Renderer) helmError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, helmworker.ErrTimeout):
		r.killed.Add(1)
		return fmt.Errorf("%w (%s)", ErrTimeLimit, r.limits.Timeout)
	case errors.Is(err, helmworker.ErrMemory):
		r.killed.Add(1)
		return fmt.Errorf("the chart's render used more than %d MiB of memory: %w", r.limits.MaxHelmMemoryBytes>>20, ErrSizeLimit)
	case ctx.Err() != nil:
		r.killed.Add(1)
		return ctx.Err()
	case errors.Is(err, helmworker.ErrUnavailable):
		return fmt.Errorf("%w: %w", errHelmUnavailable, err)
	}
	return err
}

// errHelmUnavailable marks a render that found no process to render in: a
// transient error.
var errHelmUnavailable = errors.New("helm renders are unavailable")

func renderedSizeError(size, limit int64) error {
	return fmt.Errorf("the chart renders %d bytes, more than %d: %w", size, limit, ErrSizeLimit)
}

// loadChart fetches the chart archive at t.URL and checks, once per archive
// content, that it is a chart. It returns the archive and its SHA-256.
func (r *Renderer) loadChart(ctx context.Context, t osbv1alpha1.TemplateSpec, origin string) ([]byte, [sha256.Size]byte, error) {
	data, err := r.fetcher.Fetch(ctx, t.URL, r.limits.MaxChartBytes)
	if err != nil {
		return nil, [sha256.Size]byte{}, newError(t, origin, StageSource, err)
	}
	key := sha256.Sum256(data)
	if _, ok := r.charts.Get(key); !ok {
		r.chartLoads.Add(1)
		if _, err := loader.LoadArchive(bytes.NewReader(data)); err != nil {
			return nil, key, newError(t, origin, StageParse, fmt.Errorf("load chart: %w", err))
		}
		r.charts.Add(key, struct{}{}, int64(len(data)))
	}
	return data, key, nil
}

// chartObjects decodes a rendered chart: the CRDs of its crds/ directories,
// as they are, and the rendered templates ordered by kind as Helm installs
// them. NOTES.txt and test hooks are left out; other hooks are kept and
// applied like any other object, since there is no release to run them.
func (r *Renderer) chartObjects(crds []helmworker.File, files map[string]string) (Objects, error) {
	var out Objects
	size := int64(0)
	for _, crd := range crds {
		size += int64(len(crd.Data))
		decoded, err := decodeObjects(string(crd.Data))
		if err != nil {
			return Objects{}, fmt.Errorf("%s: %w", crd.Name, err)
		}
		for _, o := range decoded {
			out.CRDs = append(out.CRDs, ChartCRD{File: crd.Name, Object: o})
		}
	}

	names := make([]string, 0, len(files))
	for name, text := range files {
		size += int64(len(text))
		if path.Base(name) == "NOTES.txt" {
			continue
		}
		names = append(names, name)
	}
	if size > r.limits.MaxOutputBytes {
		return Objects{}, renderedSizeError(size, r.limits.MaxOutputBytes)
	}
	sort.Strings(names)
	for _, name := range names {
		decoded, err := decodeObjects(files[name])
		if err != nil {
			return Objects{}, fmt.Errorf("%s: %w", name, err)
		}
		for _, o := range decoded {
			if isTestHook(o) {
				continue
			}
			out.Objects = append(out.Objects, o)
		}
	}
	rank := func(kind string) int {
		if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
			return i
		}
		return len(releaseutil.InstallOrder)
	}
	templated := out.Objects
	sort.SliceStable(templated, func(i, j int) bool {
		ki, kj := templated[i].GetKind(), templated[j].GetKind()
		ri, rj := rank(ki), rank(kj)
		if ri != rj {
			return ri < rj
		}
		// Kinds Helm does not know come last, by name.
		return ri == len(releaseutil.InstallOrder) && ki < kj
	})
	return out, nil
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
