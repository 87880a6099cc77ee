package provider_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// TestGroupClaimAfterOwnerRegistered is issue #32's attack "a provider
// claiming another provider's API group" in the step TestOwnershipAttack
// and TestCRDGroupsPolicy leave out: the attacker is the OLDER provider
// (created first, and named to sort first), and it claims the victim's
// group in its status.resources after the victim registered it and
// installed its CRD. Ownership used to go to the oldest registrant, so the
// attacker took the group over: its run role read the victim's kinds, its
// init could rewrite the victim's CRDs, its AccessRequests could ask for the
// victim's kinds on the onboarding cluster, and the victim lost its own
// group. A group a provider owns by registration stays its own while it
// registers it; the attacker is told GroupNotOwned. Every step uses the
// providers' real ServiceAccount tokens.
func TestGroupClaimAfterOwnerRegistered(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ownGroups(t)
	const victimGroup, attackerGroup = "victim.services.openmcp.cloud", "claimer.services.openmcp.cloud"
	gadget := metav1.GroupVersionKind{Group: victimGroup, Version: "v1alpha1", Kind: "Gadget"}

	// Created first and named to sort first: older by every measure
	// (creationTimestamp has a resolution of a second; the name breaks
	// ties).
	attacker := serviceProvider("a-claimer", nil)
	create(t, attacker)
	victim := serviceProvider("z-victim", nil)
	create(t, victim)

	// The victim registers its kind and installs its CRD, as its init does.
	victimRun := tokenClient(t, "sp-z-victim", "sp-z-victim")
	victimInit := tokenClient(t, "sp-z-victim", "sp-z-victim-init")
	registerOnceAllowed(t, victimRun, victim.Name, gadget)
	waitForAccess(t, "sp-z-victim", map[access]bool{{victimGroup, "gadgets"}: true})
	waitForGroupOwner(t, victimGroup, "sp-z-victim")
	victimCRD := crdOf(victimGroup, "gadgets", "Gadget")
	eventually(t, "the victim's init installs the CRD of its group", func(ctx context.Context) (bool, string, error) {
		err := victimInit.Create(ctx, victimCRD)
		return err == nil, fmt.Sprint(err), nil
	})
	t.Cleanup(func() {
		deleteAndWait(t, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: victimCRD.Name}})
	})

	// The attack, with the attacker's own run token.
	attackerRun := tokenClient(t, "sp-a-claimer", "sp-a-claimer")
	registerOnceAllowed(t, attackerRun, attacker.Name, gadget,
		metav1.GroupVersionKind{Group: attackerGroup, Version: "v1alpha1", Kind: "Claimer"})

	waitForConditions(t, attacker, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionFalse, Reason: policy.ReasonGroupNotOwned,
		Message: victimGroup + `") belongs to ServiceProvider z-victim`})
	waitForConditions(t, victim, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionTrue, Reason: provider.ReasonResourcesAccepted})
	waitForAccess(t, "sp-a-claimer", map[access]bool{{victimGroup, "gadgets"}: false, {attackerGroup, "claimers"}: true})
	waitForAccess(t, "sp-z-victim", map[access]bool{{victimGroup, "gadgets"}: true})
	waitForGroupOwner(t, victimGroup, "sp-z-victim")

	// The access policy and MCP deletion read the same ownership.
	own, err := policy.LoadOwnership(t.Context(), k8s)
	if err != nil {
		t.Fatal(err)
	}
	if kinds := own.Kinds(policy.KindServiceProvider, victim.Name); !slices.Contains(kinds, gadget) {
		t.Errorf("ownership: the victim's kinds are %v, want %v among them", kinds, gadget)
	}
	if own.MayOwn(policy.KindServiceProvider, attacker.Name, victimGroup) {
		t.Errorf("ownership: the attacker may own %s, want it refused", victimGroup)
	}

	// The attacker's init may neither rewrite the victim's CRD nor add one
	// to the victim's group.
	attackerInit := tokenClient(t, "sp-a-claimer", "sp-a-claimer-init")
	eventually(t, "the attacker's init may not update the victim's CRD", func(ctx context.Context) (bool, string, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(victimCRD), crd); err != nil {
			return false, err.Error(), nil
		}
		crd.Spec.Names.ShortNames = []string{"stolen"}
		err := attackerInit.Update(ctx, crd, client.DryRunAll)
		return isPolicyDenial(err), fmt.Sprint(err), nil
	})
	eventually(t, "the attacker's init may not create a CRD in the victim's group", func(ctx context.Context) (bool, string, error) {
		err := attackerInit.Create(ctx, crdOf(victimGroup, "claimedgadgets", "ClaimedGadget"), client.DryRunAll)
		return isPolicyDenial(err), fmt.Sprint(err), nil
	})

	// The group stays the victim's only while the victim registers it:
	// once it lets go, the next registrant may have it.
	register(t, victimRun, victim.Name)
	waitForConditions(t, attacker, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionTrue, Reason: provider.ReasonResourcesAccepted})
	waitForAccess(t, "sp-a-claimer", map[access]bool{{victimGroup, "gadgets"}: true})
	waitForGroupOwner(t, victimGroup, "sp-a-claimer")
}

// registerOnceAllowed writes status.resources of the ServiceProvider name
// with c once the operator has granted c's ServiceAccount the write (its
// ServiceAccount exists before its role does).
func registerOnceAllowed(t *testing.T, c client.Client, name string, kinds ...metav1.GroupVersionKind) {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"resources":%s}}`, mustJSON(t, kinds)))
	eventually(t, "register status.resources of "+name, func(ctx context.Context) (bool, string, error) {
		err := c.Status().Patch(ctx, sp, patch)
		if apierrors.IsForbidden(err) {
			return false, err.Error(), nil
		}
		return true, "", err
	})
}

// waitForGroupOwner waits until the owners ConfigMap, which the CRD
// admission policy reads, maps group to the provider namespace owner.
func waitForGroupOwner(t *testing.T, group, owner string) {
	t.Helper()
	eventually(t, "owner of "+group+" in "+provider.GroupOwnersConfigMapName, func(ctx context.Context) (bool, string, error) {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: provider.GroupOwnersConfigMapName}, cm); err != nil {
			return false, err.Error(), nil
		}
		got, ok := cm.Data[group]
		return ok && got == owner, fmt.Sprintf("%q (present %v), want %q", got, ok, owner), nil
	})
}

// tokenClient returns a client that authenticates with a token the API
// server issues for the ServiceAccount ns/name, once the operator has
// created it: the provider's own credentials, not an impersonation.
func tokenClient(t *testing.T, ns, name string) client.Client {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{}
	eventually(t, "a token for ServiceAccount "+ns+"/"+name, func(ctx context.Context) (bool, string, error) {
		err := k8s.SubResource("token").Create(ctx, sa, tr)
		return err == nil, fmt.Sprint(err), nil
	})
	cfg := rest.AnonymousClientConfig(platform.Config)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: platform.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
