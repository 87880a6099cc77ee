package marketplace_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestKindsOfOtherProvidersNotOffered: a provider writes its own
// status.resources, so it can list another provider's kind there. A
// registered its group first, so A owns it (the operator's rules,
// internal/operator/policy); B lists A's kind next to one of its own, C
// lists only A's. B's Offering offers B's kind alone and names A's in its
// Ready message; A's offers A's kind; C has no Offering; and the broker's
// code-based OSB catalog built from these Offerings gives B no plan of A's
// kind and A one. Otherwise B would sell A's service, with A's schema,
// under its own name.
func TestKindsOfOtherProvidersNotOffered(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	// Names sort a < b < c, so that A is the oldest provider even within
	// the second creationTimestamp resolves.
	run := unique("owner")
	a, b, c := run+"-a", run+"-b", run+"-c"
	groupA, groupB := a+".example.invalid", b+".example.invalid"
	create(t, widgetCRD(groupA, "sizeA"))
	create(t, widgetCRD(groupB, "sizeB"))
	kindA := metav1.GroupVersionKind{Group: groupA, Version: "v1alpha1", Kind: "Widget"}
	kindB := metav1.GroupVersionKind{Group: groupB, Version: "v1alpha1", Kind: "Widget"}
	for _, name := range []string{a, b, c} {
		create(t, &providerv1alpha1.ServiceProvider{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "true"}},
			Spec:       providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "registry.example.com/" + name + ":v1"}},
		})
	}
	setProviderKinds(t, a, []metav1.GroupVersionKind{kindA}, metav1.ConditionTrue, "Available")
	waitOffering(t, "sp-"+a, "A's kind", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Kinds) != 1 || o.Spec.Kinds[0].Schema == nil {
			return fmt.Sprintf("kinds = %+v", o.Spec.Kinds)
		}
		return ""
	})
	setProviderKinds(t, b, []metav1.GroupVersionKind{kindB, kindA}, metav1.ConditionTrue, "Available")
	setProviderKinds(t, c, []metav1.GroupVersionKind{kindA}, metav1.ConditionTrue, "Available")

	ob := waitOffering(t, "sp-"+b, "B's own kind only, A's named in the Ready message", func(o *marketplacev1alpha1.Offering) string {
		var groups []string
		for _, k := range o.Spec.Kinds {
			groups = append(groups, k.Group)
		}
		if len(groups) != 1 || groups[0] != groupB {
			return fmt.Sprintf("kinds of the groups %v, want only %s", groups, groupB)
		}
		cond := apimeta.FindStatusCondition(o.Status.Conditions, marketplacev1alpha1.ConditionReady)
		if cond == nil || cond.ObservedGeneration != o.Generation || !strings.Contains(cond.Message, groupA) {
			return fmt.Sprintf("Ready condition %+v does not name the group %s", cond, groupA)
		}
		return ""
	})
	cond := apimeta.FindStatusCondition(ob.Status.Conditions, marketplacev1alpha1.ConditionReady)
	if cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "GroupNotOwned") || !strings.Contains(cond.Message, a) {
		t.Errorf("B's Ready condition: %+v; want True (its own kind works), naming A's group, A and GroupNotOwned", cond)
	}
	oa := waitOffering(t, "sp-"+a, "A's kind", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Kinds) != 1 || o.Spec.Kinds[0].Group != groupA {
			return fmt.Sprintf("kinds = %+v", o.Spec.Kinds)
		}
		return ""
	})
	if p := specProperty(oa.Spec.Kinds[0], "sizeA"); p == nil {
		t.Errorf("A's kind has no schema of its CRD: %s", oa.Spec.Kinds[0].Schema)
	}
	// One reconcile computes every Offering: B's is current, so C's would
	// exist by now.
	if err := k8s.Get(ctx, client.ObjectKey{Name: "sp-" + c}, &marketplacev1alpha1.Offering{}); !apierrors.IsNotFound(err) {
		t.Errorf("Offering sp-%s of a provider that lists only another's kind: get = %v, want NotFound", c, err)
	}

	// The broker's code-based catalog, built from the Offerings.
	list := &marketplacev1alpha1.OfferingList{}
	if err := k8s.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	code := catalog.BuildCode(list.Items)
	planGroups := func(provider string) []string {
		svc := code.Service(catalog.OfferingServiceID("sp-" + provider))
		if svc == nil {
			return nil
		}
		var groups []string
		for _, p := range svc.Plans {
			groups = append(groups, p.Group)
		}
		return groups
	}
	if got := planGroups(b); len(got) != 1 || got[0] != groupB {
		t.Errorf("B's OSB plans are of the groups %v, want only %s (problems: %v)", got, groupB, code.Problems)
	}
	if got := planGroups(a); len(got) != 1 || got[0] != groupA {
		t.Errorf("A's OSB plans are of the groups %v, want %s (problems: %v)", got, groupA, code.Problems)
	}
	if got := planGroups(c); got != nil {
		t.Errorf("C has OSB plans of the groups %v, want none", got)
	}
}
