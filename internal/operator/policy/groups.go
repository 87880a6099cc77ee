package policy

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// The provider kinds, as passed to the methods of Ownership.
const (
	KindServiceProvider = "ServiceProvider"
	KindClusterProvider = "ClusterProvider"
	KindPlatformService = "PlatformService"
)

// Reasons of a Rejection, PascalCase so that they can be condition reasons.
const (
	// ReasonGroupReserved: the group is a core, built-in or platform group
	// and not listed in the provider's spec.accessPolicy.apiGroups.
	ReasonGroupReserved = "GroupReserved"
	// ReasonGroupNotOwned: another provider owns the group.
	ReasonGroupNotOwned = "GroupNotOwned"
	// ReasonGroupConflict: more than one provider lists the group in
	// spec.accessPolicy.apiGroups, so none owns it.
	ReasonGroupConflict = "GroupConflict"
	// ReasonGroupInvalid: the group is not an API group name (for example
	// "*"), or the entry has no kind or version.
	ReasonGroupInvalid = "GroupInvalid"
)

// reservedDomains are the domains whose groups (the domain itself and
// every subdomain) no provider owns unless the platform operator lists
// them in its spec.accessPolicy.apiGroups: Kubernetes' built-in groups, the
// platform's own APIs (openMCP, Service Fabrik, Marketplane).
var reservedDomains = []string{
	"k8s.io",
	"kubernetes.io",
	"openmcp.cloud",
	"open-control-plane.io",
	"servicefabrik.io",
	"marketplane.io",
}

// serviceDomains are the subdomains of reserved domains that are meant for
// the APIs of service providers (the scaffold's default is
// <name>.services.openmcp.cloud). Their subdomains are not reserved; the
// domains themselves are.
var serviceDomains = []string{
	"services.openmcp.cloud",
	"services.open-control-plane.io",
}

// Reserved reports whether group may only be owned when the platform
// operator lists it in spec.accessPolicy.apiGroups: the core group "" and
// every group without a dot (the built-in groups such as apps or rbac; also
// the wildcard "*"), the k8s.io and kubernetes.io groups, and the groups of
// the platform itself (openmcp.cloud, open-control-plane.io,
// servicefabrik.io, marketplane.io and their subdomains) except the
// subdomains of services.openmcp.cloud and services.open-control-plane.io.
func Reserved(group string) bool {
	g := strings.ToLower(group)
	if !strings.Contains(g, ".") {
		return true
	}
	for _, d := range serviceDomains {
		if strings.HasSuffix(g, "."+d) {
			return false
		}
	}
	for _, d := range reservedDomains {
		if g == d || strings.HasSuffix(g, "."+d) {
			return true
		}
	}
	return false
}

// ReservedCEL returns a CEL expression, over the string expression g, that
// is true exactly when Reserved is. The admission policy that the API server
// evaluates for providers' CRD writes is built from it, so both read the
// same lists. It needs the Kubernetes CEL library (lowerAscii).
func ReservedCEL(g string) string {
	return fmt.Sprintf(`(!%[1]s.contains('.') || (%[1]s.lowerAscii().matches('(^|\\.)(%[2]s)$') && !%[1]s.lowerAscii().matches('\\.(%[3]s)$')))`,
		g, celAlternatives(reservedDomains), celAlternatives(serviceDomains))
}

// celAlternatives is a regular expression matching any of domains, quoted
// for a single-quoted CEL string.
func celAlternatives(domains []string) string {
	quoted := make([]string, len(domains))
	for i, d := range domains {
		quoted[i] = strings.ReplaceAll(regexp.QuoteMeta(d), `\`, `\\`)
	}
	return strings.Join(quoted, "|")
}

// validGroup reports whether group can name an API group a provider owns:
// a DNS subdomain, or the core group "". It rules out "*", which in an RBAC
// rule would mean every group.
func validGroup(group string) bool {
	return group == "" || len(validation.IsDNS1123Subdomain(group)) == 0
}

// validEntry reports whether a status.resources entry names a kind at all.
func validEntry(gvk metav1.GroupVersionKind) bool {
	return validGroup(gvk.Group) && gvk.Kind != "" && gvk.Version != ""
}

// AnnotationOwnedGroups is the annotation in which the operator records,
// on a ServiceProvider, the API groups it owns by registration (comma
// separated). It makes the first registration win: a group stays with the
// provider that owns it for as long as that provider registers it, whoever
// registers it later, older or not. The provider cannot write it: its
// ServiceAccounts may write the object's status only, and a status write
// leaves metadata as it is.
const AnnotationOwnedGroups = providerv1alpha1.GroupName + "/owned-api-groups"

// Provider is what ownership is computed from for one provider object.
type Provider struct {
	// Kind is KindServiceProvider, KindClusterProvider or KindPlatformService.
	Kind string
	// Name is the object's name.
	Name string
	// Created is the object's creationTimestamp: the older provider wins a
	// group both registered.
	Created metav1.Time
	// SpecGroups is spec.accessPolicy.apiGroups, set by the platform operator.
	SpecGroups []string
	// Resources is status.resources, set by the provider itself
	// (ServiceProviders only).
	Resources []metav1.GroupVersionKind
	// Recorded are the groups the operator recorded as owned by this
	// provider's registration (AnnotationOwnedGroups).
	Recorded []string
}

// Rejection is an entry of a provider's status.resources that the operator
// does not honour, or a group of its spec.accessPolicy.apiGroups that it
// does not own because of a conflict.
type Rejection struct {
	// Resource is the rejected status.resources entry; nil for a conflict
	// in spec.accessPolicy.apiGroups.
	Resource *metav1.GroupVersionKind
	// Group is the API group concerned.
	Group string
	// Reason is one of the Reason constants.
	Reason string
	// Message says why, naming the kind and the group.
	Message string
}

type providerKey struct{ kind, name string }

func (k providerKey) String() string { return k.kind + " " + k.name }

// ownedState is the computed ownership of one provider.
type ownedState struct {
	groups   []string
	kinds    []metav1.GroupVersionKind
	rejected []Rejection
}

// Ownership is which API groups and service kinds each provider owns,
// computed over all providers at once, because one provider's claim can
// change what another owns. The rules (docs/operator.md "API group
// ownership"):
//
//   - a group listed in the spec.accessPolicy.apiGroups of exactly one
//     provider belongs to that provider, reserved or not; listed by more
//     than one, it belongs to none of them (a conflict reported on each);
//   - otherwise a reserved group belongs to nobody;
//   - otherwise a group belongs to the ServiceProvider that registered it in
//     status.resources first: the one the operator recorded as its owner
//     (AnnotationOwnedGroups) while it still registers the group, else the
//     oldest registrant (creationTimestamp, then name);
//   - a group nobody owns and that is not reserved may still be claimed by
//     any provider (MayOwn).
//
// The zero value owns nothing for anybody.
type Ownership struct {
	// owner maps a group to its owner; a group in conflict maps to the
	// zero providerKey.
	owner     map[string]providerKey
	providers map[providerKey]*ownedState
}

// LoadOwnership lists the ServiceProviders, ClusterProviders and
// PlatformServices of the platform cluster and computes their ownership.
func LoadOwnership(ctx context.Context, c client.Reader) (*Ownership, error) {
	sps := &providerv1alpha1.ServiceProviderList{}
	if err := c.List(ctx, sps); err != nil {
		return nil, fmt.Errorf("list ServiceProviders: %w", err)
	}
	return LoadOwnershipOf(ctx, c, sps.Items)
}

// LoadOwnershipOf computes the ownership of sps, already listed by the
// caller, and of the ClusterProviders and PlatformServices c lists. A
// caller that also describes each ServiceProvider passes its own list, so
// that the kinds a provider owns and the rest of its status come from one
// read: a second list from a cache may already hold a newer status.
func LoadOwnershipOf(ctx context.Context, c client.Reader, sps []providerv1alpha1.ServiceProvider) (*Ownership, error) {
	var providers []Provider
	for i := range sps {
		sp := &sps[i]
		p := newProvider(KindServiceProvider, sp, &sp.Spec.DeploymentSpec)
		p.Resources = sp.Status.Resources
		p.Recorded = RecordedGroups(sp)
		providers = append(providers, p)
	}
	cps := &providerv1alpha1.ClusterProviderList{}
	if err := c.List(ctx, cps); err != nil {
		return nil, fmt.Errorf("list ClusterProviders: %w", err)
	}
	for i := range cps.Items {
		providers = append(providers, newProvider(KindClusterProvider, &cps.Items[i], &cps.Items[i].Spec.DeploymentSpec))
	}
	pss := &providerv1alpha1.PlatformServiceList{}
	if err := c.List(ctx, pss); err != nil {
		return nil, fmt.Errorf("list PlatformServices: %w", err)
	}
	for i := range pss.Items {
		providers = append(providers, newProvider(KindPlatformService, &pss.Items[i], &pss.Items[i].Spec.DeploymentSpec))
	}
	return Compute(providers), nil
}

// RecordedGroups returns the groups AnnotationOwnedGroups of o records.
func RecordedGroups(o metav1.Object) []string {
	v := o.GetAnnotations()[AnnotationOwnedGroups]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// RecordGroups returns the value of AnnotationOwnedGroups for groups:
// sorted, comma separated; empty for none.
func RecordGroups(groups []string) string {
	sorted := slices.Clone(groups)
	slices.Sort(sorted)
	return strings.Join(slices.Compact(sorted), ",")
}

func newProvider(kind string, o metav1.Object, spec *providerv1alpha1.DeploymentSpec) Provider {
	p := Provider{Kind: kind, Name: o.GetName(), Created: o.GetCreationTimestamp()}
	if spec.AccessPolicy != nil {
		p.SpecGroups = spec.AccessPolicy.APIGroups
	}
	return p
}

// Compute resolves the ownership of providers (see Ownership).
func Compute(providers []Provider) *Ownership {
	o := &Ownership{owner: map[string]providerKey{}, providers: map[providerKey]*ownedState{}}
	sorted := oldestFirst(providers)
	// The platform operator's word first: spec.accessPolicy.apiGroups.
	o.awardSpecGroups(o.specClaimants(sorted))
	// Then the registrations in status.resources.
	o.awardRegistered(sorted)
	for _, p := range sorted {
		o.settle(p)
	}
	return o
}

// oldestFirst returns providers sorted with the oldest first, so that it
// wins the groups it registered; the name breaks ties (creationTimestamp
// has a resolution of seconds).
func oldestFirst(providers []Provider) []Provider {
	sorted := slices.Clone(providers)
	slices.SortStableFunc(sorted, func(a, b Provider) int {
		if c := a.Created.Compare(b.Created.Time); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	return sorted
}

// specClaimants adds every provider to o and returns, for each valid group
// of spec.accessPolicy.apiGroups, the providers that list it; an invalid
// group is rejected.
func (o *Ownership) specClaimants(sorted []Provider) map[string][]providerKey {
	claimants := map[string][]providerKey{}
	for _, p := range sorted {
		key := providerKey{p.Kind, p.Name}
		st := &ownedState{}
		o.providers[key] = st
		for _, g := range p.SpecGroups {
			if !validGroup(g) {
				st.rejected = append(st.rejected, Rejection{
					Group:   g,
					Reason:  ReasonGroupInvalid,
					Message: fmt.Sprintf("API group %q of spec.accessPolicy.apiGroups is not a valid group name", g),
				})
				continue
			}
			if !slices.Contains(claimants[g], key) {
				claimants[g] = append(claimants[g], key)
			}
		}
	}
	return claimants
}

// awardSpecGroups gives each group of spec.accessPolicy.apiGroups to the
// one provider that lists it; a group listed by more than one belongs to
// none of them, and each is told why.
func (o *Ownership) awardSpecGroups(claimants map[string][]providerKey) {
	for g, keys := range claimants {
		if len(keys) == 1 {
			o.owner[g] = keys[0]
			continue
		}
		o.owner[g] = providerKey{}
		for _, k := range keys {
			o.providers[k].rejected = append(o.providers[k].rejected, Rejection{
				Group:  g,
				Reason: ReasonGroupConflict,
				Message: fmt.Sprintf("API group %q of spec.accessPolicy.apiGroups is also listed by %s; none of them owns it",
					g, strings.Join(others(keys, k), ", ")),
			})
		}
	}
}

// awardRegistered gives the groups still free to the providers that
// register them in status.resources: first those the operator recorded as
// owned, while their provider still registers them, so that a later
// registration cannot take a group over however old its provider is; then
// the others, oldest provider first.
func (o *Ownership) awardRegistered(sorted []Provider) {
	for _, p := range sorted {
		for _, g := range p.Recorded {
			if _, taken := o.owner[g]; taken || Reserved(g) || !registers(p, g) {
				continue
			}
			o.owner[g] = providerKey{p.Kind, p.Name}
		}
	}
	for _, p := range sorted {
		for _, gvk := range p.Resources {
			if _, taken := o.owner[gvk.Group]; taken || !validEntry(gvk) || Reserved(gvk.Group) {
				continue
			}
			o.owner[gvk.Group] = providerKey{p.Kind, p.Name}
		}
	}
}

// settle records what p ends up with: the groups it owns, the kinds of
// status.resources it may serve and why the others are rejected.
func (o *Ownership) settle(p Provider) {
	key := providerKey{p.Kind, p.Name}
	st := o.providers[key]
	for g, owner := range o.owner {
		if owner == key {
			st.groups = append(st.groups, g)
		}
	}
	slices.Sort(st.groups)
	for _, gvk := range p.Resources {
		if slices.Contains(st.kinds, gvk) {
			continue
		}
		r, rejected := o.reject(key, gvk)
		switch {
		case !rejected:
			st.kinds = append(st.kinds, gvk)
		case !slices.ContainsFunc(st.rejected, func(x Rejection) bool { return x.Resource != nil && *x.Resource == gvk }):
			st.rejected = append(st.rejected, r)
		}
	}
	slices.SortFunc(st.rejected, func(a, b Rejection) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Message, b.Message))
	})
}

// registers reports whether p registers a valid kind of group in its
// status.resources.
func registers(p Provider, group string) bool {
	return slices.ContainsFunc(p.Resources, func(gvk metav1.GroupVersionKind) bool {
		return gvk.Group == group && validEntry(gvk)
	})
}

// reject returns why the status.resources entry gvk of provider key is not
// honoured, or false when it is.
func (o *Ownership) reject(key providerKey, gvk metav1.GroupVersionKind) (Rejection, bool) {
	r := Rejection{Resource: &gvk, Group: gvk.Group}
	what := fmt.Sprintf("status.resources entry %s (API group %q)", describe(gvk), gvk.Group)
	owner, claimed := o.owner[gvk.Group]
	switch {
	case !validEntry(gvk):
		r.Reason, r.Message = ReasonGroupInvalid, what+" is not a valid group, version and kind"
	case claimed && owner == key:
		return Rejection{}, false
	case claimed && owner == (providerKey{}):
		r.Reason, r.Message = ReasonGroupConflict, what+" is claimed in spec.accessPolicy.apiGroups of more than one provider"
	case claimed:
		r.Reason, r.Message = ReasonGroupNotOwned, fmt.Sprintf("%s belongs to %s", what, owner)
	default:
		r.Reason, r.Message = ReasonGroupReserved, what+" is reserved; only the platform operator can grant it in spec.accessPolicy.apiGroups"
	}
	return r, true
}

func describe(gvk metav1.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + ", Kind=" + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + ", Kind=" + gvk.Kind
}

func others(keys []providerKey, self providerKey) []string {
	var out []string
	for _, k := range keys {
		if k != self {
			out = append(out, k.String())
		}
	}
	return out
}

// MayOwn reports whether the provider of kind and name owns group, or could
// still claim it: group is valid, not reserved and owned by nobody.
func (o *Ownership) MayOwn(kind, name, group string) bool {
	owner, claimed := o.owner[group]
	if claimed {
		return owner == providerKey{kind, name} && owner != providerKey{}
	}
	return validGroup(group) && !Reserved(group)
}

// Kinds returns the entries of the ServiceProvider's status.resources that
// it owns the group of, in their order; nil for other kinds.
func (o *Ownership) Kinds(kind, name string) []metav1.GroupVersionKind {
	if st := o.state(kind, name); st != nil {
		return slices.Clone(st.kinds)
	}
	return nil
}

// Groups returns the API groups the provider owns, sorted.
func (o *Ownership) Groups(kind, name string) []string {
	if st := o.state(kind, name); st != nil {
		return slices.Clone(st.groups)
	}
	return nil
}

// RegisteredGroups returns the API groups the ServiceProvider owns and
// registers in its status.resources, sorted: what the operator records in
// AnnotationOwnedGroups. Nil for other kinds.
func (o *Ownership) RegisteredGroups(kind, name string) []string {
	st := o.state(kind, name)
	if st == nil {
		return nil
	}
	var out []string
	for _, g := range st.groups {
		if slices.ContainsFunc(st.kinds, func(gvk metav1.GroupVersionKind) bool { return gvk.Group == g }) {
			out = append(out, g)
		}
	}
	return out
}

// Rejected returns the provider's status.resources entries that are not
// honoured and its spec.accessPolicy.apiGroups in conflict, with reasons,
// sorted by group.
func (o *Ownership) Rejected(kind, name string) []Rejection {
	if st := o.state(kind, name); st != nil {
		return slices.Clone(st.rejected)
	}
	return nil
}

// Owner names the provider that owns an API group.
type Owner struct {
	// Kind is KindServiceProvider, KindClusterProvider or
	// KindPlatformService; empty when the group is in conflict and owned by
	// nobody.
	Kind string
	// Name is the provider's name.
	Name string
}

// Owners returns every owned or conflicting API group with its owner (the
// zero Owner for a conflict). Groups missing from it are unclaimed.
func (o *Ownership) Owners() map[string]Owner {
	out := map[string]Owner{}
	if o == nil {
		return out
	}
	for g, k := range o.owner {
		out[g] = Owner{Kind: k.kind, Name: k.name}
	}
	return out
}

// Providers returns the names of the providers of kind, sorted.
func (o *Ownership) Providers(kind string) []string {
	if o == nil {
		return nil
	}
	var names []string
	for k := range o.providers {
		if k.kind == kind {
			names = append(names, k.name)
		}
	}
	slices.Sort(names)
	return names
}

func (o *Ownership) state(kind, name string) *ownedState {
	if o == nil || o.providers == nil {
		return nil
	}
	return o.providers[providerKey{kind, name}]
}
