package access

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// ownership says in whose namespaces of a target cluster a request may get
// Roles, and whose namespaces the controller creates for it.
type ownership struct {
	// owner is the ProviderID of the requesting provider; empty for a
	// request the access policy does not police (the MCP controller's, the
	// inter-operator's), which may use any namespace and whose namespaces
	// belong to no provider.
	owner string
	// shared: the target is a shared workload cluster, where a namespace
	// that exists must be the provider's own. On a tenant's MCP a namespace
	// no provider owns is the tenant's, and the tenant's providers may get
	// Roles there; one another provider owns is refused everywhere.
	shared bool
	// isolated: the target is an MCP or a shared workload cluster, which
	// gets the admission policies (admission.go); an onboarding cluster
	// does not.
	isolated bool
	// binder: the target is an MCP and the provider's ceiling there holds
	// bind on every ClusterRole, which only the platform operator's
	// spec.accessPolicy.mcp can add. Its request's ServiceAccount is then
	// named with BinderMarker, and the admission policies let it bind
	// roles to ServiceAccounts outside the access namespace: the agents of
	// its domain service, such as Velero's server bound to cluster-admin.
	binder bool
}

// namespacePlan is what the controller does with the namespaces of a
// request: create the missing ones, and label the adoptable ones as the
// owner's.
type namespacePlan struct {
	own     ownership
	missing []string
	adopt   []*corev1.Namespace
}

// plan checks every namespace the request's Roles and roleRefs are in,
// before anything is written for the request: one that another provider
// owns (its label NamespaceOwnerLabel) is a policy.Violation; on a shared
// cluster so is one that belongs to no provider, unless the controller
// created it for this very request before namespaces had owners
// (adoptable). A namespace of require (disableAutomaticNamespaceCreation,
// roleRefs) that is missing is a namespaceMissingError.
func (o ownership) plan(ctx context.Context, c client.Client, uid string, create, require []string) (*namespacePlan, error) {
	p := &namespacePlan{own: o}
	for _, name := range uniqueSorted(append(slices.Clone(create), require...)) {
		ns := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
		switch {
		case apierrors.IsNotFound(err):
			if !slices.Contains(create, name) {
				return nil, &namespaceMissingError{namespace: name}
			}
			p.missing = append(p.missing, name)
			continue
		case err != nil:
			return nil, fmt.Errorf("get namespace %s: %w", name, err)
		}
		adoptable, err := o.check(ctx, c, uid, ns)
		if err != nil {
			return nil, err
		}
		if adoptable {
			p.adopt = append(p.adopt, ns)
		}
	}
	return p, nil
}

// apply labels the adoptable namespaces and creates the missing ones.
func (p *namespacePlan) apply(ctx context.Context, c client.Client) error {
	for _, ns := range p.adopt {
		before := ns.DeepCopy()
		ns.Labels[NamespaceOwnerLabel] = p.own.owner
		if err := c.Patch(ctx, ns, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("label namespace %s with its provider: %w", ns.Name, err)
		}
	}
	for _, name := range p.missing {
		if err := p.own.createNamespace(ctx, c, name); err != nil {
			return err
		}
	}
	return nil
}

// createNamespace creates the namespace name for the owner. If someone
// created it in the meantime, it must be the owner's.
func (o ownership) createNamespace(ctx context.Context, c client.Client, name string) error {
	labels := map[string]string{providerv1alpha1.ManagedByLabel: ManagedByValue}
	if o.owner != "" {
		labels[NamespaceOwnerLabel] = o.owner
	}
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
		return nil
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if o.owner != "" && ns.Labels[NamespaceOwnerLabel] != o.owner {
		// Created by someone else a moment ago: never adopted.
		return o.foreign(name, ns.Labels[NamespaceOwnerLabel])
	}
	return nil
}

// check reports a policy.Violation when the request may not have Roles in
// the existing namespace ns, and whether ns is to be labelled as the
// owner's (adoptable).
func (o ownership) check(ctx context.Context, c client.Client, uid string, ns *corev1.Namespace) (adopt bool, err error) {
	label := ns.Labels[NamespaceOwnerLabel]
	switch {
	case o.owner == "" || label == o.owner:
		return false, nil
	case label != "":
		return false, o.foreign(ns.Name, label)
	case !o.shared:
		return false, nil
	}
	ok, err := adoptable(ctx, c, uid, ns)
	if err != nil || ok {
		return ok, err
	}
	return false, &policy.Violation{Rule: policy.RuleNamespaceOwner, Detail: fmt.Sprintf(
		"namespace %s exists on this shared cluster and belongs to no provider: a provider gets Roles only in namespaces it created or that are created for it; "+
			"a platform operator gives it this one with the label %s=%s", ns.Name, NamespaceOwnerLabel, o.owner)}
}

func (o ownership) foreign(name, label string) error {
	if label == "" {
		return &policy.Violation{Rule: policy.RuleNamespaceOwner, Detail: fmt.Sprintf(
			"namespace %s was created a moment ago by someone else", name)}
	}
	// The other provider is not named: providers need not learn of each
	// other.
	return &policy.Violation{Rule: policy.RuleNamespaceOwner, Detail: fmt.Sprintf(
		"namespace %s belongs to another provider (label %s)", name, NamespaceOwnerLabel)}
}

// adoptable reports whether ns, which has no owner, was created by this
// controller for the request uid before namespaces had owners: it carries
// the controller's label and holds RoleBindings of this request and of no
// other. Such a namespace becomes the request's provider's when the
// operator is upgraded.
func adoptable(ctx context.Context, c client.Client, uid string, ns *corev1.Namespace) (bool, error) {
	if ns.Labels[providerv1alpha1.ManagedByLabel] != ManagedByValue {
		return false, nil
	}
	list := &rbacv1.RoleBindingList{}
	if err := c.List(ctx, list, client.InNamespace(ns.Name), client.MatchingLabels{providerv1alpha1.ManagedByLabel: ManagedByValue}); err != nil {
		return false, fmt.Errorf("list RoleBindings in namespace %s: %w", ns.Name, err)
	}
	for _, b := range list.Items {
		if b.Labels[RequestUIDLabel] != uid {
			return false, nil
		}
	}
	return len(list.Items) > 0, nil
}

// ownershipOf returns the ownership of a request of req checked against
// ceilings: the provider's ID, whether the target is a shared workload
// cluster, and whether it gets the admission policies.
func ownershipOf(req *policy.Requester, ceilings []policy.Ceiling) ownership {
	id := ProviderID(req.Kind, req.Name)
	if req.Name == "" {
		// A provider namespace without an owner: it is the provider.
		id = req.Namespace
	}
	return ownership{
		owner:    id,
		shared:   slices.ContainsFunc(ceilings, func(c policy.Ceiling) bool { return c.Scope() == policy.ScopeWorkload }),
		isolated: slices.ContainsFunc(ceilings, func(c policy.Ceiling) bool { return c.Scope() != policy.ScopeOnboarding }),
		binder:   mayBindAgents(ceilings),
	}
}

// bindAnyClusterRole is the right that makes a provider a binder on an MCP
// (ownership.binder): binding every ClusterRole, cluster-admin included.
var bindAnyClusterRole = []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}}}

// mayBindAgents reports whether ceilings are those of an MCP that hold
// bind on every ClusterRole. Such a provider can already bind any role to
// its own requests' ServiceAccounts; the platform operator who granted it
// that trusts it with the whole MCP of the tenant, so its domain service
// may have identities of its own there. Never on a shared cluster: other
// tenants live there.
func mayBindAgents(ceilings []policy.Ceiling) bool {
	return len(ceilings) == 1 && ceilings[0].Scope() == policy.ScopeMCP &&
		ceilings[0].Check("binder", "", bindAnyClusterRole, policy.RuleCeiling) == nil
}
