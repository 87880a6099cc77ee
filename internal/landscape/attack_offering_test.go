package landscape_test

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape/stack"
)

// TestAttackTenantWritesOffering is issue #32's attack "a tenant writing an
// Offering", on the whole landscape with the RBAC its operator, marketplace
// and kube-controller-manager (role aggregation) really installed: the
// console's demo tenant (console-demo/demo: edit in its own namespace, and
// system:authenticated), with a token the API server issued for it, tries
// to create, update, patch, apply and delete Offerings and their status.
// Every write is Forbidden and the Offering is unchanged; reading the
// catalog is allowed, as the marketplace intends. It passed before issue
// #32: the marketplace grants tenants get, list and watch only.
func TestAttackTenantWritesOffering(t *testing.T) {
	requireBinaries(t)
	useSharedStack(t)
	t.Parallel()
	// The shared landscape: this test reads Offerings and writes nothing
	// that the API server accepts.
	l, _ := sharedStack(t)
	ctx := t.Context()
	admin := l.Onboarding.Client

	var victim marketplacev1alpha1.Offering
	waitFor(t, "the marketplace to write an Offering", func(ctx context.Context) (bool, error) {
		list := &marketplacev1alpha1.OfferingList{}
		if err := admin.List(ctx, list); err != nil || len(list.Items) == 0 {
			return false, client.IgnoreNotFound(err)
		}
		victim = list.Items[0]
		return true, nil
	}, func() string { return "no Offering" })

	tenant := tenantClient(t, l.Onboarding.Config, admin, stack.ConsoleDemoNamespace, stack.ConsoleDemoAccount)
	// The tenant is one: it may work in its own namespace.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: stack.ConsoleDemoNamespace, Name: sharedName("offering-attack")}}
	must(t, tenant.Create(ctx, cm))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), cm) })

	// Reading is allowed.
	if err := tenant.List(ctx, &marketplacev1alpha1.OfferingList{}); err != nil {
		t.Errorf("the tenant lists Offerings: %v, want allowed", err)
	}
	if err := tenant.Get(ctx, client.ObjectKeyFromObject(&victim), &marketplacev1alpha1.Offering{}); err != nil {
		t.Errorf("the tenant reads Offering %s: %v, want allowed", victim.Name, err)
	}

	// Every write is Forbidden.
	forged := func() *marketplacev1alpha1.Offering {
		o := victim.DeepCopy()
		o.Spec.Ready = !o.Spec.Ready
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[marketplacev1alpha1.AnnotationDisplayName] = "Forged by a tenant"
		return o
	}
	fresh := &marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: sharedName("forged-offering")},
		Spec:       marketplacev1alpha1.OfferingSpec{Source: marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceSFService, Name: "forged"}},
	}
	mergePatch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"ready":false},"metadata":{"labels":{"forged":"true"}}}`))
	statusPatch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"conditions":[]}}`))
	jsonPatch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/ready","value":false}]`))
	attacks := map[string]func() error{
		"create":      func() error { return tenant.Create(ctx, fresh.DeepCopy()) },
		"update":      func() error { return tenant.Update(ctx, forged()) },
		"merge patch": func() error { return tenant.Patch(ctx, victim.DeepCopy(), mergePatch) },
		"JSON patch":  func() error { return tenant.Patch(ctx, victim.DeepCopy(), jsonPatch) },
		"server-side apply": func() error {
			return tenant.Apply(ctx, applyConfiguration(t, forged()), client.FieldOwner("tenant"), client.ForceOwnership)
		},
		"update status":  func() error { return tenant.Status().Update(ctx, forged()) },
		"patch status":   func() error { return tenant.Status().Patch(ctx, victim.DeepCopy(), statusPatch) },
		"delete":         func() error { return tenant.Delete(ctx, victim.DeepCopy()) },
		"delete all":     func() error { return tenant.DeleteAllOf(ctx, &marketplacev1alpha1.Offering{}) },
		"create dry-run": func() error { return tenant.Create(ctx, fresh.DeepCopy(), client.DryRunAll) },
	}
	for what, attack := range attacks {
		if err := attack(); !apierrors.IsForbidden(err) {
			t.Errorf("the tenant's %s of an Offering: %v, want Forbidden", what, err)
		}
	}

	// The authorizer agrees, verb by verb, for the resource and its status.
	for _, sub := range []string{"", "status"} {
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection", "get", "list", "watch"} {
			want := sub == "" && (verb == "get" || verb == "list" || verb == "watch")
			ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: marketplacev1alpha1.GroupVersion.Group, Resource: "offerings", Subresource: sub, Verb: verb, Name: victim.Name},
			}}
			must(t, tenant.Create(ctx, ssar))
			if ssar.Status.Allowed != want {
				t.Errorf("the tenant may %s offerings/%s: %v (%s), want %v", verb, sub, ssar.Status.Allowed, ssar.Status.Reason, want)
			}
		}
	}

	// Nothing changed.
	after := &marketplacev1alpha1.Offering{}
	must(t, admin.Get(ctx, client.ObjectKeyFromObject(&victim), after))
	if after.Spec.Ready != victim.Spec.Ready || after.Annotations[marketplacev1alpha1.AnnotationDisplayName] == "Forged by a tenant" || after.Labels["forged"] != "" || after.DeletionTimestamp != nil {
		t.Errorf("Offering %s changed under the tenant's attacks: %+v", victim.Name, after.ObjectMeta)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(fresh), &marketplacev1alpha1.Offering{}); !apierrors.IsNotFound(err) {
		t.Errorf("the tenant's Offering %s exists (%v)", fresh.Name, err)
	}
}

// tenantClient returns a client of the cluster at cfg that authenticates
// with a token the API server issues for the ServiceAccount ns/name: the
// tenant's own credentials, as the console's users sign in with them.
func tenantClient(t *testing.T, cfg *rest.Config, admin client.Client, ns, name string) client.Client {
	t.Helper()
	tr := &authenticationv1.TokenRequest{}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	must(t, admin.SubResource("token").Create(t.Context(), sa, tr))
	tc := rest.AnonymousClientConfig(cfg)
	tc.BearerToken = tr.Status.Token
	c, err := client.New(tc, client.Options{Scheme: admin.Scheme()})
	must(t, err)
	return c
}

// applyConfiguration is o as a server-side apply configuration: without
// the fields the server sets, which an apply refuses.
func applyConfiguration(t *testing.T, o *marketplacev1alpha1.Offering) runtime.ApplyConfiguration {
	t.Helper()
	o = o.DeepCopy()
	o.TypeMeta = metav1.TypeMeta{APIVersion: marketplacev1alpha1.GroupVersion.String(), Kind: "Offering"}
	o.ResourceVersion, o.UID, o.ManagedFields, o.CreationTimestamp, o.Generation = "", "", nil, metav1.Time{}, 0
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	must(t, err)
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return client.ApplyConfigurationFromUnstructured(u)
}
