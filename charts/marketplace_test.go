package charts_test

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/internal/marketplace"
)

// TestMarketplaceMatchesGo checks that the chart deploys the marketplace
// with the rights its code asks for, no more: the PlatformService's access
// policy is internal/marketplace.AccessPolicy(), the platform ClusterRole's
// rules are PlatformRules(), bound to the run ServiceAccount ps-<name>; and
// marketplace.enabled=false leaves all of it out.
func TestMarketplaceMatchesGo(t *testing.T) {
	objs, err := charts.Render(charts.WithExampleRegistry(map[string]any{"marketplace": map[string]any{"name": "shop"}}), charts.WithReleaseName("mp"), charts.WithNamespace("mp-system"))
	if err != nil {
		t.Fatal(err)
	}
	ps := &providerv1alpha1.PlatformService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustFind(t, objs, "PlatformService", "shop").Object, ps); err != nil {
		t.Fatal(err)
	}
	if want := marketplace.AccessPolicy(); !reflect.DeepEqual(ps.Spec.AccessPolicy, want) {
		t.Errorf("PlatformService spec.accessPolicy = %+v, want marketplace.AccessPolicy() %+v", ps.Spec.AccessPolicy, want)
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustFind(t, objs, "ClusterRole", "mp-marketplace-sources").Object, role); err != nil {
		t.Fatal(err)
	}
	if want := marketplace.PlatformRules(); !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("ClusterRole rules = %+v, want marketplace.PlatformRules() %+v", role.Rules, want)
	}
	binding := &rbacv1.ClusterRoleBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustFind(t, objs, "ClusterRoleBinding", "mp-marketplace-sources").Object, binding); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ps-shop", Namespace: "ps-shop"}}
	if !reflect.DeepEqual(binding.Subjects, want) || binding.RoleRef.Name != role.Name {
		t.Errorf("ClusterRoleBinding binds %s to %+v, want %s to %+v", binding.RoleRef.Name, binding.Subjects, role.Name, want)
	}

	off, err := charts.Render(charts.WithExampleRegistry(map[string]any{"marketplace": map[string]any{"enabled": false}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := count(off, "PlatformService"); n != 0 {
		t.Errorf("marketplace.enabled=false renders %d PlatformServices", n)
	}
	for _, o := range off {
		if o.GetLabels()["app.kubernetes.io/component"] == "marketplace" {
			t.Errorf("marketplace.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
	}
}
