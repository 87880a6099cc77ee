package provider

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	shortnames "github.com/marketplane/marketplane/internal/names"
)

// Labels the operator puts on everything it creates for a provider, next
// to providerv1alpha1.ManagedByLabel. They find a provider's objects again
// for clean-up.
const (
	// LabelProviderKind holds the provider's kind, e.g. ServiceProvider.
	LabelProviderKind = "openmcp.cloud/provider-kind"
	// LabelProviderName holds the provider's name, shortened with a hash
	// when it does not fit a label value.
	LabelProviderName = "openmcp.cloud/provider-name"
	// ManagedByValue is the value of providerv1alpha1.ManagedByLabel on
	// everything the operator creates.
	ManagedByValue = "marketplane-operator"
	// PurposeImagePullSecret is the value of
	// providerv1alpha1.ManagedPurposeLabel on the copies of a provider's
	// image pull secrets, which tells them apart from the Secrets the
	// provider keeps in its namespace itself.
	PurposeImagePullSecret = "image-pull-secret"
)

// names are the names of everything the operator creates for one provider
// (docs/operator.md, "Provider deployment").
type names struct {
	// Namespace is the provider's namespace, <prefix>-N.
	Namespace string
	// Init names the init ServiceAccount, Job, Role and RoleBinding,
	// <prefix>-N-init; Run the run ServiceAccount, Deployment, Role and
	// RoleBinding, <prefix>-N.
	Init, Run string
	// MetricsService names the metrics Service, <prefix>-N-metrics.
	MetricsService string
	// InitClusterRole and RunClusterRole name the ClusterRoles and
	// ClusterRoleBindings, marketplane:<prefix>-N-init and
	// marketplane:<prefix>-N.
	InitClusterRole, RunClusterRole string
	// TenantViewRole and TenantEditRole name the aggregated ClusterRoles
	// on the onboarding cluster that give tenants a ServiceProvider's
	// service kinds (tenantroles.go), marketplane:<prefix>-N:view and
	// marketplane:<prefix>-N:edit. Provider names hold no colon, so they
	// never meet the names above.
	TenantViewRole, TenantEditRole string
	// LabelValue is the provider's name as a label value.
	LabelValue string
}

// newNames derives the names for the provider called name of the kind with
// the given prefix. Each name is shortened on its own, so two providers
// never share a name even when their shortened forms would.
func newNames(prefix, name string) names {
	base := prefix + "-" + name
	return names{
		Namespace:       dnsLabel(base),
		Init:            dnsLabel(base + "-init"),
		Run:             dnsLabel(base),
		MetricsService:  dnsLabel(base + "-metrics"),
		InitClusterRole: shortnames.Shorten("marketplane:"+base+"-init", validation.DNS1123SubdomainMaxLength),
		RunClusterRole:  shortnames.Shorten("marketplane:"+base, validation.DNS1123SubdomainMaxLength),
		TenantViewRole:  shortnames.Shorten("marketplane:"+base+":view", validation.DNS1123SubdomainMaxLength),
		TenantEditRole:  shortnames.Shorten("marketplane:"+base+":edit", validation.DNS1123SubdomainMaxLength),
		LabelValue:      shortnames.Shorten(name, validation.LabelValueMaxLength),
	}
}

// dnsLabel turns s into a DNS-1035 label (what Namespaces and Services
// need; Jobs and Deployments are kept as short, because their names end up
// in pod labels and host names). Provider names are DNS subdomains and may
// contain dots, which a label may not: they become dashes, and the name
// then gets a hash of s so that "a.b" and "a-b" stay apart.
func dnsLabel(s string) string {
	if len(validation.IsDNS1035Label(s)) == 0 {
		return s
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	return shortnames.WithHash(clean, s, validation.DNS1035LabelMaxLength)
}

// RunServiceAccount returns the namespace and name of the run
// ServiceAccount of the provider of kind (ServiceProvider, ClusterProvider
// or PlatformService) called name, as the operator creates it; ok is false
// for another kind. Other controllers grant rights to it by this name (the
// kubeconfig Secrets of its AccessRequests in MCP namespaces, its Role
// there).
func RunServiceAccount(kind, name string) (namespace, serviceAccount string, ok bool) {
	var prefix string
	switch kind {
	case ServiceProviders().Name:
		prefix = ServiceProviders().Prefix
	case ClusterProviders().Name:
		prefix = ClusterProviders().Prefix
	case PlatformServices().Name:
		prefix = PlatformServices().Prefix
	default:
		return "", "", false
	}
	n := newNames(prefix, name)
	return n.Namespace, n.Run, true
}
