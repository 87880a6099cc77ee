package render

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render/internal/helmworker"
	"github.com/marketplane/marketplane/internal/render/internal/lru"
	"github.com/marketplane/marketplane/internal/render/internal/plain"
	"github.com/marketplane/marketplane/internal/render/source"
)

// Default limits and cache sizes of a Renderer.
const (
	// DefaultTimeout bounds one render, fetching excluded.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxOutputBytes bounds the rendered text of one template, and any
	// single value a template function returns.
	DefaultMaxOutputBytes = 4 << 20
	// DefaultMaxWorkBytes bounds the summed size of all values the template
	// functions of one render return.
	DefaultMaxWorkBytes = 64 << 20
	// DefaultMaxTemplateBytes bounds the text of a gotemplate.
	DefaultMaxTemplateBytes = 1 << 20
	// DefaultMaxChartBytes bounds a Helm chart archive.
	DefaultMaxChartBytes = 10 << 20
	// DefaultMaxHelmMemoryBytes bounds the resident memory of the process
	// that renders a Helm chart.
	DefaultMaxHelmMemoryBytes = 512 << 20
	// DefaultKubeVersion is the Kubernetes version Helm charts see as
	// .Capabilities.KubeVersion: the version of the Kubernetes libraries
	// Marketplane is built with.
	DefaultKubeVersion = "v1.36.0"

	defaultTemplateCacheSize = 512
	defaultChartCacheSize    = 16
	// chartCacheBytes bounds the summed archive size of cached charts.
	chartCacheBytes = 128 << 20
)

// Limits bound what one render may consume. A zero field takes its default.
type Limits struct {
	// Timeout bounds one render (DefaultTimeout). Fetching the template or
	// chart is bounded separately, by the source.Fetcher.
	Timeout time.Duration
	// MaxOutputBytes bounds the rendered text of one template and any single
	// value a template function returns (DefaultMaxOutputBytes).
	MaxOutputBytes int64
	// MaxWorkBytes bounds the summed size of the values that the template
	// functions of one render return (DefaultMaxWorkBytes). It stops
	// templates that build ever larger strings or lists in a loop.
	MaxWorkBytes int64
	// MaxTemplateBytes bounds the text of a gotemplate, and of a helm
	// template's values template (DefaultMaxTemplateBytes).
	MaxTemplateBytes int64
	// MaxChartBytes bounds a Helm chart archive (DefaultMaxChartBytes).
	MaxChartBytes int64
	// MaxHelmMemoryBytes bounds the resident memory of the worker process
	// that renders a Helm chart, its loaded charts included
	// (DefaultMaxHelmMemoryBytes). It is checked every few milliseconds
	// while the chart renders.
	MaxHelmMemoryBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxWorkBytes <= 0 {
		l.MaxWorkBytes = DefaultMaxWorkBytes
	}
	if l.MaxTemplateBytes <= 0 {
		l.MaxTemplateBytes = DefaultMaxTemplateBytes
	}
	if l.MaxChartBytes <= 0 {
		l.MaxChartBytes = DefaultMaxChartBytes
	}
	if l.MaxHelmMemoryBytes <= 0 {
		l.MaxHelmMemoryBytes = DefaultMaxHelmMemoryBytes
	}
	return l
}

// Renderer renders the templates of SFPlans. It is safe for concurrent use,
// and meant to be shared: it caches parsed templates and loaded charts by
// the hash of their content.
type Renderer struct {
	fetcher     *source.Fetcher
	limits      Limits
	kubeVersion string
	funcs       template.FuncMap
	templates   *lru.Cache[[sha256.Size]byte, *parsed]
	// charts are the hashes of the chart archives known to load.
	charts *lru.Cache[[sha256.Size]byte, struct{}]
	// helm runs Helm renders in worker processes.
	helm *helmworker.Pool

	parses     atomic.Int64
	chartLoads atomic.Int64
	abandoned  atomic.Int64
	killed     atomic.Int64
}

// helmPool renders the Helm charts of every Renderer of the process.
var helmPool = helmworker.New(helmworker.Options{})

// Option configures a Renderer.
type Option func(*Renderer)

// WithFetcher sets what fetches templates and charts named by url. Without
// it, the Renderer uses source.New(): http and https only, no file or
// configmap URLs.
func WithFetcher(f *source.Fetcher) Option { return func(r *Renderer) { r.fetcher = f } }

// WithLimits sets the limits of every render; zero fields keep their
// defaults.
func WithLimits(l Limits) Option { return func(r *Renderer) { r.limits = l.withDefaults() } }

// WithCacheSizes sets how many parsed templates and loaded charts the
// Renderer keeps (512 and 16).
func WithCacheSizes(templates, charts int) Option {
	return func(r *Renderer) {
		r.templates = lru.New[[sha256.Size]byte, *parsed](templates, 0)
		r.charts = lru.New[[sha256.Size]byte, struct{}](charts, chartCacheBytes)
	}
}

// WithKubeVersion sets the Kubernetes version that Helm charts see as
// .Capabilities.KubeVersion, for example "v1.33.2" (DefaultKubeVersion).
func WithKubeVersion(v string) Option { return func(r *Renderer) { r.kubeVersion = v } }

// New returns a Renderer.
func New(opts ...Option) *Renderer {
	r := &Renderer{
		limits:      Limits{}.withDefaults(),
		kubeVersion: DefaultKubeVersion,
		funcs:       baseFuncs(),
		templates:   lru.New[[sha256.Size]byte, *parsed](defaultTemplateCacheSize, 0),
		charts:      lru.New[[sha256.Size]byte, struct{}](defaultChartCacheSize, chartCacheBytes),
		helm:        helmPool,
	}
	for _, o := range opts {
		o(r)
	}
	if r.fetcher == nil {
		r.fetcher = source.New()
	}
	return r
}

// Stats counts work the caches saved or could not save.
type Stats struct {
	// TemplateParses is how many template texts were parsed: renders of a
	// cached template do not count.
	TemplateParses int64
	// ChartLoads is how many chart archives were unpacked to check them
	// (the worker processes that render charts unpack them again).
	ChartLoads int64
	// Abandoned is how many gotemplate renders ran out of time and were
	// left behind. Such a render stops at its next loop iteration,
	// template call, template function call or output write.
	Abandoned int64
	// Killed is how many Helm renders ran out of time or memory, or lost
	// their caller, and had their worker process killed.
	Killed int64
}

// Stats returns the counters of r.
func (r *Renderer) Stats() Stats {
	return Stats{
		TemplateParses: r.parses.Load(),
		ChartLoads:     r.chartLoads.Load(),
		Abandoned:      r.abandoned.Load(),
		Killed:         r.killed.Load(),
	}
}

// Input is what one render needs.
type Input struct {
	// Template is the plan's template for the action being rendered.
	Template osbv1alpha1.TemplateSpec
	// Values are the template's variables, usually built with Values, plus
	// the sources (WithSources). A render works on a copy: templates that
	// edit a variable (set, unset) do not change it.
	Values map[string]any
	// Namespace is the namespace of a Helm release (.Release.Namespace).
	// When empty, the instance's namespace is used.
	Namespace string
	// ReleaseID is the id that names a Helm release (ReleaseName). When
	// empty, the binding's name is used if there is a binding, otherwise
	// the instance's name, as Service Fabrik does.
	ReleaseID string
}

// Objects is what a provision, bind or unbind template renders.
type Objects struct {
	// CRDs are the CustomResourceDefinitions of a Helm chart's crds/
	// directories, as the files hold them (Helm does not template them);
	// a gotemplate has none. They are for the caller to install as Helm
	// does: when missing, before Objects.
	CRDs []ChartCRD
	// Objects are the rendered objects, in the order of the template's
	// YAML documents (for helm: by kind in Helm's install order).
	Objects []*unstructured.Unstructured
}

// Render renders a provision, bind or unbind template. Documents that are
// empty or hold only comments are skipped; a document without apiVersion
// or kind is an error. Objects keep the namespace the template gave them,
// which may be none: the caller defaults it for namespaced kinds.
func (r *Renderer) Render(ctx context.Context, in Input) (Objects, error) {
	switch in.Template.Type {
	case osbv1alpha1.TypeHelm:
		return r.renderHelm(ctx, in)
	case osbv1alpha1.TypeGoTemplate:
		text, origin, err := r.renderText(ctx, in)
		if err != nil {
			return Objects{}, err
		}
		objs, err := decodeObjects(text)
		if err != nil {
			return Objects{}, newError(in.Template, origin, StageDecode, err)
		}
		return Objects{Objects: objs}, nil
	}
	return Objects{}, newError(in.Template, "", StageSource, fmt.Errorf("unknown template type %q", in.Template.Type))
}

// RenderObjects renders a provision, bind or unbind template into one
// list of objects: a Helm chart's crds/ CRDs first, then the rest (see
// Render). Callers that install crds/ as Helm does use Render.
func (r *Renderer) RenderObjects(ctx context.Context, in Input) ([]*unstructured.Unstructured, error) {
	out, err := r.Render(ctx, in)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(out.CRDs)+len(out.Objects))
	for _, c := range out.CRDs {
		objs = append(objs, c.Object)
	}
	return append(objs, out.Objects...), nil
}

// RenderMap renders a gotemplate whose output is one YAML mapping: the
// sources and status templates. Empty output gives an empty map.
func (r *Renderer) RenderMap(ctx context.Context, in Input) (map[string]any, error) {
	text, origin, err := r.renderText(ctx, in)
	if err != nil {
		return nil, err
	}
	m, err := decodeMap(text)
	if err != nil {
		return nil, newError(in.Template, origin, StageDecode, err)
	}
	return m, nil
}

// RenderString renders a gotemplate whose output is plain text, such as the
// label selector of a clusterSelector template, without surrounding white
// space.
func (r *Renderer) RenderString(ctx context.Context, in Input) (string, error) {
	text, _, err := r.renderText(ctx, in)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(text), nil
}

// renderText resolves and executes a gotemplate. It returns the output and
// where the template text came from.
func (r *Renderer) renderText(ctx context.Context, in Input) (string, string, error) {
	t := in.Template
	if t.Type != osbv1alpha1.TypeGoTemplate {
		return "", "", newError(t, "", StageSource, fmt.Errorf("a %s template cannot render %s output: use type %s", t.Type, t.Action, osbv1alpha1.TypeGoTemplate))
	}
	text, origin, err := r.templateText(ctx, t, true)
	if err != nil {
		return "", origin, err
	}
	out, err := r.execute(ctx, t, origin, text, in.Values)
	return out, origin, err
}

// Origins of template text other than a URL, as errors name them.
const (
	originContent        = "content"
	originContentEncoded = "contentEncoded"
)

// templateText returns the text of t's template: content, else
// contentEncoded, else (when useURL) the document at url. It also returns
// where the text came from.
func (r *Renderer) templateText(ctx context.Context, t osbv1alpha1.TemplateSpec, useURL bool) (string, string, error) {
	limit := r.limits.MaxTemplateBytes
	switch {
	case t.Content != "":
		if int64(len(t.Content)) > limit {
			return "", originContent, newError(t, originContent, StageSource, fmt.Errorf("the text is larger than %d bytes", limit))
		}
		return t.Content, originContent, nil
	case t.ContentEncoded != "":
		b, err := decodeBase64(t.ContentEncoded)
		if err != nil {
			return "", originContentEncoded, newError(t, originContentEncoded, StageSource, fmt.Errorf("not valid base64: %w", err))
		}
		if int64(len(b)) > limit {
			return "", originContentEncoded, newError(t, originContentEncoded, StageSource, fmt.Errorf("the text is larger than %d bytes", limit))
		}
		return string(b), originContentEncoded, nil
	case useURL && t.URL != "":
		origin := redactURL(t.URL)
		b, err := r.fetcher.Fetch(ctx, t.URL, limit)
		if err != nil {
			return "", origin, newError(t, origin, StageSource, err)
		}
		return string(b), origin, nil
	case useURL:
		return "", "", newError(t, "", StageSource, errors.New("the template has no text: set content, contentEncoded or url"))
	}
	return "", "", nil
}

// decodeBase64 decodes standard base64, padded or not, ignoring line breaks
// and spaces that YAML editors put into long strings.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', ' ', '\t':
			return -1
		}
		return r
	}, s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// parsed is a parsed template and a pool of its executable clones.
type parsed struct {
	tmpl  *template.Template
	funcs template.FuncMap
	pool  sync.Pool
}

// instance is a clone of a parsed template whose functions are bound to
// its own guard, so that the renderer can stop an execution from outside.
type instance struct {
	tmpl *template.Template
	g    *guard
}

func (p *parsed) get() (*instance, error) {
	if v := p.pool.Get(); v != nil {
		return v.(*instance), nil
	}
	clone, err := p.tmpl.Clone()
	if err != nil {
		return nil, err
	}
	g := &guard{}
	clone.Funcs(guardedFuncs(p.funcs, g))
	return &instance{tmpl: clone, g: g}, nil
}

// parse returns the parsed template of text, from the cache when the same
// action and text were parsed before.
func (r *Renderer) parse(t osbv1alpha1.TemplateSpec, origin, text string) (*parsed, error) {
	h := sha256.New()
	h.Write([]byte(t.Type))
	h.Write([]byte{0})
	h.Write([]byte(t.Action))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var key [sha256.Size]byte
	h.Sum(key[:0])
	if p, ok := r.templates.Get(key); ok {
		return p, nil
	}
	r.parses.Add(1)
	tmpl, err := parseTemplate(string(t.Action), text, r.funcs)
	if err != nil {
		return nil, newError(t, origin, StageParse, err)
	}
	p := &parsed{tmpl: tmpl, funcs: r.funcs}
	r.templates.Add(key, p, 1)
	return p, nil
}

// parseTemplate parses text with funcs, refuses loops over constants that
// repeat too often, and makes every execution stoppable (guardLoops).
func parseTemplate(name, text string, funcs template.FuncMap) (*template.Template, error) {
	tmpl, err := template.New(name).Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	if err := checkConstantLoops(tmpl); err != nil {
		return nil, err
	}
	guardLoops(tmpl)
	return tmpl, nil
}

// Check parses the text of a gotemplate as a render would, named name (the
// action), and returns the error a render would fail with at parse time:
// invalid syntax, a function that is not defined, loops over constants
// that repeat more than MaxConstantIterations times. The catalog validates
// inline templates with it.
func Check(name, text string) error {
	_, err := parseTemplate(name, text, checkFuncs())
	return err
}

// checkFuncs are the functions Check parses with; parsing only reads them.
var checkFuncs = sync.OnceValue(baseFuncs)

// execute parses (or finds) and runs a gotemplate under the limits.
func (r *Renderer) execute(ctx context.Context, t osbv1alpha1.TemplateSpec, origin, text string, values map[string]any) (string, error) {
	p, err := r.parse(t, origin, text)
	if err != nil {
		return "", err
	}
	inst, err := p.get()
	if err != nil {
		return "", newError(t, origin, StageParse, err)
	}
	inst.g.reset(r.limits)
	out := &output{g: inst.g, max: r.limits.MaxOutputBytes}
	data := plain.Copy(values)

	var res string
	err = r.bounded(ctx, inst.g, func() error {
		if err := inst.tmpl.Execute(out, data); err != nil {
			return err
		}
		res = out.String()
		return nil
	})
	if err != nil {
		if !errors.Is(err, ErrTimeLimit) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			p.pool.Put(inst)
		}
		return "", newError(t, origin, StageExecute, err)
	}
	p.pool.Put(inst)
	return res, nil
}

// bounded runs fn on its own goroutine and waits for it at most the render
// timeout, or until ctx ends. A panic in fn becomes an error. When the time
// is up, g is stopped so that fn fails at its next guarded step (a loop
// iteration, template call, function call or output write), and fn is left
// behind to end there.
func (r *Renderer) bounded(ctx context.Context, g *guard, fn func() error) error {
	runCtx, cancel := context.WithTimeout(ctx, r.limits.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("template panicked: %v", v)
			}
		}()
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-runCtx.Done():
		cause := fmt.Errorf("%w (%s)", ErrTimeLimit, r.limits.Timeout)
		if ctx.Err() != nil {
			cause = ctx.Err()
		}
		g.stop(cause)
		r.abandoned.Add(1)
		return cause
	}
}

func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return plain.Copy(m).(map[string]any)
}
