package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// TestCRDGroupsPolicy: the init role may write CRDs cluster-wide (a
// provider's CRDs are not known before its init runs), so the admission
// policy served by the API server limits a provider's ServiceAccounts to
// CRDs of API groups the provider owns or can still claim. Claiming the SF
// groups or another provider's group by installing a CRD of it, or
// rewriting another provider's CRD, is denied with a reason; the platform
// operator's spec.accessPolicy.apiGroups allows it.
func TestCRDGroupsPolicy(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ownGroups(t)
	const ownerGroup = "crdowner.services.openmcp.cloud"
	owner := serviceProvider("crd-owner", nil)
	create(t, owner)
	register(t, k8s, owner.Name, metav1.GroupVersionKind{Group: ownerGroup, Version: "v1alpha1", Kind: "Thing"})
	ownerCRD := crdOf(ownerGroup, "things", "Thing")
	create(t, ownerCRD)

	granted := serviceProvider("crd-granted", func(s *providerv1alpha1.DeploymentSpec) {
		s.AccessPolicy = &providerv1alpha1.AccessPolicy{APIGroups: []string{"resource.servicefabrik.io"}}
	})
	create(t, granted)
	evil := serviceProvider("crd-evil", nil)
	create(t, evil)
	initC := as(t, "sp-crd-evil", "sp-crd-evil-init")
	grantedInit := as(t, "sp-crd-granted", "sp-crd-granted-init")

	// The init role allows creating CRDs at all once the operator has
	// applied it; from then on only the policy decides.
	eventually(t, "init of crd-evil may create a CRD of a fresh group", func(context.Context) (bool, string, error) {
		err := initC.Create(t.Context(), crdOf("crdevil.services.openmcp.cloud", "evils", "Evil"), client.DryRunAll)
		return err == nil, fmt.Sprint(err), nil
	})

	denied := map[string]client.Object{
		"create a CRD of a Service Fabrik group":      crdOf("osb.servicefabrik.io", "sfevils", "SFEvil"),
		"create a CRD of the inter-operator's domain": crdOf("servicefabrik.io", "evils", "Evil"),
		"create a CRD of a platform group":            crdOf("clusters.openmcp.cloud", "evils", "Evil"),
		"create a CRD of a Marketplane group":         crdOf("marketplane.io", "evils", "Evil"),
		"create a CRD of another provider's group":    crdOf(ownerGroup, "gadgets", "Gadget"),
		"create a CRD granted to another provider":    crdOf("resource.servicefabrik.io", "sfevils", "SFEvil"),
	}
	for what, obj := range denied {
		eventually(t, "init of crd-evil may not "+what, func(context.Context) (bool, string, error) {
			err := initC.Create(t.Context(), obj, client.DryRunAll)
			return isPolicyDenial(err), fmt.Sprint(err), nil
		})
	}
	// Rewriting the other provider's CRD is denied as well.
	eventually(t, "init of crd-evil may not update another provider's CRD", func(context.Context) (bool, string, error) {
		ctx := t.Context()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ownerCRD), crd); err != nil {
			return false, err.Error(), nil
		}
		crd.Spec.Names.ShortNames = []string{"stolen"}
		err := initC.Update(ctx, crd, client.DryRunAll)
		return isPolicyDenial(err), fmt.Sprint(err), nil
	})

	eventually(t, "init of crd-granted may create a CRD of the group its spec lists", func(context.Context) (bool, string, error) {
		err := grantedInit.Create(t.Context(), crdOf("resource.servicefabrik.io", "sfgranteds", "SFGranted"), client.DryRunAll)
		return err == nil, fmt.Sprint(err), nil
	})
}

// isPolicyDenial reports whether err is the admission policy's denial.
func isPolicyDenial(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "a provider may write only CRDs of API groups it owns or can still claim")
}

// crdOf is a namespaced CRD of group.
func crdOf(group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	c := crd(plural, kind)
	c.Name = plural + "." + group
	c.Spec.Group = group
	return c
}
