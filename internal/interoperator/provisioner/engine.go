package provisioner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/sourcewatch"
	"github.com/marketplane/marketplane/internal/render"
	"github.com/marketplane/marketplane/internal/render/source"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Defaults of an Engine.
const (
	// DefaultMinProgressWait and DefaultMaxProgressWait bound the backoff
	// with which an operation in progress is looked at again.
	DefaultMinProgressWait = time.Second
	DefaultMaxProgressWait = 30 * time.Second
	// DefaultWatchedWait is how often an operation in progress whose
	// sources are all watched is looked at without an event: a safety net
	// only.
	DefaultWatchedWait = 5 * time.Minute
)

// VarCluster is the name of Marketplane's extra template variable: the
// target cluster's name, API server URL and CA (see clusters.Target). A
// source of the same name takes its place, in every template.
const VarCluster = "cluster"

// Engine is what the instance and binding reconcilers share: the platform
// cluster (catalog, SFClusters, ProviderConfig), the target clusters, the
// renderers and the retry bookkeeping. It is safe for concurrent use.
type Engine struct {
	platform   cluster.Cluster
	registry   *clusters.Registry
	fieldOwner string
	minWait    time.Duration
	maxWait    time.Duration
	httpClient *http.Client
	tracker    *tracker
	// replicator, when set, provisions the objects of SFClusters in
	// provisioning mode replicate (replicated.go).
	replicator    Replicator
	replicaEvents replicaSources
	// sources, when set, wakes operations in progress when a source they
	// wait on changes; those whose sources are all watched are polled
	// only every watchedWait.
	sources     *sourcewatch.Watcher
	watchedWait time.Duration

	mu        sync.Mutex
	renderers map[string]*render.Renderer
}

// EngineOption configures an Engine.
type EngineOption func(*Engine)

// WithProgressWait sets the backoff with which operations in progress, and
// deletions waiting for resources to go, are looked at again
// (DefaultMinProgressWait to DefaultMaxProgressWait).
func WithProgressWait(minWait, maxWait time.Duration) EngineOption {
	return func(e *Engine) {
		if minWait > 0 && maxWait >= minWait {
			e.minWait, e.maxWait = minWait, maxWait
		}
	}
}

// WithSourceWatcher makes operations in progress wake up when a source
// they wait on changes on the target cluster (package sourcewatch), and
// look again without an event only every watchedWait when all their
// sources are watched (DefaultWatchedWait when 0). w must run with the
// manager.
func WithSourceWatcher(w *sourcewatch.Watcher, watchedWait time.Duration) EngineOption {
	return func(e *Engine) {
		e.sources = w
		if watchedWait > 0 {
			e.watchedWait = watchedWait
		}
	}
}

// WithFieldOwner sets the server-side apply field manager of instance
// resources (apply.DefaultFieldOwner).
func WithFieldOwner(owner string) EngineOption {
	return func(e *Engine) {
		if owner != "" {
			e.fieldOwner = owner
		}
	}
}

// WithHTTPClient sets the client that fetches http(s) template urls.
func WithHTTPClient(c *http.Client) EngineOption {
	return func(e *Engine) { e.httpClient = c }
}

// NewEngine returns an Engine reading the catalog and SFClusters from
// platform and reaching target clusters through registry.
func NewEngine(platform cluster.Cluster, registry *clusters.Registry, opts ...EngineOption) *Engine {
	e := &Engine{
		platform:    platform,
		registry:    registry,
		fieldOwner:  apply.DefaultFieldOwner,
		minWait:     DefaultMinProgressWait,
		maxWait:     DefaultMaxProgressWait,
		tracker:     newTracker(),
		renderers:   map[string]*render.Renderer{},
		watchedWait: DefaultWatchedWait,
	}
	for _, o := range opts {
		o(e)
	}
	if e.sources != nil {
		e.tracker.onDone = e.sources.Forget
	}
	return e
}

// renderer returns the renderer for cfg's limits and file roots, shared by
// every object under the same configuration so that its caches pay off.
func (e *Engine) renderer(cfg *interoperatorv1alpha1.ProviderConfig) *render.Renderer {
	var l render.Limits
	if lim := cfg.Spec.Limits; lim != nil {
		l.Timeout = cfg.RenderTimeout()
		l.MaxTemplateBytes, l.MaxOutputBytes, l.MaxChartBytes = lim.MaxTemplateBytes, lim.MaxOutputBytes, lim.MaxChartBytes
	}
	key := fmt.Sprintf("%v|%s", l, strings.Join(cfg.Spec.TemplateFileRoots, "\x00"))
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.renderers[key]; ok {
		return r
	}
	opts := []source.Option{
		source.WithConfigMapGetter(source.ReaderConfigMapGetter(e.platform.GetAPIReader())),
	}
	if len(cfg.Spec.TemplateFileRoots) > 0 {
		opts = append(opts, source.WithFileRoots(cfg.Spec.TemplateFileRoots...))
	}
	if e.httpClient != nil {
		opts = append(opts, source.WithHTTPClient(e.httpClient))
	}
	r := render.New(render.WithFetcher(source.New(opts...)), render.WithLimits(l))
	// Configurations rarely change; an old renderer is dropped with its
	// caches rather than kept forever.
	if len(e.renderers) > 8 {
		clear(e.renderers)
	}
	e.renderers[key] = r
	return r
}

// target returns the target cluster the runtime handed out.
func (e *Engine) target(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (*clusters.Target, error) {
	if cc.WorkloadCluster == nil {
		return nil, errors.New("no target cluster")
	}
	return e.registry.Target(ctx, cfg.CatalogNamespace(), cc.WorkloadCluster.Name())
}

// catalogEntries returns the service and plan of an instance or binding.
// A missing or invalid entry is invalid user input: the object waits for
// the catalog to change.
func (e *Engine) catalogEntries(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, serviceID, planID string) (*osbv1alpha1.SFService, *osbv1alpha1.SFPlan, error) {
	if serviceID == "" || planID == "" {
		// An SFServiceInstance without spec, which the CRD accepts as
		// Service Fabrik's does (docs/api.md): no catalog entry can match.
		return nil, nil, spruntime.InvalidUserInput(string(ReasonMissingServiceOrPlan), "%s", msgMissingServiceOrPlan)
	}
	ns := cfg.CatalogNamespace()
	reader := e.platform.GetClient()
	plan, err := catalog.Plan(ctx, reader, ns, planID)
	if err != nil {
		return nil, nil, err
	}
	if plan == nil {
		return nil, nil, spruntime.InvalidUserInput(string(ReasonPlanNotFound), "no SFPlan with id %q in the catalog namespace %s", planID, ns)
	}
	if plan.Spec.ServiceID != serviceID {
		return nil, nil, spruntime.InvalidUserInput(string(ReasonServiceNotFound), "the SFPlan %s with id %q belongs to service %q, not to %q", plan.Name, planID, plan.Spec.ServiceID, serviceID)
	}
	svc, err := catalog.Service(ctx, reader, ns, serviceID)
	if err != nil {
		return nil, nil, err
	}
	if c := invalidVerdict(plan); c != nil {
		switch {
		case c.Reason != string(catalog.ReasonServiceNotFound):
			return nil, nil, spruntime.InvalidUserInput(string(ReasonPlanInvalid), "the SFPlan %s is invalid (%s): %s", plan.Name, c.Reason, c.Message)
		case svc != nil:
			// The catalog judged the plan before its service appeared,
			// and its watches brought the service here first: wait for
			// its next verdict (planChanged wakes the instance) rather
			// than fail an instance whose catalog entries are fine.
			return nil, nil, spruntime.InvalidUserInput(string(ReasonServiceNotFound), "the SFPlan %s waits for the catalog to validate it against SFService %s, which it did not find before", plan.Name, svc.Name)
		}
		// A plan whose only fault is a missing service waits for it, like
		// an instance that found no service before the catalog's verdict.
	}
	if svc == nil {
		return nil, nil, spruntime.InvalidUserInput(string(ReasonServiceNotFound), "no SFService with id %q in the catalog namespace %s", serviceID, ns)
	}
	return svc, plan, nil
}

// msgMissingServiceOrPlan is the message of ReasonMissingServiceOrPlan.
const msgMissingServiceOrPlan = "the instance names no service or plan: spec.serviceId and spec.planId are required"

// values returns the variables of a template: .service, .plan, .instance,
// .binding (when binding is not nil), .cluster and .instanceId.
func values(svc *osbv1alpha1.SFService, plan *osbv1alpha1.SFPlan, inst *osbv1alpha1.SFServiceInstance, binding *osbv1alpha1.SFServiceBinding, t *clusters.Target) (map[string]any, error) {
	var b client.Object
	if binding != nil {
		b = binding
	}
	vals, err := render.Values(svc, plan, inst, b)
	if err != nil {
		return nil, err
	}
	vals[VarCluster] = t.Variable()
	vals[VarInstanceID] = idOf(inst)
	return vals, nil
}

// outcome is how an operation step ended.
type outcome struct {
	// permanent is set when the step failed for good: the operation fails
	// with reason and message.
	permanent *failure
	// err is a transient error, retried with backoff.
	err error
	// unreachable is set when err says that the target cluster could not
	// be reached: retried without counting towards the limit.
	unreachable bool
}

type failure struct {
	reason  Reason
	message string
}

func failed(reason Reason, format string, args ...any) outcome {
	return outcome{permanent: &failure{reason: reason, message: fmt.Sprintf(format, args...)}}
}

func transient(err error) outcome { return outcome{err: err} }

func (o outcome) ok() bool { return o.permanent == nil && o.err == nil }

// rendered is what a provision, bind or unbind template rendered: the
// objects, a Helm chart's crds/ CRDs, and the policy that decides what
// they may be, which follows from what they were rendered for (plan,
// instance, binding).
type rendered struct {
	objs   []*unstructured.Unstructured
	crds   []apply.ChartCRD
	policy apply.Policy
}

// renderObjects renders a provision, bind or unbind template of plan with
// vals and the plan's sources, read from the target cluster tc just
// before, as Service Fabrik renders every template: sources first, then
// the template. For a provision the sources usually do not exist yet and
// stay unset. pl says where the sources are read; its namespace is the
// instance's default namespace.
//
// What the render policy allows, and the name of a Helm release, follow
// from vals, never from the sources: a source named like a variable
// (.plan, .instance) replaces it in the template, but cannot widen the
// policy or rename the release.
func (e *Engine) renderObjects(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, plan *osbv1alpha1.SFPlan, t osbv1alpha1.TemplateSpec, vals map[string]any, tc *clusters.Target, pl placement) (rendered, outcome) {
	pl.settled = false
	namespace := pl.namespace
	in, o := e.withSources(ctx, cfg, plan, vals, tc, pl, nil)
	if !o.ok() {
		return rendered{}, o
	}
	releaseID, _, _ := unstructured.NestedString(vals, render.VarBinding, "metadata", "name")
	if releaseID == "" {
		releaseID, _, _ = unstructured.NestedString(vals, render.VarInstance, "metadata", "name")
	}
	out, err := e.renderer(cfg).Render(ctx, render.Input{Template: t, Values: in, Namespace: namespace, ReleaseID: releaseID})
	if err != nil {
		if render.IsTransient(err) {
			return rendered{}, transient(err)
		}
		return rendered{}, failed(ReasonTemplateFailed, "%v", err)
	}
	if n, limit := len(out.Objects)+len(out.CRDs), cfg.MaxObjects(); n > limit {
		return rendered{}, failed(ReasonInvalidResource, "the %s template renders %d objects, more than the limit of %d", t.Action, n, limit)
	}
	crds := make([]apply.ChartCRD, len(out.CRDs))
	for i, c := range out.CRDs {
		crds[i] = apply.ChartCRD{File: c.File, Object: c.Object}
	}
	return rendered{objs: out.Objects, crds: crds, policy: renderPolicy(cfg, vals, namespace)}, outcome{}
}

// renderPolicy returns the policy of the templates rendered with vals: the
// default one, widened by what the ProviderConfig grants the plan.
// namespace is the instance's default namespace.
func renderPolicy(cfg *interoperatorv1alpha1.ProviderConfig, vals map[string]any, namespace string) apply.Policy {
	var spec *interoperatorv1alpha1.ProviderConfigSpec
	if cfg != nil {
		spec = &cfg.Spec
	}
	planID, _, _ := unstructured.NestedString(vals, render.VarPlan, "spec", "id")
	grants := spec.RenderGrants(planID)
	p := apply.Policy{
		DefaultNamespace: namespace,
		Namespaces:       grants.Namespaces,
		ClusterRoles:     grants.ClusterRoles,
	}
	for _, k := range grants.ClusterScopedKinds {
		p.ClusterScopedKinds = append(p.ClusterScopedKinds, schema.GroupKind{Group: k.Group, Kind: k.Kind})
	}
	p.Owner = ownerOf(vals)
	return p
}

// applyObjects prepares, checks against the render policy and applies
// rendered objects to the target, labelled for their owner (the policy's).
// It returns the references of every
// object it rendered and of those it applied (all of them unless it
// failed). Nothing is applied unless every object passes the policy's
// rules; the one rule that needs the target's copy of an object not yet
// recorded, that it is not another owner's, is checked by its create
// (apply.CreateOrApply), so that objects created before such a refusal
// are among the applied ones.
//
// A Helm chart's crds/ CRDs are installed as Helm installs them: those
// the target lacks are created (after the policy passed them too) and
// served before the other objects are applied, those it has are left
// alone; neither is recorded among the references, so that deprovision
// never deletes a CRD other instances may use.
func (e *Engine) applyObjects(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, r rendered, namespace string, fieldOwner string) (refs, applied []osbv1alpha1.Source, o outcome) {
	objs := r.objs
	missing, err := t.Applier.MissingCRDs(ctx, r.crds)
	if err != nil {
		return nil, nil, e.applyFailed(ctx, cfg, t, err)
	}
	refs, defaulted, err := t.Applier.Prepare(objs, namespace, r.policy.Owner.Labels(), missing...)
	if err != nil {
		return nil, nil, e.applyFailed(ctx, cfg, t, err)
	}
	unconfirmed, err := t.Applier.CheckForCreate(ctx, append(slices.Clip(missing), objs...), r.policy)
	if o := policyOutcome(err); !o.ok() {
		if o.err != nil {
			o = targetFailed(o.err)
		}
		return nil, nil, o
	}
	if err := t.Applier.InstallCRDs(ctx, missing, fieldOwner); err != nil {
		return refs, nil, e.applyFailed(ctx, cfg, t, err)
	}
	c := apply.Creation{FieldOwner: fieldOwner, Owner: r.policy.Owner, Unconfirmed: unconfirmed}
	if defaulted {
		// Created if the first write into it finds it missing.
		c.Namespace = namespace
	}
	applied, err = t.Applier.CreateOrApply(ctx, objs, c)
	var refused *apply.RefusedError
	switch {
	case errors.As(err, &refused):
		return refs, applied, policyOutcome(err)
	case err != nil:
		return refs, applied, e.applyFailed(ctx, cfg, t, err)
	}
	return refs, applied, outcome{}
}

// applyFailed classifies an error of preparing, installing or applying
// rendered objects: objects that cannot be applied, or whose kind the
// target does not serve, fail the operation at once (a kind nobody
// installs would otherwise be retried until the retries run out); the
// rest as requestFailed.
func (e *Engine) applyFailed(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, err error) outcome {
	var unknown *apply.UnknownKindError
	var unserved *apply.UnservedCRDError
	var invalid *apply.InvalidObjectError
	switch {
	case errors.As(err, &unserved), errors.As(err, &unknown):
		return failed(ReasonKindNotServed, "target cluster %s: %v", t.Name(), err)
	case errors.As(err, &invalid):
		return failed(ReasonInvalidResource, "%v", err)
	}
	return e.requestFailed(ctx, cfg, t, err)
}

// policyOutcome classifies an error of the render policy's checks.
func policyOutcome(err error) outcome {
	var refused *apply.RefusedError
	var tooLarge *apply.TooLargeError
	var invalid *apply.InvalidObjectError
	switch {
	case err == nil:
		return outcome{}
	case errors.As(err, &refused):
		reason := ReasonRenderedObjectRefused
		switch refused.Rule {
		case apply.RuleOwnSources:
			reason = ReasonSourceRefused
		case apply.RuleNoAdoption:
			reason = ReasonResourceConflict
		}
		return failed(reason, "%v", err)
	case errors.As(err, &tooLarge):
		return failed(ReasonResourceTooLarge, "%v", err)
	case errors.As(err, &invalid):
		return failed(ReasonInvalidResource, "%v", err)
	}
	return transient(err)
}

// Limits of what a request and a status template may make the
// provisioner record, so that every status and Secret it writes fits into
// etcd (1.5 MiB a request by default).
const (
	// MaxParametersBytes bounds the JSON parameters of an instance or
	// binding. Their object holds them twice (spec and
	// status.appliedSpec), and the API server's managedFields may list
	// every key of both again: four times this stays well below etcd's
	// limit.
	MaxParametersBytes = 256 << 10
	// MaxResponseBytes bounds a bind response, written into a Secret.
	MaxResponseBytes = 512 << 10
	// maxStatusText bounds the description, error and dashboard URL a
	// status template reports; longer text is cut.
	maxStatusText = 16 << 10
)

// checkParameters fails an operation whose parameters are larger than
// MaxParametersBytes, before anything is rendered or applied: the
// instance or binding could not record what it applied.
func checkParameters(what string, params *runtime.RawExtension) outcome {
	if params == nil || len(params.Raw) <= MaxParametersBytes {
		return outcome{}
	}
	return failed(ReasonParametersTooLarge, "the %s's parameters are %d bytes of JSON, more than the limit of %d bytes", what, len(params.Raw), MaxParametersBytes)
}

// truncate cuts s to at most maxStatusText bytes, at a rune boundary.
func truncate(s string) string {
	if len(s) <= maxStatusText {
		return s
	}
	const mark = "… (truncated)"
	cut := maxStatusText - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// requestFailed classifies an error of a request to the target cluster.
func (e *Engine) requestFailed(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, err error) outcome {
	if apply.IsPermanent(err) {
		return failed(ReasonResourceRejected, "%v", err)
	}
	if apierrors.IsUnauthorized(err) {
		// The kubeconfig may have been rotated: read it again next time.
		logf.FromContext(ctx).V(1).Info("Target cluster refused the credentials; reloading its kubeconfig", "cluster", t.Name())
		e.registry.Forget(cfg.CatalogNamespace(), t.Name())
	}
	return targetFailed(err)
}

// targetFailed classifies a failed request to the target cluster: one that
// did not reach it is marked unreachable.
func targetFailed(err error) outcome {
	return outcome{err: err, unreachable: clusters.Unreachable(err)}
}

// withSources renders the plan's sources template with vals, reads the
// objects it names from the target cluster under the source policy, and
// returns vals with them (render.WithSources). Namespaced sources are read
// where pl places them (placement.place). Sources that do not exist, or
// whose kind the cluster does not serve, stay unset; so do sources in a
// namespace that does not exist, until the operation's objects are applied
// (pl.settled): then such a namespace, not granted and not created by the
// instance, fails the operation instead of keeping it waiting. A plan
// without a sources template renders with vals alone. When owner is set
// (an operation evaluates its status) and the Engine has a source watcher,
// the sources are watched for owner before they are read.
func (e *Engine) withSources(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, plan *osbv1alpha1.SFPlan, vals map[string]any, t *clusters.Target, pl placement, owner *sourcewatch.Owner) (map[string]any, outcome) {
	namespace := pl.namespace
	sourcesTemplate, ok := plan.Template(osbv1alpha1.ActionSources)
	if !ok {
		e.watch(t, owner, nil)
		return vals, outcome{}
	}
	rendered, err := e.renderer(cfg).RenderMap(ctx, render.Input{Template: sourcesTemplate, Values: vals, Namespace: namespace})
	if err != nil {
		if render.IsTransient(err) {
			return nil, transient(err)
		}
		return nil, failed(ReasonTemplateFailed, "%v", err)
	}
	refs, err := render.ParseSources(rendered)
	if err != nil {
		return nil, failed(ReasonTemplateFailed, "sources template: %v", err)
	}
	byName, all := resolveSources(t, pl, refs)
	e.watch(t, owner, all)
	sources, o := e.readSources(ctx, cfg, renderPolicy(cfg, vals, namespace), t, pl, byName)
	if !o.ok() {
		return nil, o
	}
	return render.WithSources(vals, sources), outcome{}
}

// resolvedSource is a source whose kind the target cluster serves, with
// the namespace it is read from.
type resolvedSource struct {
	ref        osbv1alpha1.Source
	namespaced bool
}

// resolveSources places each of refs: a cluster-scoped source loses its
// namespace, a namespaced one without a namespace gets pl's, one with a
// namespace goes where pl places it. It returns the sources of the kinds
// t serves by name and every source, to watch.
func resolveSources(t *clusters.Target, pl placement, refs map[string]osbv1alpha1.Source) (map[string]resolvedSource, []osbv1alpha1.Source) {
	byName := make(map[string]resolvedSource, len(refs))
	all := make([]osbv1alpha1.Source, 0, len(refs))
	for name, ref := range refs {
		namespaced, err := t.Applier.Namespaced(ref)
		if err == nil {
			if !namespaced {
				ref.Namespace = ""
			} else if ref.Namespace == "" {
				ref.Namespace = pl.namespace
			} else {
				ref = pl.place(ref)
			}
			byName[name] = resolvedSource{ref: ref, namespaced: namespaced}
		}
		// A kind the cluster does not serve is passed on too: it makes
		// the operation polled.
		all = append(all, ref)
	}
	return byName, all
}

// readSources reads the sources of byName from t under policy; a missing
// object (or namespace, until pl is settled) stays unset.
func (e *Engine) readSources(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, policy apply.Policy, t *clusters.Target, pl placement, byName map[string]resolvedSource) (map[string]*unstructured.Unstructured, outcome) {
	sources := make(map[string]*unstructured.Unstructured, len(byName))
	for name, r := range byName {
		// A kind the cluster does not serve is not in byName: the
		// source stays unset, as a missing object does.
		obj, err := t.Applier.GetSource(ctx, r.ref, r.namespaced, policy)
		if errors.Is(err, apply.ErrNamespaceNotFound) {
			if !pl.settled || pl.appliedInto(r.ref.Namespace) {
				continue
			}
			err = pl.missingNamespace(r.ref)
		}
		if err != nil {
			return nil, e.sourceFailed(ctx, cfg, t, pl, name, r, err)
		}
		if obj != nil {
			sources[name] = obj
		}
	}
	return sources, outcome{}
}

// sourceFailed is the outcome of reading the source name (r) with err: a
// permanent refusal says which source and, for one outside the default
// namespace, where sources may be; anything else is the request's failure.
func (e *Engine) sourceFailed(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, t *clusters.Target, pl placement, name string, r resolvedSource, err error) outcome {
	o := policyOutcome(err)
	if o.permanent == nil {
		return e.requestFailed(ctx, cfg, t, err)
	}
	if r.namespaced && r.ref.Namespace != pl.namespace && !strings.Contains(o.permanent.message, pl.hint()) {
		o.permanent.message += "; " + pl.hint()
	}
	o.permanent.message = fmt.Sprintf("sources template: source %s: %s", name, o.permanent.message)
	return o
}

// watch registers, when owner is set and the Engine has a source watcher,
// that owner waits on refs on t, and records whether they are all watched.
func (e *Engine) watch(t *clusters.Target, owner *sourcewatch.Owner, refs []osbv1alpha1.Source) {
	if owner == nil || e.sources == nil {
		return
	}
	e.tracker.setWatched(owner.UID, e.sources.Watch(t.Cluster, *owner, refs))
}

// progressWait returns how long to wait before the next look at the
// operation of uid, in progress: the watched wait when a watch wakes it on
// every change of its sources, else the polling backoff.
func (e *Engine) progressWait(uid types.UID) time.Duration {
	if e.tracker.watched(uid) {
		return e.watchedWait
	}
	return e.tracker.poll(uid, e.minWait, e.maxWait)
}

// evaluate renders the sources and status templates for op and returns the
// status section. A plan without a status template reports succeeded. pl
// says where the sources are read; op's objects are applied by now.
func (e *Engine) evaluate(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, plan *osbv1alpha1.SFPlan, vals map[string]any, t *clusters.Target, pl placement, op render.Operation, owner sourcewatch.Owner) (render.Status, outcome) {
	statusTemplate, ok := plan.Template(osbv1alpha1.ActionStatus)
	if !ok {
		return render.Status{State: osbv1alpha1.StateSucceeded}, outcome{}
	}
	// The operation's objects are applied: it evaluates its status.
	pl.settled = true
	namespace := pl.namespace
	in, o := e.withSources(ctx, cfg, plan, vals, t, pl, &owner)
	if !o.ok() {
		return render.Status{}, o
	}
	r := e.renderer(cfg)
	rendered, err := r.RenderMap(ctx, render.Input{Template: statusTemplate, Values: in, Namespace: namespace})
	if err != nil {
		if render.IsTransient(err) {
			return render.Status{}, transient(err)
		}
		return render.Status{}, failed(ReasonTemplateFailed, "%v", err)
	}
	st, err := render.ParseStatus(rendered, op)
	if err != nil {
		return render.Status{}, failed(ReasonTemplateFailed, "status template: %v", err)
	}
	if len(st.Response) > MaxResponseBytes {
		return render.Status{}, failed(ReasonResourceTooLarge, "status template: the %s response is %d bytes, more than the limit of %d bytes", op, len(st.Response), MaxResponseBytes)
	}
	st.Description, st.Error, st.DashboardURL = truncate(st.Description), truncate(st.Error), truncate(st.DashboardURL)
	return st, outcome{}
}

// settle turns a failed step into the reconcile's error: a permanent
// failure (or too many transient ones) calls fail and becomes invalid user
// input, which the runtime does not retry; a transient error is returned
// for a retry with backoff.
func (e *Engine) settle(obj spruntime.API, cfg *interoperatorv1alpha1.ProviderConfig, o outcome, fail func(reason Reason, message string)) error {
	uid := obj.GetUID()
	if o.permanent == nil && o.unreachable {
		// The target cluster is down or cut off: retrying is all there is
		// to do, and giving up would lose the operation. The instance or
		// binding says so, and retries with backoff until the cluster is
		// back (the SFCluster watch wakes it when the cluster turns
		// Ready again).
		spruntime.StatusProgressing(obj, string(ReasonClusterUnreachable), fmt.Sprintf("The target cluster cannot be reached; retrying: %v", o.err))
		return o.err
	}
	if o.permanent == nil {
		n := e.tracker.transientError(uid)
		if n < cfg.MaxTransientErrors() {
			return o.err
		}
		o.permanent = &failure{reason: ReasonRetriesExhausted, message: fmt.Sprintf("giving up after %d attempts: %v", n, o.err)}
	}
	e.tracker.done(uid)
	fail(o.permanent.reason, o.permanent.message)
	return spruntime.InvalidUserInput(string(o.permanent.reason), "%s", o.permanent.message)
}

// labelValue returns name, or a hash of it when name is not a valid label
// value.
func labelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum224([]byte(name))
	return hex.EncodeToString(sum[:])
}

// union returns a followed by the references of b that a lacks.
func union(a, b []osbv1alpha1.Source) []osbv1alpha1.Source {
	out := append([]osbv1alpha1.Source(nil), a...)
	for _, r := range b {
		if !contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// minus returns the references of a that b lacks.
func minus(a, b []osbv1alpha1.Source) []osbv1alpha1.Source {
	var out []osbv1alpha1.Source
	for _, r := range a {
		if !contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

func contains(list []osbv1alpha1.Source, r osbv1alpha1.Source) bool {
	for _, x := range list {
		if x == r {
			return true
		}
	}
	return false
}

// opStarting reports whether state starts an operation: the broker's
// in_queue or update, or nothing at all (an object created without the
// broker).
func opStarting(s osbv1alpha1.State) bool {
	return s == "" || s == osbv1alpha1.StateInQueue || s == osbv1alpha1.StateUpdate
}
