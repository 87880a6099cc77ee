package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

const testGroup = "rbactest.services.openmcp.cloud"

// TestRBACLeastPrivilege acts as the provider's service accounts against
// the API server and checks that they can do what docs/operator.md grants
// and nothing more.
func TestRBACLeastPrivilege(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ctx := t.Context()
	createCRD(t, "widgets", "Widget")
	// A second provider whose status the first must not touch; ignored, so
	// nothing is deployed for it.
	other := serviceProvider("rbac-other", nil)
	other.Annotations = map[string]string{providerv1alpha1.OperationAnnotation: providerv1alpha1.OperationIgnore}
	create(t, other)

	sp := serviceProvider("rbac", nil)
	create(t, sp)
	const ns, initSA, runSA = "sp-rbac", "sp-rbac-init", "sp-rbac"
	job := waitForJob(t, ns, "sp-rbac-init", 1, 1)
	run := as(t, ns, runSA)
	initC := as(t, ns, initSA)

	widgets := &unstructured.UnstructuredList{}
	widgets.SetGroupVersionKind(schema.GroupVersionKind{Group: testGroup, Version: "v1alpha1", Kind: "WidgetList"})
	checkForbidden(t, "run: list widgets before the group is registered", run.List(ctx, widgets), true)

	// The provider registers its kinds in status.resources, with its own
	// permission on its own status.
	register := []byte(fmt.Sprintf(`{"status":{"resources":[{"group":%q,"version":"v1alpha1","kind":"Widget"}]}}`, testGroup))
	if err := run.Status().Patch(ctx, &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: sp.Name}}, client.RawPatch(types.MergePatchType, register)); err != nil {
		t.Fatalf("run: register status.resources on its own ServiceProvider: %v", err)
	}
	eventually(t, "run role recomputed from status.resources", func(ctx context.Context) (bool, string, error) {
		err := run.List(ctx, widgets)
		return err == nil, fmt.Sprint(err), nil
	})

	// What run may do.
	checkForbidden(t, "run: list Secrets in its namespace", run.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)), false)
	checkForbidden(t, "run: create a Secret in its namespace", run.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "state"}}), false)
	checkForbidden(t, "run: create a Lease in its namespace", run.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"}}), false)
	checkForbidden(t, "run: list Clusters", run.List(ctx, &clustersv1alpha1.ClusterList{}), false)
	checkForbidden(t, "run: create an AccessRequest in its namespace", run.Create(ctx, accessRequest(ns), client.DryRunAll), false)
	checkForbidden(t, "run: get its own ServiceProvider", run.Get(ctx, client.ObjectKeyFromObject(sp), &providerv1alpha1.ServiceProvider{}), false)
	// Metrics are on by default; an exposed endpoint asks the API server
	// who a scraper is and whether it may read /metrics.
	checkForbidden(t, "run: create a TokenReview", run.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}), false)
	checkForbidden(t, "run: create a SubjectAccessReview", run.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "scraper", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}), false)

	// What run may not do.
	checkForbidden(t, "run: list Secrets in the operator namespace", run.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNamespace)), true)
	checkForbidden(t, "run: list Secrets in all namespaces", run.List(ctx, &corev1.SecretList{}), true)
	checkForbidden(t, "run: create an AccessRequest in another namespace", run.Create(ctx, accessRequest(operatorNamespace), client.DryRunAll), true)
	checkForbidden(t, "run: create a CRD", run.Create(ctx, crd("gadgets", "Gadget"), client.DryRunAll), true)
	// What only a ClusterProvider may do (TestClusterProviderServesItsClusters).
	checkForbidden(t, "run: list ClusterProfiles", run.List(ctx, &clustersv1alpha1.ClusterProfileList{}), true)
	checkForbidden(t, "run: patch a Cluster in its namespace",
		run.Patch(ctx, &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "any"}}, client.RawPatch(types.MergePatchType, []byte(`{}`))), true)
	checkForbidden(t, "run: get another ServiceProvider", run.Get(ctx, client.ObjectKeyFromObject(other), &providerv1alpha1.ServiceProvider{}), true)
	checkForbidden(t, "run: update another provider's status",
		run.Status().Patch(ctx, &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: other.Name}}, client.RawPatch(types.MergePatchType, register)), true)
	checkForbidden(t, "run: create a ClusterRoleBinding", run.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}, client.DryRunAll), true)

	// init may install CRDs, and no more than run outside its namespace.
	gadgets := crd("gadgets", "Gadget")
	checkForbidden(t, "init: create a CRD", initC.Create(ctx, gadgets), false)
	t.Cleanup(func() { deleteAndWait(t, gadgets) })
	checkForbidden(t, "init: list Secrets in the operator namespace", initC.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNamespace)), true)
	checkForbidden(t, "init: create an AccessRequest in its namespace", initC.Create(ctx, accessRequest(ns), client.DryRunAll), false)
	checkForbidden(t, "init: delete CRDs", initC.Delete(ctx, gadgets, client.DryRunAll), true)
	checkForbidden(t, "init: create a TokenReview", initC.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}), true)

	// The operator's status writes keep what the provider registered.
	completeJob(t, job)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: providerv1alpha1.ReasonInitCompleted})
	if len(sp.Status.Resources) != 1 || sp.Status.Resources[0].Kind != "Widget" {
		t.Errorf("status.resources = %+v after the operator wrote its status, want the registered Widget", sp.Status.Resources)
	}
}

// TestClusterProviderServesItsClusters acts as a ClusterProvider's run
// ServiceAccount, as the operator grants it: it reads the ClusterProfiles,
// updates the Clusters in its own namespace (where the operator's profile
// provisioner creates the Clusters of its profiles) and reads and writes
// their kubeconfig Secrets there. It may not read the Secrets of the
// operator's namespace, which hold the admin kubeconfigs of other
// clusters, nor those of another provider's namespace, nor update a
// Cluster outside its namespace.
func TestClusterProviderServesItsClusters(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ctx := t.Context()
	cp := &providerv1alpha1.ClusterProvider{ObjectMeta: metav1.ObjectMeta{Name: "rbac-cp"}}
	cp.Spec.Image = "ghcr.io/openmcp-project/images/cluster-provider-kind:v0.6.0"
	create(t, cp)
	const ns, otherNS = "cp-rbac-cp", "cp-rbac-cp-other"
	waitForJob(t, ns, ns+"-init", 1, 1)
	run := as(t, ns, ns)

	// A Cluster of its profile with its kubeconfig Secret; the operator's
	// namespace and another provider's each hold a Cluster's admin
	// kubeconfig too.
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}})
	own := kubeconfigCluster(t, ns, "kcp-cluster")
	admin := kubeconfigCluster(t, operatorNamespace, "rbac-cp-mcp")
	foreign := kubeconfigCluster(t, otherNS, "foreign")

	eventually(t, "run of rbac-cp may patch the Clusters in its namespace", func(ctx context.Context) (bool, string, error) {
		err := run.Patch(ctx, own.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"clusters.openmcp.cloud/provider":"rbac-cp"}}}`)))
		return err == nil, fmt.Sprint(err), nil
	})
	checkForbidden(t, "run: list ClusterProfiles", run.List(ctx, &clustersv1alpha1.ClusterProfileList{}), false)
	checkForbidden(t, "run: watch Clusters", watchClusters(t, ns), false)
	checkForbidden(t, "run: update a Cluster in its namespace", run.Update(ctx, getCluster(t, own)), false)
	checkForbidden(t, "run: get its Cluster's kubeconfig Secret", run.Get(ctx, secretKey(own), &corev1.Secret{}), false)
	checkForbidden(t, "run: update its Cluster's kubeconfig Secret", run.Update(ctx, getSecret(t, own)), false)

	for _, cl := range []*clustersv1alpha1.Cluster{admin, foreign} {
		checkForbidden(t, "run: get the kubeconfig Secret of Cluster "+cl.Namespace+"/"+cl.Name, run.Get(ctx, secretKey(cl), &corev1.Secret{}), true)
		checkForbidden(t, "run: list Secrets in "+cl.Namespace, run.List(ctx, &corev1.SecretList{}, client.InNamespace(cl.Namespace)), true)
		checkForbidden(t, "run: patch Cluster "+cl.Namespace+"/"+cl.Name,
			run.Patch(ctx, cl.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"clusters.marketplane.io/kubeconfig-secret":"planted"}}}`))), true)
	}
	checkForbidden(t, "run: create a Cluster in its namespace", run.Create(ctx, &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self-made"}, Spec: own.Spec}, client.DryRunAll), true)
	checkForbidden(t, "run: delete a Cluster in its namespace", run.Delete(ctx, own.DeepCopy(), client.DryRunAll), true)
	checkForbidden(t, "run: write ClusterProfiles", run.Create(ctx, &clustersv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "rbac-cp-profile"}}, client.DryRunAll), true)
}

// kubeconfigCluster creates a Cluster in ns and its kubeconfig Secret
// beside it, as a ClusterProvider writes it.
func kubeconfigCluster(t *testing.T, ns, name string) *clustersv1alpha1.Cluster {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": []byte("admin credentials of " + name)}}
	create(t, secret)
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"clusters.marketplane.io/kubeconfig-secret": secret.Name}},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "rbac-cp", Purposes: []string{clustersv1alpha1.PurposeMCP}, Tenancy: clustersv1alpha1.TenancyExclusive},
	}
	create(t, cl)
	return cl
}

func secretKey(cl *clustersv1alpha1.Cluster) client.ObjectKey {
	return client.ObjectKey{Namespace: cl.Namespace, Name: cl.Annotations["clusters.marketplane.io/kubeconfig-secret"]}
}

func getCluster(t *testing.T, cl *clustersv1alpha1.Cluster) *clustersv1alpha1.Cluster {
	t.Helper()
	cur := &clustersv1alpha1.Cluster{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(cl), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

func getSecret(t *testing.T, cl *clustersv1alpha1.Cluster) *corev1.Secret {
	t.Helper()
	cur := &corev1.Secret{}
	if err := k8s.Get(t.Context(), secretKey(cl), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

// watchClusters opens and closes a watch of all Clusters as the run
// ServiceAccount of the ClusterProvider whose namespace is ns.
func watchClusters(t *testing.T, ns string) error {
	t.Helper()
	cfg := rest.CopyConfig(platform.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + ns}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: platform.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(t.Context(), &clustersv1alpha1.ClusterList{})
	if err == nil {
		w.Stop()
	}
	return err
}

// as returns a client that impersonates a service account.
func as(t *testing.T, ns, sa string) client.Client {
	t.Helper()
	return platform.ActAs(t, ns, sa)
}

func accessRequest(ns string) *clustersv1alpha1.AccessRequest {
	return &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "onboarding"}}
}

// crd is a cluster-scoped CRD of the test group.
func crd(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + testGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: testGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true),
				}},
			}},
		},
	}
}

// createCRD installs a CRD of the test group and waits until it serves.
func createCRD(t *testing.T, plural, kind string) {
	t.Helper()
	c := crd(plural, kind)
	create(t, c)
	eventually(t, "CRD "+c.Name+" established", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "not established", nil
	})
}

// TestSecretsClusterWide: a provider's run ServiceAccount reads Secrets
// only in its own namespace, unless the platform operator opts in with
// spec.accessPolicy.secrets: ClusterWide (openMCP's
// opencontrolplane-runtime watches Secrets in every namespace); taking the
// opt-in back takes the right back.
func TestSecretsClusterWide(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	sp := serviceProvider("secrets-wide", nil)
	create(t, sp)
	run := as(t, "sp-secrets-wide", "sp-secrets-wide")
	cfg := rest.CopyConfig(platform.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:sp-secrets-wide:sp-secrets-wide"}
	watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: platform.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	listSecrets := func(ctx context.Context, opts ...client.ListOption) error {
		return run.List(ctx, &corev1.SecretList{}, opts...)
	}
	eventually(t, "run of secrets-wide may list Secrets in its own namespace", func(ctx context.Context) (bool, string, error) {
		err := listSecrets(ctx, client.InNamespace("sp-secrets-wide"))
		return err == nil, fmt.Sprint(err), nil
	})
	checkForbidden(t, "run without opt-in: list Secrets in another namespace", listSecrets(t.Context(), client.InNamespace(operatorNamespace)), true)
	checkForbidden(t, "run without opt-in: list Secrets in all namespaces", listSecrets(t.Context()), true)

	setSecrets := func(v providerv1alpha1.SecretAccess) {
		t.Helper()
		// The operator writes the provider's status meanwhile: retry
		// the read-modify-write on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &providerv1alpha1.ServiceProvider{}
			if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(sp), cur); err != nil {
				return err
			}
			cur.Spec.AccessPolicy = &providerv1alpha1.AccessPolicy{Secrets: v}
			return k8s.Update(t.Context(), cur)
		})
		if err != nil {
			t.Fatalf("set spec.accessPolicy.secrets=%q: %v", v, err)
		}
	}
	setSecrets(providerv1alpha1.SecretAccessClusterWide)
	eventually(t, "run of secrets-wide may list and watch Secrets in every namespace once opted in", func(ctx context.Context) (bool, string, error) {
		if err := listSecrets(ctx, client.InNamespace(operatorNamespace)); err != nil {
			return false, "list in the operator namespace: " + err.Error(), nil
		}
		if err := listSecrets(ctx); err != nil {
			return false, "list in all namespaces: " + err.Error(), nil
		}
		w, err := watcher.Watch(ctx, &corev1.SecretList{})
		if err != nil {
			return false, "watch in all namespaces: " + err.Error(), nil
		}
		w.Stop()
		return true, "", nil
	})
	checkForbidden(t, "run opted in: still no writes of Secrets elsewhere",
		run.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "planted"}}, client.DryRunAll), true)

	setSecrets(providerv1alpha1.SecretAccessOwnNamespace)
	eventually(t, "run of secrets-wide may no longer list Secrets in all namespaces after the opt-in is taken back", func(ctx context.Context) (bool, string, error) {
		err := listSecrets(ctx)
		return apierrors.IsForbidden(err), fmt.Sprint(err), nil
	})

	// An unknown value is refused by the API server, naming the field. A
	// merge patch, without a resourceVersion: the operator writes the
	// object too, and a conflict would hide the answer.
	cur := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: sp.Name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"accessPolicy":{"secrets":"Everywhere"}}}`))
	if err := k8s.Patch(t.Context(), cur, patch); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.accessPolicy.secrets") {
		t.Errorf("spec.accessPolicy.secrets=Everywhere: got %v, want Invalid naming the field", err)
	}
}
