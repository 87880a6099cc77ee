package clusters

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart/loader"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/render"
	"github.com/marketplane/marketplane/internal/render/source"
)

// LabelComponent marks every object the inter-operator installed for a
// component of an SFCluster; its value is the component's name.
const LabelComponent = "interoperator.marketplane.io/component"

// ComponentFieldOwnerPrefix prefixes the server-side apply field manager of
// a component's objects; the component's name follows. Each component
// owns its fields, so that two components, or a component and an
// instance, never take fields away from each other.
const ComponentFieldOwnerPrefix = "marketplane-interoperator-component-"

// maxComponentMessage bounds the message of one component in the status.
const maxComponentMessage = 1024

// ComponentsPending says why the components of sfc keep instances away
// from it: "" when it names no components, or when its ComponentsReady
// condition is True for its current generation. The scheduler skips a
// cluster for which it says something, and the instance controller wakes
// the waiting instances when what it says changes.
func ComponentsPending(sfc *resourcev1alpha1.SFCluster) string {
	if len(sfc.Spec.Components) == 0 {
		return ""
	}
	c := apimeta.FindStatusCondition(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionComponentsReady)
	switch {
	case c == nil:
		return "components not installed yet"
	case c.ObservedGeneration != sfc.Generation:
		return "components of the current spec not installed yet"
	case c.Status != metav1.ConditionTrue:
		return "components not installed (" + c.Reason + ")"
	}
	return ""
}

// installer installs the components of SFClusters: it renders their charts
// with renderers shared per configuration, like the provisioner's.
type installer struct {
	platform   client.Reader
	httpClient *http.Client

	mu        sync.Mutex
	renderers map[string]*componentRenderer
}

// componentRenderer is a renderer and the fetcher behind it, which also
// reads the chart's version.
type componentRenderer struct {
	renderer *render.Renderer
	fetcher  *source.Fetcher
	maxChart int64
}

func newInstaller(platform client.Reader) *installer {
	return &installer{platform: platform, renderers: map[string]*componentRenderer{}}
}

// rendererFor returns the renderer for cfg's limits and file roots: a
// component's chart url may be read from where a plan's may, within the
// same limits.
func (in *installer) rendererFor(cfg *interoperatorv1alpha1.ProviderConfig) *componentRenderer {
	var l render.Limits
	if lim := cfg.Spec.Limits; lim != nil {
		l.Timeout = cfg.RenderTimeout()
		l.MaxTemplateBytes, l.MaxOutputBytes, l.MaxChartBytes = lim.MaxTemplateBytes, lim.MaxOutputBytes, lim.MaxChartBytes
	}
	key := fmt.Sprintf("%v|%s", l, strings.Join(cfg.Spec.TemplateFileRoots, "\x00"))
	in.mu.Lock()
	defer in.mu.Unlock()
	if r, ok := in.renderers[key]; ok {
		return r
	}
	opts := []source.Option{source.WithConfigMapGetter(source.ReaderConfigMapGetter(in.platform))}
	if len(cfg.Spec.TemplateFileRoots) > 0 {
		opts = append(opts, source.WithFileRoots(cfg.Spec.TemplateFileRoots...))
	}
	if in.httpClient != nil {
		opts = append(opts, source.WithHTTPClient(in.httpClient))
	}
	f := source.New(opts...)
	maxChart := l.MaxChartBytes
	if maxChart <= 0 {
		maxChart = render.DefaultMaxChartBytes
	}
	r := &componentRenderer{renderer: render.New(render.WithFetcher(f), render.WithLimits(l)), fetcher: f, maxChart: maxChart}
	if len(in.renderers) > 8 {
		clear(in.renderers)
	}
	in.renderers[key] = r
	return r
}

// valuesTemplate turns a component's values into the content of a helm
// template: the values are data, passed as the variable .values, never
// parsed as a template themselves.
const valuesTemplate = "{{ toYaml .values }}"

// render renders the chart of comp into the objects to apply, and returns
// the chart's version.
func (r *componentRenderer) render(ctx context.Context, sfc *resourcev1alpha1.SFCluster, comp resourcev1alpha1.SFClusterComponent) ([]*unstructured.Unstructured, string, error) {
	t := osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeHelm, URL: comp.Chart.URL}
	vals := map[string]any{}
	if comp.Values != nil && len(comp.Values.Raw) > 0 {
		var v map[string]any
		if err := json.Unmarshal(comp.Values.Raw, &v); err != nil {
			return nil, "", permanentf("values are not an object: %v", err)
		}
		if len(v) > 0 {
			t.Content = valuesTemplate
			vals["values"] = v
		}
	}
	objs, err := r.renderer.RenderObjects(ctx, render.Input{
		Template:  t,
		Values:    vals,
		Namespace: componentNamespace(comp),
		ReleaseID: sfc.Name + "/" + comp.Name,
	})
	if err != nil {
		if render.IsTransient(err) {
			return nil, "", err
		}
		return nil, "", &permanentError{err: err}
	}
	// The renderer caches the archive by content, and the fetcher caches
	// http bodies: reading the version costs a second fetch of a
	// configmap:// or file:// chart, nothing more.
	version := ""
	if data, err := r.fetcher.Fetch(ctx, comp.Chart.URL, r.maxChart); err == nil {
		if ch, err := loader.LoadArchive(bytes.NewReader(data)); err == nil && ch.Metadata != nil {
			version = ch.Metadata.Version
		}
	}
	return objs, version, nil
}

// componentNamespace is the release namespace of comp.
func componentNamespace(comp resourcev1alpha1.SFClusterComponent) string {
	if comp.Namespace != "" {
		return comp.Namespace
	}
	return comp.Name
}

// permanentError is an installation error that retrying cannot fix: the
// component must change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanentf(format string, args ...any) error {
	return &permanentError{err: fmt.Errorf(format, args...)}
}

// isPermanent reports whether err is an installation error retrying cannot
// fix.
func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p) || apply.IsPermanent(err)
}

// componentsResult is what reconcileComponents found.
type componentsResult struct {
	// condition is the ComponentsReady condition; nil removes it.
	condition *metav1.Condition
	// pending is true while something is left to do that a retry may
	// finish: the SFCluster is looked at again soon.
	pending bool
}

// reconcileComponents brings the components installed on the cluster of
// sfc in line with its spec (or, when removeAll is set, removes them all),
// and records what is installed in sfc.Status.Components. target is nil
// when the cluster cannot be reached; the status then stays as it is.
func (r *StatusReconciler) reconcileComponents(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, sfc *resourcev1alpha1.SFCluster, target *Target, removeAll bool) componentsResult {
	desired := sfc.Spec.Components
	if removeAll {
		desired = nil
	}
	if len(desired) == 0 && len(sfc.Status.Components) == 0 {
		return componentsResult{}
	}
	if target == nil {
		cond := metav1.Condition{Type: resourcev1alpha1.SFClusterConditionComponentsReady, Status: metav1.ConditionFalse,
			Reason: resourcev1alpha1.SFClusterReasonInstalling, Message: "waiting for the cluster to be reachable"}
		if removeAll {
			cond.Reason = resourcev1alpha1.SFClusterReasonRemoving
		}
		if old := apimeta.FindStatusCondition(sfc.Status.Conditions, cond.Type); old != nil && old.ObservedGeneration == sfc.Generation && !removeAll {
			// What was installed for this spec stays installed while the
			// cluster cannot be reached.
			cond = *old
		}
		return componentsResult{condition: &cond, pending: true}
	}

	old := map[string]resourcev1alpha1.SFClusterComponentStatus{}
	for _, s := range sfc.Status.Components {
		old[s.Name] = s
	}
	cr := r.installer.rendererFor(cfg)
	var statuses []resourcev1alpha1.SFClusterComponentStatus
	for _, comp := range desired {
		statuses = append(statuses, r.installComponent(ctx, cr, sfc, target, comp, old[comp.Name]))
		delete(old, comp.Name)
	}
	// Components no longer in the spec: delete their objects, and keep
	// them in the status until they are gone.
	for _, name := range sortedKeys(old) {
		s := old[name]
		remaining, err := target.Applier.Delete(ctx, toSources(s.Resources), nil)
		if len(remaining) == 0 && err == nil {
			r.recorder.Eventf(sfc, nil, "Normal", "ComponentRemoved", "RemoveComponent", "component %s removed", name)
			continue
		}
		s.State, s.Resources = resourcev1alpha1.SFClusterReasonRemoving, fromSources(remaining)
		s.Message = fmt.Sprintf("waiting for %d objects to be deleted", len(remaining))
		if err != nil {
			s.Message = cut(fmt.Sprintf("deleting %d objects: %s", len(remaining), describe(err)))
		}
		statuses = append(statuses, s)
	}
	sfc.Status.Components = statuses
	return componentsResult{condition: componentsCondition(statuses), pending: !allInstalled(statuses)}
}

// installComponent renders comp, applies its objects and prunes what the
// previous version had and this one has not. It returns the component's
// new status; prev is the old one.
func (r *StatusReconciler) installComponent(ctx context.Context, cr *componentRenderer, sfc *resourcev1alpha1.SFCluster, target *Target, comp resourcev1alpha1.SFClusterComponent, prev resourcev1alpha1.SFClusterComponentStatus) resourcev1alpha1.SFClusterComponentStatus {
	log := logf.FromContext(ctx).WithValues("component", comp.Name)
	st := prev
	st.Name = comp.Name
	fail := func(err error) resourcev1alpha1.SFClusterComponentStatus {
		st.State = resourcev1alpha1.SFClusterReasonInstalling
		if isPermanent(err) {
			st.State = resourcev1alpha1.SFClusterReasonInstallFailed
		}
		st.Message = cut(describe(err))
		log.V(1).Info("Component not installed", "state", st.State, "error", st.Message)
		return st
	}
	objs, version, err := cr.render(ctx, sfc, comp)
	if err != nil {
		return fail(err)
	}
	ns := componentNamespace(comp)
	sum, err := objectsHash(objs, ns)
	if err != nil {
		return fail(err)
	}
	if sum == prev.Hash && prev.State == resourcev1alpha1.SFClusterReasonInstalled {
		// Nothing changed since the last installation.
		return prev
	}
	labels := map[string]string{LabelComponent: comp.Name}
	// CRDs first, as a set of their own: the chart's other objects may be
	// of the kinds they define, which the cluster only knows once they are
	// applied.
	crds, rest := splitCRDs(objs)
	var refs []osbv1alpha1.Source
	for _, batch := range [][]*unstructured.Unstructured{crds, rest} {
		if len(batch) == 0 {
			continue
		}
		_, defaulted, err := target.Applier.Prepare(batch, ns, labels)
		if err != nil {
			return fail(err)
		}
		if defaulted {
			if err := target.Applier.EnsureNamespace(ctx, ns); err != nil {
				return fail(err)
			}
		}
		applied, err := target.Applier.Apply(ctx, batch, ComponentFieldOwnerPrefix+comp.Name)
		refs = append(refs, applied...)
		// What was applied counts as the component's, also when a later
		// object failed: removing the component removes it.
		st.Resources = fromSources(union(refs, toSources(prev.Resources)))
		if err != nil {
			return fail(err)
		}
	}
	// Prune: what the previous version had and this one has not.
	stale := minus(toSources(prev.Resources), refs)
	remaining, err := target.Applier.Delete(ctx, stale, nil)
	st.Resources = fromSources(union(refs, remaining))
	st.Chart, st.Version, st.Hash = comp.Chart.URL, version, sum
	if err != nil {
		return fail(err)
	}
	if len(remaining) > 0 {
		st.State = resourcev1alpha1.SFClusterReasonInstalling
		st.Message = fmt.Sprintf("waiting for %d objects of the previous version to be deleted", len(remaining))
		return st
	}
	if prev.Hash != st.Hash || prev.State != resourcev1alpha1.SFClusterReasonInstalled {
		verb := "installed"
		if prev.Hash != "" {
			verb = "upgraded"
		}
		r.recorder.Eventf(sfc, nil, "Normal", "ComponentInstalled", "InstallComponent", "component %s %s: chart version %s, %d objects", comp.Name, verb, version, len(refs))
		log.Info("Component "+verb, "version", version, "objects", len(refs))
	}
	st.State, st.Message = resourcev1alpha1.SFClusterReasonInstalled, ""
	return st
}

// objectsHash identifies what a component renders: the SHA-256 of the
// objects, in order, and the release namespace.
func objectsHash(objs []*unstructured.Unstructured, namespace string) (string, error) {
	h := sha256.New()
	h.Write([]byte(namespace))
	for _, o := range objs {
		// encoding/json sorts the keys of maps: the same objects give the
		// same bytes.
		b, err := json.Marshal(o.Object)
		if err != nil {
			return "", permanentf("encode %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		h.Write([]byte{0})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// splitCRDs returns the CustomResourceDefinitions of objs and the rest,
// each in their order.
func splitCRDs(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	crdKind := schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == crdKind {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}

// componentsCondition summarises the components' states: the first
// failure, else the first component still installing or being removed,
// else Installed.
func componentsCondition(statuses []resourcev1alpha1.SFClusterComponentStatus) *metav1.Condition {
	if len(statuses) == 0 {
		return nil
	}
	c := &metav1.Condition{Type: resourcev1alpha1.SFClusterConditionComponentsReady, Status: metav1.ConditionFalse}
	for _, reason := range []string{resourcev1alpha1.SFClusterReasonInstallFailed, resourcev1alpha1.SFClusterReasonInstalling, resourcev1alpha1.SFClusterReasonRemoving} {
		for _, s := range statuses {
			if s.State == reason {
				c.Reason = reason
				c.Message = cut(fmt.Sprintf("component %s: %s", s.Name, s.Message))
				return c
			}
		}
	}
	names := make([]string, 0, len(statuses))
	for _, s := range statuses {
		names = append(names, s.Name)
	}
	c.Status, c.Reason = metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonInstalled
	c.Message = "installed: " + strings.Join(names, ", ")
	return c
}

func allInstalled(statuses []resourcev1alpha1.SFClusterComponentStatus) bool {
	for _, s := range statuses {
		if s.State != resourcev1alpha1.SFClusterReasonInstalled {
			return false
		}
	}
	return true
}

// cut bounds a message of the status.
func cut(s string) string {
	if len(s) <= maxComponentMessage {
		return s
	}
	return s[:maxComponentMessage-3] + "..."
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func toSources(refs []resourcev1alpha1.SFClusterResourceRef) []osbv1alpha1.Source {
	out := make([]osbv1alpha1.Source, 0, len(refs))
	for _, r := range refs {
		out = append(out, osbv1alpha1.Source{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace})
	}
	return out
}

func fromSources(refs []osbv1alpha1.Source) []resourcev1alpha1.SFClusterResourceRef {
	if len(refs) == 0 {
		return nil
	}
	out := make([]resourcev1alpha1.SFClusterResourceRef, 0, len(refs))
	for _, r := range refs {
		out = append(out, resourcev1alpha1.SFClusterResourceRef{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace})
	}
	return out
}

// union returns a followed by the references of b that a lacks.
func union(a, b []osbv1alpha1.Source) []osbv1alpha1.Source {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// minus returns the references of a that b lacks.
func minus(a, b []osbv1alpha1.Source) []osbv1alpha1.Source {
	var out []osbv1alpha1.Source
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}
