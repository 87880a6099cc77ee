package stack

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/marketplace"
)

// marketplaceProvider is the marketplace deployed as a PlatformService
// (docs/marketplace.md): the operator runs its init and run like any other
// provider's.
func marketplaceProvider() provider {
	return provider{
		name:            marketplace.PlatformService,
		platformService: true,
		binary:          marketplace.Name,
		policy:          marketplace.AccessPolicy(),
	}
}

// startMarketplace lets the marketplace read its sources on the platform
// cluster and starts it.
func startMarketplace(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	if err := grantMarketplaceSources(ctx, l); err != nil {
		return err
	}
	if err := marketplaceProvider().start(ctx, l, timeout); err != nil {
		return err
	}
	l.AddSummary(
		"Marketplace: every offering, readable by every tenant",
		"  marketplane offerings list --kubeconfig "+l.Onboarding.KubeconfigPath,
	)
	return nil
}

// grantMarketplaceSources binds marketplace.SourcesClusterRole (reading
// ServiceProviders, SFServices and SFPlans) to the marketplace's run
// ServiceAccount on the platform cluster, as the chart does.
func grantMarketplaceSources(ctx context.Context, l *landscape.Landscape) error {
	c := l.Platform.Client
	name := marketplace.SourcesClusterRole
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ensure(ctx, c, role, func() { role.Rules = marketplace.PlatformRules() }); err != nil {
		return fmt.Errorf("marketplace sources: %w", err)
	}
	run := "ps-" + marketplace.PlatformService
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ensure(ctx, c, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: run, Namespace: run}}
	}); err != nil {
		return fmt.Errorf("marketplace sources: %w", err)
	}
	return nil
}
