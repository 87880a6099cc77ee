package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// DefaultFieldOwner is the server-side apply field manager of everything
// the inter-operator applies for instances.
const DefaultFieldOwner = "marketplane-interoperator"

// Applier applies objects to one cluster. It is safe for concurrent use and
// meant to live as long as the client it wraps: it remembers which
// namespaces exist, so that defaulting a namespace costs one read per
// namespace, not one per object.
type Applier struct {
	client client.Client
	mapper apimeta.RESTMapper

	// namespaces holds the names of namespaces known to exist.
	namespaces sync.Map
}

// New returns an Applier for the cluster c talks to. c's RESTMapper tells
// namespaced kinds from cluster-scoped ones.
func New(c client.Client) *Applier {
	return &Applier{client: c, mapper: c.RESTMapper()}
}

// Client returns the client the Applier uses.
func (a *Applier) Client() client.Client { return a.client }

// Prepare readies rendered objects for Apply, in place: it checks that each
// has a kind and a valid name, sets its namespace (defaultNamespace for a
// namespaced object that names none; none for a cluster-scoped object),
// adds labels, and moves CustomResourceDefinitions and Namespaces to the
// front, keeping the order of the rest. It returns the objects' references
// and whether any object was given defaultNamespace.
//
// An object of a kind the cluster does not serve is an *UnknownKindError,
// unless a CRD among objs, or among crds (installed before objs, such as a
// Helm chart's crds/), defines it: Apply waits for such a CRD to be
// served before it applies the objects after it.
func (a *Applier) Prepare(objs []*unstructured.Unstructured, defaultNamespace string, labels map[string]string, crds ...*unstructured.Unstructured) ([]osbv1alpha1.Source, bool, error) {
	defaulted := false
	pending := crdScopes(append(slices.Clip(crds), objs...))
	for i, o := range objs {
		what := fmt.Sprintf("%s %s", o.GetAPIVersion(), o.GetKind())
		if o.GetName() != "" {
			what += " " + o.GetName()
		}
		gvk := o.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, false, &InvalidObjectError{Index: i + 1, What: what, Problem: "it has no apiVersion or kind"}
		}
		if o.GetName() == "" {
			return nil, false, &InvalidObjectError{Index: i + 1, What: what, Problem: "it has no metadata.name (check the indentation of the template's metadata)"}
		}
		namespaced, err := a.namespaced(gvk)
		if err != nil {
			scoped, defined := pending[gvk]
			if !isNoMatch(err) || !defined {
				return nil, false, unknownKind(ref(o), err)
			}
			namespaced = scoped
		}
		switch {
		case !namespaced:
			o.SetNamespace("")
		case o.GetNamespace() == "":
			if defaultNamespace == "" {
				return nil, false, &InvalidObjectError{Index: i + 1, What: what, Problem: "it is namespaced but names no namespace"}
			}
			o.SetNamespace(defaultNamespace)
			defaulted = true
		}
		// The API server validates names itself, with the messages users
		// know; only a name that cannot even be a path segment of the
		// request is refused here.
		if problems := content.IsPathSegmentName(o.GetName()); len(problems) > 0 {
			return nil, false, &InvalidObjectError{Index: i + 1, What: what, Problem: "invalid name: " + problems[0]}
		}
		if len(labels) > 0 {
			l := o.GetLabels()
			if l == nil {
				l = make(map[string]string, len(labels))
			}
			for k, v := range labels {
				l[k] = v
			}
			o.SetLabels(l)
		}
	}
	slices.SortStableFunc(objs, func(x, y *unstructured.Unstructured) int { return applyRank(x) - applyRank(y) })
	refs := make([]osbv1alpha1.Source, len(objs))
	for i, o := range objs {
		refs[i] = ref(o)
	}
	return refs, defaulted, nil
}

// applyRank puts CRDs first and Namespaces second: the objects after them
// may need them.
func applyRank(o *unstructured.Unstructured) int {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 0
	case schema.GroupKind{Kind: "Namespace"}:
		return 1
	}
	return 2
}

// Apply applies objs, prepared by Prepare, in order, with server-side apply
// as fieldOwner, forcing ownership of conflicting fields. After a
// CustomResourceDefinition it waits, up to CRDWait, until the cluster
// serves the kind it defines. It returns the references of the objects it
// applied before an error stopped it.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured, fieldOwner string) ([]osbv1alpha1.Source, error) {
	return a.write(ctx, objs, Creation{FieldOwner: fieldOwner}, false)
}

// Creation is what CreateOrApply writes objects for.
type Creation struct {
	// FieldOwner is the field manager of the creates and applies
	// (DefaultFieldOwner when empty).
	FieldOwner string
	// Owner is the instance (and binding) the objects are for: the
	// objects it recorded are applied, the rest created.
	Owner Owner
	// Unconfirmed are the objects that may be another owner's, as
	// CheckForCreate returned them: a create that finds one there reads
	// whose it is.
	Unconfirmed []osbv1alpha1.Source
	// Namespace, when set, is the instance's default namespace, which
	// EnsureNamespace creates when a write finds it missing: it is not
	// read before, so that a namespace that exists costs nothing.
	Namespace string
}

// CreateOrApply writes objs, prepared by Prepare and checked by
// CheckForCreate, for c.Owner: it creates each object the owner has not
// recorded, and applies the rest as Apply does. A create is one request
// where a server-side apply of a new object would need a read first (is
// the name another owner's?) and costs the API server about twice as much.
//
// When the create finds the object there, the object is read if it is in
// c.Unconfirmed (CheckForCreate's objects that may be another owner's); one
// that is another owner's is refused with a *RefusedError
// (RuleNoAdoption) and left alone, any other is applied. The objects
// created before such a refusal are returned among the applied ones, so
// that the owner records and later deletes them.
func (a *Applier) CreateOrApply(ctx context.Context, objs []*unstructured.Unstructured, c Creation) ([]osbv1alpha1.Source, error) {
	return a.write(ctx, objs, c, true)
}

func (a *Applier) write(ctx context.Context, objs []*unstructured.Unstructured, c Creation, createNew bool) ([]osbv1alpha1.Source, error) {
	if c.FieldOwner == "" {
		c.FieldOwner = DefaultFieldOwner
	}
	applied := make([]osbv1alpha1.Source, 0, len(objs))
	for _, o := range objs {
		r := ref(o)
		send := func() error {
			if createNew && !c.Owner.recorded(r) {
				return a.create(ctx, o, r, c)
			}
			return a.apply(ctx, o, r, c.FieldOwner)
		}
		err := send()
		if r.Namespace != "" && namespaceMissing(err) {
			// The namespace went away since it was looked up, or the
			// default namespace is not there yet.
			a.namespaces.Delete(r.Namespace)
			if r.Namespace == c.Namespace {
				if err = a.EnsureNamespace(ctx, r.Namespace); err == nil {
					err = send()
				}
			}
		}
		if err != nil {
			return applied, err
		}
		applied = append(applied, r)
		if IsCRD(o) {
			if err := a.waitServed(ctx, o); err != nil {
				return applied, err
			}
		}
	}
	return applied, nil
}

// create creates o, or applies it when it exists and is not another
// owner's.
func (a *Applier) create(ctx context.Context, o *unstructured.Unstructured, r osbv1alpha1.Source, c Creation) error {
	obj := writable(o)
	err := a.client.Create(ctx, obj, client.FieldOwner(c.FieldOwner))
	if !apierrors.IsAlreadyExists(err) {
		return wrap(r, "create", err)
	}
	if slices.Contains(c.Unconfirmed, r) {
		if err := a.notAnotherOwners(ctx, r, c.Owner); err != nil {
			return err
		}
	}
	return a.apply(ctx, o, r, c.FieldOwner)
}

// namespaceMissing reports whether err is a write's NotFound for the
// object's namespace (not for its kind).
func namespaceMissing(err error) bool {
	return apierrors.IsNotFound(err) && !resourceNotFound(err)
}

// apply applies o with server-side apply. An object created by
// CreateOrApply has its fields owned by an Update of fieldOwner, which an
// apply does not prune: the first apply that finds such an entry moves
// those fields to the apply's entry (as kubectl does when it moves to
// server-side apply) and applies again, so that fields the render no
// longer has are removed. That costs two writes once per object, on its
// first change.
func (a *Applier) apply(ctx context.Context, o *unstructured.Unstructured, r osbv1alpha1.Source, fieldOwner string) error {
	obj := writable(o)
	if err := a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return wrap(r, "apply", err)
	}
	// Most applies find no such entry: the check costs no decoding of
	// the managed fields.
	if !slices.ContainsFunc(obj.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == fieldOwner && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == ""
	}) {
		return nil
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(fieldOwner), fieldOwner)
	if err != nil {
		return fmt.Errorf("%s: moving the fields created as %s to its server-side apply: %w", describe(r), fieldOwner, err)
	}
	if patch == nil {
		return nil
	}
	if err := a.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return wrap(r, "patch the managed fields of", err)
	}
	obj = writable(o)
	return wrap(r, "apply", a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership))
}

// writable returns a copy of o to send: without the resourceVersion and
// managedFields a rendered object may carry.
func writable(o *unstructured.Unstructured) *unstructured.Unstructured {
	obj := o.DeepCopy()
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	return obj
}

// LabelCreatedNamespace marks a namespace that EnsureNamespace created:
// DeleteCreatedNamespace deletes only such namespaces, never one that
// existed before.
const LabelCreatedNamespace = "interoperator.marketplane.io/created-namespace"

// EnsureNamespace creates the namespace name, labelled
// LabelCreatedNamespace, unless it exists. It reads before it writes, and
// remembers namespaces it found, so that it writes only for a namespace
// that is missing.
func (a *Applier) EnsureNamespace(ctx context.Context, name string) error {
	if _, ok := a.namespaces.Load(name); ok {
		return nil
	}
	ns := &corev1.Namespace{}
	err := a.client.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case err == nil:
		if ns.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is being deleted", name)
		}
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelCreatedNamespace: "true"}}}
		if err := a.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	default:
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	a.namespaces.Store(name, struct{}{})
	return nil
}

// DeleteCreatedNamespace deletes the namespace name if EnsureNamespace
// created it (it carries LabelCreatedNamespace); a namespace that existed
// before, or is gone, is left alone. So is one the cluster's identity may
// not read: EnsureNamespace reads a namespace before it creates one, so an
// identity without that right never created it (an SFCluster confined to
// some namespaces, such as the landscape's dedicated-clusters, whose
// instances render only into namespaces they name). Failing instead would
// keep every such instance from being deprovisioned.
func (a *Applier) DeleteCreatedNamespace(ctx context.Context, name string) error {
	a.namespaces.Delete(name)
	ns := &corev1.Namespace{}
	if err := a.client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.Labels[LabelCreatedNamespace] != "true" || ns.DeletionTimestamp != nil {
		return nil
	}
	if err := a.client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	return nil
}

// Get reads the object ref names. It returns nil, and no error, when the
// object does not exist or its kind is not served.
func (a *Applier) Get(ctx context.Context, ref osbv1alpha1.Source) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(ref.APIVersion)
	u.SetKind(ref.Kind)
	return read(ctx, a.client, ref, u)
}

// getMeta reads the metadata of the object ref names, or nil when there is
// none (or its kind is not served). The decisions that need no more than
// labels, UID and deletion timestamp read this: the API server encodes
// and the client decodes only the metadata.
func (a *Applier) getMeta(ctx context.Context, ref osbv1alpha1.Source) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	return read(ctx, a.client, ref, m)
}

// read reads the object ref names into obj, of ref's kind: nil, and no
// error, when it does not exist or its kind is not served.
func read[T client.Object](ctx context.Context, c client.Client, ref osbv1alpha1.Source, obj T) (T, error) {
	var none T
	err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	switch {
	case err == nil:
		return obj, nil
	case apierrors.IsNotFound(err), isNoMatch(err):
		return none, nil
	}
	return none, fmt.Errorf("get %s: %w", describe(ref), err)
}

// Delete deletes the objects refs name and returns those that still exist
// (being deleted, or whose deletion failed), so that the caller can wait.
// Objects already being deleted are not deleted again (a namespace being
// finalized refuses a second DELETE with a conflict); objects of a kind
// the cluster no longer serves count as gone.
//
// Objects are read as metadata only (getMeta), and deleted on the
// condition that they are still the version read. Most (a ConfigMap, a
// Secret) have no finalizers and are gone once that DELETE is answered
// (goneOnDelete), so that the caller finishes in this pass instead of
// polling for the deletion; any other object is read once more.
//
// When owner is set, an object whose UID labels say it belongs to another
// instance or binding is left alone and counts as gone: only a takeover
// could have put it into the owner's status.resources, and deleting it
// would delete another tenant's object.
func (a *Applier) Delete(ctx context.Context, refs []osbv1alpha1.Source, owner *Owner) ([]osbv1alpha1.Source, error) {
	var remaining []osbv1alpha1.Source
	var errs []error
	for _, r := range refs {
		obj, err := a.getMeta(ctx, r)
		if err != nil {
			remaining = append(remaining, r)
			errs = append(errs, err)
			continue
		}
		if obj == nil {
			continue
		}
		if owner != nil && owner.another(obj.GetLabels()) {
			continue
		}
		if obj.GetDeletionTimestamp() != nil {
			remaining = append(remaining, r)
			continue
		}
		if r.Kind == "Namespace" && r.APIVersion == "v1" {
			a.namespaces.Delete(r.Name)
		}
		uid, rv := obj.GetUID(), obj.GetResourceVersion()
		err = a.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// Changed since it was read: the caller looks again.
			remaining = append(remaining, r)
			continue
		case err != nil:
			remaining = append(remaining, r)
			errs = append(errs, wrap(r, "delete", err))
			continue
		case goneOnDelete(r, obj):
			continue
		}
		if obj, err = a.getMeta(ctx, r); err != nil || obj != nil {
			remaining = append(remaining, r)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return remaining, errors.Join(errs...)
}

// goneOnDelete reports whether obj, as read just before its DELETE
// succeeded on the condition of that version, is gone: it had no
// finalizers and its kind deletes at once. A Namespace is finalized by its
// controller (spec.finalizers) and a Pod deleted gracefully, whatever
// their metadata says; every other kind goes at once without finalizers.
func goneOnDelete(r osbv1alpha1.Source, obj *metav1.PartialObjectMetadata) bool {
	if len(obj.GetFinalizers()) > 0 {
		return false
	}
	return r.APIVersion != "v1" || (r.Kind != "Namespace" && r.Kind != "Pod")
}

// Namespaced reports whether the kind of ref is namespaced on the cluster.
// A kind the cluster does not serve is an *UnknownKindError.
func (a *Applier) Namespaced(ref osbv1alpha1.Source) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, fmt.Errorf("apiVersion %q: %w", ref.APIVersion, err)
	}
	ok, err := a.namespaced(gv.WithKind(ref.Kind))
	if err != nil {
		return false, unknownKind(ref, err)
	}
	return ok, nil
}

// namespaced reports whether gvk is a namespaced kind.
func (a *Applier) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == apimeta.RESTScopeNameNamespace, nil
}

// wrap classifies an error of a request about ref.
func wrap(r osbv1alpha1.Source, verb string, err error) error {
	switch {
	case err == nil:
		return nil
	case rejected(err):
		return &RejectedError{Ref: r, Err: err}
	case isNoMatch(err), resourceNotFound(err):
		return &UnknownKindError{Ref: r, Err: err}
	}
	return fmt.Errorf("%s %s: %w", verb, describe(r), err)
}

// unknownKind is the error of a RESTMapper's answer about r: an
// *UnknownKindError when it says the kind is not served.
func unknownKind(r osbv1alpha1.Source, err error) error {
	if isNoMatch(err) {
		return &UnknownKindError{Ref: r, Err: err}
	}
	return fmt.Errorf("look up the kind of %s %s: %w", r.APIVersion, describe(r), err)
}

// ref returns the reference of o.
func ref(o *unstructured.Unstructured) osbv1alpha1.Source {
	return osbv1alpha1.Source{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), Namespace: o.GetNamespace()}
}

// Ref returns the reference of o, as status.resources records it.
func Ref(o *unstructured.Unstructured) osbv1alpha1.Source { return ref(o) }
