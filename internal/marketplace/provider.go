package marketplace

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/marketplane/marketplane/api/install"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/providerapp"
)

// Name is the marketplace's binary and the name of its PlatformService in
// the landscape and the chart.
const (
	Name            = "marketplane-marketplace"
	PlatformService = "marketplace"
)

// SourcesClusterRole names the ClusterRole on the platform cluster that
// lets the marketplace read its sources (PlatformRules). The operator gives
// a PlatformService rights only in its own namespace; the platform operator
// grants this one (the chart and the landscape bind it to the run
// ServiceAccount, ps-<name> in the namespace ps-<name>).
const SourcesClusterRole = "marketplane:marketplace-sources"

// PlatformRules are what the marketplace reads on the platform cluster:
// ServiceProviders and the SFServices and SFPlans of every namespace, and
// ClusterProviders and PlatformServices (whose spec.accessPolicy.apiGroups
// decide API group ownership too), with list and watch (its cache; it never
// gets one by name). Nothing there is written.
func PlatformRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{providerv1alpha1.GroupVersion.Group}, Resources: []string{"serviceproviders", "clusterproviders", "platformservices"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfservices", "sfplans"}, Verbs: []string{"list", "watch"}},
	}
}

// viewerRBACRules are what init needs to apply ViewerRole and
// ViewerBinding. RBAC cannot restrict create by name, so create is
// granted on the kinds and every other write only on the one name; and the
// API server lets a binding or role through only when its creator holds
// every right it grants (escalation prevention), which bounds what the
// marketplace can hand out to its own rights: reading Offerings, CRDs and
// writing events and Offerings. That is also why init reads Offerings: it
// must hold what ViewerRole grants.
func viewerRBACRules() []rbacv1.PolicyRule {
	return append([]rbacv1.PolicyRule{
		{APIGroups: []string{marketplacev1alpha1.GroupVersion.Group}, Resources: []string{"offerings"}, Verbs: []string{"get", "list", "watch"}},
	}, rbacWriteRules()...)
}

// rbacWriteRules are the writes of ClusterRoles and ClusterRoleBindings in
// viewerRBACRules: beyond a provider's default ceiling, so the access policy
// names them.
func rbacWriteRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{"create"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"}, ResourceNames: []string{ViewerClusterRole}, Verbs: []string{"get", "patch", "update"}},
	}
}

// RunPermissions are what run asks for on the onboarding cluster:
// everything on Offerings (its own group), reading CRDs (each offered
// kind's schema comes from its CRD) and writing events.
func RunPermissions() clusteraccess.Permissions {
	return clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{marketplacev1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
}

// AccessPolicy is the PlatformService's spec.accessPolicy: it owns the
// marketplace group, and init may write the viewer RBAC on the onboarding
// cluster (rbacWriteRules).
func AccessPolicy() *providerv1alpha1.AccessPolicy {
	return &providerv1alpha1.AccessPolicy{
		APIGroups:  []string{marketplacev1alpha1.GroupVersion.Group},
		Onboarding: rbacWriteRules(),
	}
}

// Provider describes the marketplane-marketplace binary, a PlatformService
// deployed by the operator through the init/run contract: init installs the
// Offering CRD and the viewer RBAC on the onboarding cluster, run keeps the
// Offerings current (Setup) with the platform cluster's sources.
func Provider(opts ...Option) (providerapp.Provider, error) {
	scheme, err := install.NewScheme()
	if err != nil {
		return providerapp.Provider{}, fmt.Errorf("marketplace scheme: %w", err)
	}
	list, err := CRDs()
	if err != nil {
		return providerapp.Provider{}, err
	}
	perms := RunPermissions()
	return providerapp.Provider{
		Name:           Name,
		Scheme:         scheme,
		CRDs:           list,
		RunPermissions: &perms,
		InitRules:      viewerRBACRules(),
		InitOnboarding: applyViewerRBAC,
		Setup: func(_ context.Context, mgr ctrl.Manager, env providerapp.Env) error {
			return Setup(mgr, env.Platform, mgr, opts...)
		},
	}, nil
}
