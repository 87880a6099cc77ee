package providerapp_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/api/install"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/providertest"
)

const group = "widgets.services.openmcp.cloud"

var widgetKind = schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Widget"}

func crd(plural, kind string, scope apiextensionsv1.ResourceScope, role string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{crds.ClusterLabel: role}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// TestInit runs a provider's init through the contract: onboarding access
// comes from a real AccessRequest granted by the operator's controllers.
func TestInit(t *testing.T) {
	l := providertest.Start(t)
	ctx := t.Context()
	ns := l.ProviderNamespace(t, "sp-widgets")
	t.Setenv(contract.EnvPodNamespace, ns)
	kubeconfig, err := l.Platform.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	must(t, l.Platform.Client.Create(ctx, &providerv1alpha1.ServiceProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec:       providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "example.org/widgets:v1"}},
	}))
	scheme, err := install.NewScheme()
	must(t, err)
	p := providerapp.Provider{
		Name:   "widgets",
		Scheme: scheme,
		CRDs: []*apiextensionsv1.CustomResourceDefinition{
			crd("widgets", "Widget", apiextensionsv1.NamespaceScoped, crds.ClusterOnboarding),
			crd("providerconfigs", "ProviderConfig", apiextensionsv1.ClusterScoped, crds.ClusterPlatform),
		},
		ServiceKinds: []schema.GroupVersionKind{widgetKind},
		Setup:        func(context.Context, ctrl.Manager, providerapp.Env) error { return nil },
	}
	initArgs := func(provider string) []string {
		return []string{"init", "--environment=test", "--provider-name=" + provider, "--kubeconfig=" + kubeconfig}
	}

	// Twice: init runs again for every new generation and must be idempotent.
	for range 2 {
		must(t, execute(ctx, p, initArgs("widgets")...))
	}
	must(t, l.Onboarding.Client.Get(ctx, client.ObjectKey{Name: "widgets." + group}, &apiextensionsv1.CustomResourceDefinition{}))
	must(t, l.Platform.Client.Get(ctx, client.ObjectKey{Name: "providerconfigs." + group}, &apiextensionsv1.CustomResourceDefinition{}))
	sp := &providerv1alpha1.ServiceProvider{}
	must(t, l.Platform.Client.Get(ctx, client.ObjectKey{Name: "widgets"}, sp))
	want := metav1.GroupVersionKind{Group: widgetKind.Group, Version: widgetKind.Version, Kind: widgetKind.Kind}
	if !slices.Equal(sp.Status.Resources, []metav1.GroupVersionKind{want}) {
		t.Errorf("status.resources = %v, want exactly [%v]", sp.Status.Resources, want)
	}

	t.Run("fails without its ServiceProvider", func(t *testing.T) {
		err := execute(ctx, p, initArgs("nobody")...)
		if err == nil || !strings.Contains(err.Error(), "ServiceProvider nobody") {
			t.Fatalf("init: want an error naming the missing ServiceProvider, got %v", err)
		}
	})
	t.Run("fails when a CRD cannot be installed", func(t *testing.T) {
		bad := p
		broken := crd("gadgets", "Gadget", apiextensionsv1.NamespaceScoped, crds.ClusterOnboarding)
		broken.Name = "wrong-name.example.com"
		bad.CRDs = append(slices.Clone(p.CRDs), broken)
		err := execute(ctx, bad, initArgs("widgets")...)
		if err == nil || !strings.Contains(err.Error(), "install onboarding CRDs") {
			t.Fatalf("init: want an error about installing CRDs, got %v", err)
		}
		if code := bad.MainWithArgs(ctx, initArgs("widgets")); code == 0 {
			t.Error("exit code of a failed init is 0, want non-zero")
		}
	})
	t.Run("fails without POD_NAMESPACE", func(t *testing.T) {
		t.Setenv(contract.EnvPodNamespace, "")
		if err := execute(ctx, p, initArgs("widgets")...); err == nil || !strings.Contains(err.Error(), contract.EnvPodNamespace) {
			t.Fatalf("init: want an error naming %s, got %v", contract.EnvPodNamespace, err)
		}
	})
}

func execute(ctx context.Context, p providerapp.Provider, args ...string) error {
	cmd := p.Command()
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
