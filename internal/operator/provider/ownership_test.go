package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// access is one question to the authorizer: may the ServiceAccount list
// resource in group, cluster-wide?
type access struct {
	group, resource string
}

// TestOwnershipAttack is issue #10 item 2, on the provider side: a
// provider registers in its status.resources the core group's Secrets, a
// built-in group, the Service Fabrik groups and the inter-operator's
// config group. None of them gives its run ServiceAccount any right, the
// provider is told why in ResourcesAccepted=False with a Warning event, and
// its own group keeps working. Only the platform operator's
// spec.accessPolicy.apiGroups moves a group, and a change of one provider
// re-evaluates the others.
func TestOwnershipAttack(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ownGroups(t)
	const ownGroup, interopGroup = "evil.services.openmcp.cloud", "interoperator.services.openmcp.cloud"
	osb, sfResource := "osb.servicefabrik.io", "resource.servicefabrik.io"

	// The inter-operator, named so that it is the older one even when both
	// are created within the same second: the SF groups are granted by the
	// platform operator, its config group it registers first.
	interop := serviceProvider("a-interop", func(s *providerv1alpha1.DeploymentSpec) {
		s.AccessPolicy = &providerv1alpha1.AccessPolicy{APIGroups: []string{osb, sfResource}}
	})
	create(t, interop)
	register(t, k8s, interop.Name,
		metav1.GroupVersionKind{Group: osb, Version: "v1alpha1", Kind: "SFServiceInstance"},
		metav1.GroupVersionKind{Group: interopGroup, Version: "v1alpha1", Kind: "ProviderConfig"})

	evil := serviceProvider("z-evil", nil)
	create(t, evil)
	// The attacker registers with its own run credentials, as it can.
	run := as(t, "sp-z-evil", "sp-z-evil")
	eventually(t, "run ServiceAccount of z-evil may write its own status", func(ctx context.Context) (bool, string, error) {
		return allowed(ctx, "sp-z-evil", "sp-z-evil", authorizationv1.ResourceAttributes{
			Group: providerv1alpha1.GroupName, Resource: "serviceproviders", Subresource: "status", Name: evil.Name, Verb: "patch",
		})
	})
	register(t, run, evil.Name,
		metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Secret"},
		metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		metav1.GroupVersionKind{Group: osb, Version: "v1alpha1", Kind: "SFServiceInstance"},
		metav1.GroupVersionKind{Group: sfResource, Version: "v1alpha1", Kind: "SFPlan"},
		metav1.GroupVersionKind{Group: interopGroup, Version: "v1alpha1", Kind: "ProviderConfig"},
		metav1.GroupVersionKind{Group: ownGroup, Version: "v1alpha1", Kind: "Evil"})

	waitForConditions(t, evil, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionFalse, Reason: policy.ReasonGroupReserved,
		Message: `status.resources entry v1, Kind=Secret (API group "") is reserved`})
	msg := apimeta.FindStatusCondition(evil.Status.Conditions, string(provider.ConditionResourcesAccepted)).Message
	for _, part := range []string{"apps/v1, Kind=Deployment", osb, sfResource, interopGroup + `") belongs to ServiceProvider a-interop`} {
		if !strings.Contains(msg, part) {
			t.Errorf("ResourcesAccepted message %q does not name %q", msg, part)
		}
	}
	if strings.Contains(msg, ownGroup) {
		t.Errorf("ResourcesAccepted message %q names the provider's own group, which is accepted", msg)
	}
	waitForTypedEvent(t, evil, corev1.EventTypeWarning, policy.ReasonGroupReserved)
	waitForConditions(t, interop, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionTrue, Reason: provider.ReasonResourcesAccepted})

	// The valid entry works; the rest gives no right.
	waitForAccess(t, "sp-z-evil", map[access]bool{
		{ownGroup, "evils"}:               true,
		{"", "secrets"}:                   false,
		{"apps", "deployments"}:           false,
		{osb, "sfserviceinstances"}:       false,
		{sfResource, "sfplans"}:           false,
		{interopGroup, "providerconfigs"}: false,
	})
	if groups := runRoleGroups(t, "marketplane:sp-z-evil"); !slices.Equal(groups, []string{ownGroup}) {
		t.Errorf("run ClusterRole of z-evil grants the provider groups %q, want only %q", groups, ownGroup)
	}
	waitForAccess(t, "sp-a-interop", map[access]bool{
		{osb, "sfserviceinstances"}:       true,
		{sfResource, "sfplans"}:           true,
		{interopGroup, "providerconfigs"}: true,
		{"", "secrets"}:                   false,
	})

	// The platform operator gives the config group to z-evil: a-interop,
	// which did not change, loses it.
	setAPIGroups(t, evil, interopGroup)
	waitForConditions(t, interop, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionFalse, Reason: policy.ReasonGroupNotOwned,
		Message: interopGroup + `") belongs to ServiceProvider z-evil`})
	waitForAccess(t, "sp-z-evil", map[access]bool{{interopGroup, "providerconfigs"}: true})
	waitForAccess(t, "sp-a-interop", map[access]bool{{interopGroup, "providerconfigs"}: false, {osb, "sfserviceinstances"}: true})

	// Both listed in spec: a conflict, nobody owns it.
	setAPIGroups(t, interop, osb, sfResource, interopGroup)
	waitForConditions(t, interop, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionFalse, Reason: policy.ReasonGroupConflict,
		Message: fmt.Sprintf("API group %q of spec.accessPolicy.apiGroups is also listed by ServiceProvider z-evil; none of them owns it", interopGroup)})
	// z-evil's first rejection (by group) is still the Secret's; the
	// conflict is in the message.
	waitForConditions(t, evil, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionFalse, Reason: policy.ReasonGroupReserved,
		Message: fmt.Sprintf("API group %q of spec.accessPolicy.apiGroups is also listed by ServiceProvider a-interop; none of them owns it", interopGroup)})
	waitForAccess(t, "sp-z-evil", map[access]bool{{interopGroup, "providerconfigs"}: false})
	waitForAccess(t, "sp-a-interop", map[access]bool{{interopGroup, "providerconfigs"}: false})
}

// register writes status.resources of a ServiceProvider with c.
func register(t *testing.T, c client.Client, name string, kinds ...metav1.GroupVersionKind) {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"resources":%s}}`, mustJSON(t, kinds)))
	if err := c.Status().Patch(t.Context(), sp, patch); err != nil {
		t.Fatalf("register status.resources of %s: %v", name, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setAPIGroups sets spec.accessPolicy.apiGroups, as the platform operator.
func setAPIGroups(t *testing.T, sp *providerv1alpha1.ServiceProvider, groups ...string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"accessPolicy":{"apiGroups":%s}}}`, mustJSON(t, groups)))
	if err := k8s.Patch(t.Context(), sp, patch); err != nil {
		t.Fatalf("set spec.accessPolicy.apiGroups of %s: %v", sp.Name, err)
	}
}

// allowed asks the API server's authorizer whether the run (or init)
// ServiceAccount sa of namespace ns may do what attrs say.
func allowed(ctx context.Context, ns, sa string, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	if err := k8s.Create(ctx, sar); err != nil {
		return false, "", err
	}
	return sar.Status.Allowed, fmt.Sprintf("allowed=%v (%s)", sar.Status.Allowed, sar.Status.Reason), nil
}

// waitForAccess waits until the run ServiceAccount of the provider
// namespace ns may list, cluster-wide, exactly the resources marked true.
func waitForAccess(t *testing.T, ns string, want map[access]bool) {
	t.Helper()
	eventually(t, "rights of the run ServiceAccount of "+ns, func(ctx context.Context) (bool, string, error) {
		var wrong []string
		for a, w := range want {
			got, _, err := allowed(ctx, ns, ns, authorizationv1.ResourceAttributes{Group: a.group, Resource: a.resource, Verb: "list"})
			if err != nil {
				return false, "", err
			}
			if got != w {
				wrong = append(wrong, fmt.Sprintf("list %s in group %q: allowed=%v, want %v", a.resource, a.group, got, w))
			}
		}
		slices.Sort(wrong)
		return len(wrong) == 0, strings.Join(wrong, "; "), nil
	})
}

// runRoleGroups returns the API groups a run ClusterRole grants beyond the
// cluster APIs and the provider's own object, which every provider gets.
func runRoleGroups(t *testing.T, name string) []string {
	t.Helper()
	cr := &rbacv1.ClusterRole{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: name}, cr); err != nil {
		t.Fatalf("get ClusterRole %s: %v", name, err)
	}
	// A group grant is a rule on every resource of the group; the other
	// rules name their resources (the cluster APIs, its own object, the
	// reviews that authenticate metrics scrapers).
	var groups []string
	for _, r := range cr.Rules {
		if slices.Equal(r.Resources, []string{"*"}) {
			groups = append(groups, r.APIGroups...)
		}
	}
	slices.Sort(groups)
	return groups
}
