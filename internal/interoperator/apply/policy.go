package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// DefaultMaxObjectBytes bounds the JSON encoding of one rendered object.
// etcd refuses requests above 1.5 MiB (its --max-request-bytes default,
// 1572864), and the API server stores more than the object a template
// renders (managedFields, labels, its own metadata): the limit leaves half a
// MiB for that. An object above it would fail with "etcdserver: request is
// too large" on every attempt.
const DefaultMaxObjectBytes = 1 << 20

// Rules of the render policy, as a RefusedError names them.
const (
	// RuleOwnNamespaces: namespaced objects and sources live in the
	// instance's own namespaces or in namespaces a grant names.
	RuleOwnNamespaces = "own-namespaces"
	// RuleOwnNamespaceObjects: a rendered Namespace is the instance's: new,
	// its default namespace, or labelled with its instance id.
	RuleOwnNamespaceObjects = "own-namespace-objects"
	// RuleNamespacedKinds: no cluster-scoped kinds besides Namespaces
	// unless a grant names the kind.
	RuleNamespacedKinds = "namespaced-kinds-only"
	// RuleBindableClusterRoles: role bindings refer to admin, edit, view or
	// a ClusterRole a grant names; never to cluster-admin by default.
	RuleBindableClusterRoles = "bindable-cluster-roles"
	// RuleNoRoleAggregation: a rendered ClusterRole neither aggregates
	// into nor replaces the built-in roles, unless a grant names every
	// ClusterRole ("*").
	RuleNoRoleAggregation = "no-role-aggregation"
	// RuleOwnSources: a source is never an object of another instance or
	// of another binding.
	RuleOwnSources = "own-sources"
	// RuleNoAdoption: an object that exists and belongs to another
	// instance, or to another binding, is never applied over.
	RuleNoAdoption = "no-adoption"
)

// Policy is what the rendered objects of one operation, and the sources it
// reads, may be: by default only namespaced objects in the instance's own
// namespaces, the instance's own Namespaces, and role bindings to the
// aggregated user roles. The platform operator widens it per plan with
// grants (the ProviderConfig's renderPolicies); plan authors and tenants
// cannot.
type Policy struct {
	// Owner is the instance (and binding) of the operation.
	Owner Owner
	// DefaultNamespace is the namespace objects without one are given. It
	// is always the instance's.
	DefaultNamespace string
	// Namespaces are further namespaces granted; "*" is every namespace.
	Namespaces []string
	// ClusterScopedKinds are cluster-scoped kinds granted; "*" as group or
	// kind matches every one.
	ClusterScopedKinds []schema.GroupKind
	// ClusterRoles are the ClusterRoles granted to role bindings besides
	// admin, edit and view; "*" is every one.
	ClusterRoles []string
	// MaxObjectBytes bounds the JSON encoding of one object
	// (DefaultMaxObjectBytes when zero or less).
	MaxObjectBytes int64
}

// bindableClusterRoles are the ClusterRoles role bindings may refer to
// without a grant: Kubernetes' user-facing roles, which a RoleBinding
// confines to its namespace.
var bindableClusterRoles = []string{"admin", "edit", "view"}

const all = "*"

func (p Policy) maxObjectBytes() int64 {
	if p.MaxObjectBytes <= 0 {
		return DefaultMaxObjectBytes
	}
	return p.MaxObjectBytes
}

func (p Policy) grantsNamespace(ns string) bool {
	return slices.Contains(p.Namespaces, ns) || slices.Contains(p.Namespaces, all)
}

func (p Policy) grantsKind(gk schema.GroupKind) bool {
	for _, g := range p.ClusterScopedKinds {
		if (g.Group == gk.Group || g.Group == all) && (g.Kind == gk.Kind || g.Kind == all) {
			return true
		}
	}
	return false
}

func (p Policy) grantsClusterRole(name string) bool {
	return slices.Contains(bindableClusterRoles, name) || slices.Contains(p.ClusterRoles, name) || slices.Contains(p.ClusterRoles, all)
}

// RefusedError is a rendered object, or a source, that the render policy
// refuses. It is found before anything is applied, except RuleNoAdoption
// for an object CreateOrApply finds there when it creates it.
type RefusedError struct {
	// Ref is the object.
	Ref osbv1alpha1.Source
	// Rule is the rule it breaks (one of the Rule constants).
	Rule string
	// Problem says why.
	Problem string
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s %s is refused by the render policy (rule %s): %s", e.Ref.APIVersion, describe(e.Ref), e.Rule, e.Problem)
}

// TooLargeError is a rendered object larger than the policy's
// MaxObjectBytes.
type TooLargeError struct {
	// Ref is the object.
	Ref osbv1alpha1.Source
	// Size is the size of its JSON encoding.
	Size int
	// Limit is the limit.
	Limit int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s %s renders to %d bytes, more than the limit of %d bytes per object (etcd refuses requests above 1.5 MiB)", e.Ref.APIVersion, describe(e.Ref), e.Size, e.Limit)
}

// Check checks objects prepared by Prepare against p, before any of them is
// applied. It returns a *RefusedError or a *TooLargeError for the first
// object that breaks a rule, and another error when it could not read an
// object it needed to look at. The rules an object breaks by itself come
// first: which instance wins a race for a shared name never hides them.
//
// An object that exists and belongs to another instance (or binding) is
// refused (RuleNoAdoption): forced server-side apply would take it over,
// and deprovision would delete it. Objects are read for that only where
// another instance's object can be: in the instance's default namespace,
// in granted namespaces, of granted cluster-scoped kinds, and for a
// binding's operation everywhere. A namespace labelled for the instance,
// or created by this render, holds only the instance's objects.
func (a *Applier) Check(ctx context.Context, objs []*unstructured.Unstructured, p Policy) error {
	_, err := a.check(ctx, objs, p, false)
	return err
}

// CheckForCreate checks as Check does, except that it does not read the
// objects that may be another owner's and that p's owner has not
// recorded: it returns them, for CreateOrApply, whose create finds out
// for one request less (an object that does not exist yet is created,
// one that exists is read then).
func (a *Applier) CheckForCreate(ctx context.Context, objs []*unstructured.Unstructured, p Policy) ([]osbv1alpha1.Source, error) {
	return a.check(ctx, objs, p, true)
}

func (a *Applier) check(ctx context.Context, objs []*unstructured.Unstructured, p Policy, forCreate bool) ([]osbv1alpha1.Source, error) {
	spaces, err := a.renderedNamespaces(ctx, objs, p)
	if err != nil {
		return nil, err
	}
	var sharedRefs, unconfirmed []osbv1alpha1.Source
	for i, o := range objs {
		if err := checkSize(i, o, p); err != nil {
			return nil, err
		}
		gk := o.GroupVersionKind().GroupKind()
		shared, err := a.mayBeShared(ctx, o, gk, p, spaces)
		if err != nil {
			return nil, err
		}
		switch r := ref(o); {
		case !shared:
		case forCreate && !p.Owner.recorded(r):
			unconfirmed = append(unconfirmed, r)
		default:
			sharedRefs = append(sharedRefs, r)
		}
		if err := checkRBAC(o, gk, p); err != nil {
			return nil, err
		}
	}
	for _, r := range sharedRefs {
		if err := a.notAnotherOwners(ctx, r, p.Owner); err != nil {
			return nil, err
		}
	}
	return unconfirmed, nil
}

// renderedNamespaces checks the Namespaces among objs and returns whose
// each is. They come first: the objects of a Namespace the render creates
// are in an own namespace.
func (a *Applier) renderedNamespaces(ctx context.Context, objs []*unstructured.Unstructured, p Policy) (map[string]nsOwnership, error) {
	spaces := map[string]nsOwnership{}
	for _, o := range objs {
		if !isNamespace(o.GroupVersionKind().GroupKind()) {
			continue
		}
		own, refusal, err := a.ownNamespace(ctx, o.GetName(), p, true)
		if err != nil {
			return nil, err
		}
		if own == nsNotOwn {
			return nil, refusal.of(ref(o), RuleOwnNamespaceObjects, "")
		}
		spaces[o.GetName()] = own
	}
	return spaces, nil
}

// checkSize refuses o, the object at index i, when it cannot be encoded,
// is larger than p allows or holds a quantity out of bounds.
func checkSize(i int, o *unstructured.Unstructured, p Policy) error {
	b, err := json.Marshal(o.Object)
	if err != nil {
		return &InvalidObjectError{Index: i + 1, What: describe(ref(o)), Problem: "it cannot be encoded as JSON: " + err.Error()}
	}
	if limit := p.maxObjectBytes(); int64(len(b)) > limit {
		return &TooLargeError{Ref: ref(o), Size: len(b), Limit: limit}
	}
	return checkQuantities(o)
}

// mayBeShared reports whether o is where another owner's object can be,
// so that Check must read whose it is; it refuses a cluster-scoped kind
// or a namespace that p does not grant. spaces caches whose each
// namespace is.
func (a *Applier) mayBeShared(ctx context.Context, o *unstructured.Unstructured, gk schema.GroupKind, p Policy, spaces map[string]nsOwnership) (bool, error) {
	shared := p.Owner.BindingUID != ""
	switch ns := o.GetNamespace(); {
	case isNamespace(gk):
		// ownNamespace read it: only the default or a granted
		// namespace can still be another owner's.
		return spaces[o.GetName()] == nsShared, nil
	case ns == "":
		// Prepare leaves a namespace on namespaced objects only.
		if !p.grantsKind(gk) {
			return false, &RefusedError{Ref: ref(o), Rule: RuleNamespacedKinds, Problem: fmt.Sprintf("%s is a cluster-scoped kind; plans render namespaced objects in the instance's namespaces unless the ProviderConfig's renderPolicies grant the kind", kindName(gk))}
		}
		return true, nil
	default:
		own, seen := spaces[ns]
		if !seen {
			var refusal *nsRefusal
			var err error
			if own, refusal, err = a.ownNamespace(ctx, ns, p, false); err != nil {
				return false, err
			}
			if own == nsNotOwn {
				return false, refusal.of(ref(o), RuleOwnNamespaces, fmt.Sprintf("namespace %s neither exists nor is rendered by the template; objects go into the instance's namespaces (its default namespace %s, Namespaces it renders or owns) or namespaces the ProviderConfig's renderPolicies grant the plan", ns, p.DefaultNamespace))
			}
			spaces[ns] = own
		}
		return shared || own == nsShared, nil
	}
}

// notAnotherOwners refuses r when it exists and belongs to another
// instance or binding than o.
func (a *Applier) notAnotherOwners(ctx context.Context, r osbv1alpha1.Source, o Owner) error {
	existing, err := a.getMeta(ctx, r)
	if err != nil || existing == nil {
		return err
	}
	if foreign, why := o.foreign(existing.GetLabels(), r); foreign {
		return &RefusedError{Ref: r, Rule: RuleNoAdoption, Problem: why + "; an instance never takes over another instance's objects: name them after .instanceId (and .binding.metadata.name), which no two instances share"}
	}
	return nil
}

const rbacGroup = "rbac.authorization.k8s.io"

// checkRBAC refuses role bindings to ClusterRoles that are not granted
// (cluster-admin above all), and ClusterRoles that would widen the built-in
// roles for everyone who holds them.
func checkRBAC(o *unstructured.Unstructured, gk schema.GroupKind, p Policy) error {
	if gk.Group != rbacGroup {
		return nil
	}
	switch gk.Kind {
	case "RoleBinding", "ClusterRoleBinding":
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if kind == "ClusterRole" && !p.grantsClusterRole(name) {
			return &RefusedError{Ref: ref(o), Rule: RuleBindableClusterRoles, Problem: fmt.Sprintf("it refers to the ClusterRole %q; role bindings may refer to %s or a ClusterRole the ProviderConfig's renderPolicies grant", name, strings.Join(bindableClusterRoles, ", "))}
		}
	case "ClusterRole":
		if slices.Contains(p.ClusterRoles, all) {
			return nil
		}
		name := o.GetName()
		if slices.Contains(bindableClusterRoles, name) || name == "cluster-admin" || strings.HasPrefix(name, "system:") {
			return &RefusedError{Ref: ref(o), Rule: RuleNoRoleAggregation, Problem: "it would replace a built-in ClusterRole"}
		}
		for k, v := range o.GetLabels() {
			if strings.HasPrefix(k, rbacGroup+"/aggregate-to-") && v == "true" {
				return &RefusedError{Ref: ref(o), Rule: RuleNoRoleAggregation, Problem: fmt.Sprintf("its label %s would add its rules to a role others hold", k)}
			}
		}
	}
	return nil
}

// nsOwnership is what a namespace is to an operation.
type nsOwnership int

const (
	// nsNotOwn: not the instance's.
	nsNotOwn nsOwnership = iota
	// nsShared: the instance's default namespace or a granted one, where
	// other instances' objects may be too.
	nsShared
	// nsExclusive: labelled for the instance, or created by this render:
	// only its objects are there.
	nsExclusive
)

// nsRefusal says why a namespace is not the instance's: the rule and the
// problem. A nil *nsRefusal means the namespace does not exist.
type nsRefusal struct{ rule, problem string }

// of returns the refusal of r, an object in this namespace (or the
// namespace itself), under rule: with the problem n says, and the rule
// no-adoption when the namespace is another instance's; rule and problem
// as given when the namespace does not exist (n is nil).
func (n *nsRefusal) of(r osbv1alpha1.Source, rule, problem string) *RefusedError {
	if n != nil {
		problem = n.problem
		if n.rule == RuleNoAdoption {
			rule = n.rule
		}
	}
	return &RefusedError{Ref: r, Rule: rule, Problem: problem}
}

// ownNamespace tells what the namespace name is to p's operation: shared
// when it is the instance's default namespace or a granted one, exclusive
// when it is labelled for the instance (and, for a binding's operation,
// for no other binding). A namespace that does not exist is the instance's
// only when the render itself creates it (rendered); otherwise it is not,
// with a nil refusal. An existing namespace that is not the instance's
// comes with the refusal that says why.
func (a *Applier) ownNamespace(ctx context.Context, name string, p Policy, rendered bool) (nsOwnership, *nsRefusal, error) {
	if name == p.DefaultNamespace || p.grantsNamespace(name) {
		return nsShared, nil, nil
	}
	ns := &corev1.Namespace{}
	err := a.client.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		// A namespace the render itself creates is the instance's. For
		// objects in a namespace that neither exists nor is rendered, the
		// caller says what it makes of that (the nil refusal).
		if rendered {
			return nsExclusive, nil, nil
		}
		return nsNotOwn, nil, nil
	case err != nil:
		return nsNotOwn, nil, fmt.Errorf("get namespace %s: %w", name, err)
	}
	r := osbv1alpha1.Source{APIVersion: "v1", Kind: "Namespace", Name: name}
	if p.Owner.owns(ns.Labels, r) {
		return nsExclusive, nil, nil
	}
	if foreign, why := p.Owner.foreign(ns.Labels, r); foreign {
		return nsNotOwn, &nsRefusal{rule: RuleNoAdoption, problem: fmt.Sprintf("namespace %s exists and %s; an instance never takes over another instance's objects: name the plan's namespaces after .instanceId, which no two instances share", name, why)}, nil
	}
	return nsNotOwn, &nsRefusal{rule: RuleOwnNamespaceObjects, problem: fmt.Sprintf("namespace %s exists and is not the instance's (it lacks the label %s); the instance's namespaces are its default namespace %s, Namespaces it renders or owns, and namespaces the ProviderConfig's renderPolicies grant the plan", name, LabelInstanceUID, p.DefaultNamespace)}, nil
}

// ErrNamespaceNotFound is wrapped by GetSource's error for a source in a
// namespace that does not exist and that the policy does not grant.
var ErrNamespaceNotFound = errors.New("the namespace does not exist")

// GetSource reads a source, ref, for an operation under p: namespaced
// sources only from the instance's own namespaces (or granted ones),
// cluster-scoped ones only when they are the instance's (its Namespaces,
// objects with its label) or of a granted kind, and never an object that
// carries another instance's or binding's label. ref's namespace must be
// set for namespaced kinds. A refused source is a *RefusedError; a source
// that does not exist is nil, and no error. A namespaced source in a
// namespace that is neither the default one nor granted, and that does not
// exist, is nil with an error wrapping ErrNamespaceNotFound: there is
// nothing to read and nothing to refuse yet, and the caller decides
// whether the namespace may still come.
func (a *Applier) GetSource(ctx context.Context, ref osbv1alpha1.Source, namespaced bool, p Policy) (*unstructured.Unstructured, error) {
	if namespaced {
		// Decided before the object is read: an object outside the
		// instance's namespaces is not even fetched.
		own, refusal, err := a.ownNamespace(ctx, ref.Namespace, p, false)
		if err != nil {
			return nil, err
		}
		if own == nsNotOwn {
			if refusal == nil {
				return nil, fmt.Errorf("source %s: %w", describe(ref), ErrNamespaceNotFound)
			}
			return nil, &RefusedError{Ref: ref, Rule: RuleOwnSources, Problem: refusal.problem}
		}
	}
	obj, err := a.Get(ctx, ref)
	if err != nil || obj == nil {
		return nil, err
	}
	if bad, why := p.Owner.foreign(obj.GetLabels(), ref); bad {
		return nil, &RefusedError{Ref: ref, Rule: RuleOwnSources, Problem: why}
	}
	if namespaced || p.Owner.owns(obj.GetLabels(), ref) {
		return obj, nil
	}
	gk := obj.GroupVersionKind().GroupKind()
	if isNamespace(gk) && (obj.GetName() == p.DefaultNamespace || p.grantsNamespace(obj.GetName())) || p.grantsKind(gk) {
		return obj, nil
	}
	return nil, &RefusedError{Ref: ref, Rule: RuleOwnSources, Problem: fmt.Sprintf("a cluster-scoped source must be the instance's (labelled %s with its UID) or of a kind the ProviderConfig's renderPolicies grant the plan", LabelInstanceUID)}
}

func isNamespace(gk schema.GroupKind) bool { return gk == schema.GroupKind{Kind: "Namespace"} }

func kindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}
