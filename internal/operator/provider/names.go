package provider

import (
	"k8s.io/apimachinery/pkg/util/validation"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	shortnames "github.com/marketplane/marketplane/pkg/names"
	"github.com/marketplane/marketplane/pkg/providerrequests"
)

// Labels the operator puts on everything it creates for a provider, next
// to providerv1alpha1.ManagedByLabel. They find a provider's objects again
// for clean-up.
const (
	// LabelProviderKind holds the provider's kind, e.g. ServiceProvider.
	LabelProviderKind = "openmcp.cloud/provider-kind"
	// LabelProviderName is providerv1alpha1.ProviderNameLabel.
	LabelProviderName = providerv1alpha1.ProviderNameLabel
	// ManagedByValue is providerv1alpha1.ManagedByOperator.
	ManagedByValue = providerv1alpha1.ManagedByOperator
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
		Namespace:       providerrequests.DNSLabel(base),
		Init:            providerrequests.DNSLabel(base + "-init"),
		Run:             providerrequests.DNSLabel(base),
		MetricsService:  providerrequests.DNSLabel(base + "-metrics"),
		InitClusterRole: shortnames.Shorten("marketplane:"+base+"-init", validation.DNS1123SubdomainMaxLength),
		RunClusterRole:  shortnames.Shorten("marketplane:"+base, validation.DNS1123SubdomainMaxLength),
		TenantViewRole:  shortnames.Shorten("marketplane:"+base+":view", validation.DNS1123SubdomainMaxLength),
		TenantEditRole:  shortnames.Shorten("marketplane:"+base+":edit", validation.DNS1123SubdomainMaxLength),
		LabelValue:      shortnames.Shorten(name, validation.LabelValueMaxLength),
	}
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
