package interoperator_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/manifests"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// The sample catalog's ids (examples/catalog).
const (
	sampleServiceID = "3c8ac0a4-4e0b-4bb4-9a31-5d2f0e6b7a10"
	samplePlanSmall = "8f0c6f36-2b71-4c65-8a7e-2a4f7c1d9b20"
	samplePlanHelm  = "5e2b8d41-93c6-4f07-b1d8-7c3a9e0f4d30"
	sampleDir       = "../../examples/catalog"
)

// holdFinalizer keeps a deleted instance around, as the broker's finalizer
// does, so that the test can see its final state.
const holdFinalizer = "test.marketplane.io/hold"

// applySampleCatalog creates the sample catalog in the env's catalog
// namespace ("interoperator", as the sample's files say), with the Helm
// chart in the ConfigMap the helm plan names.
func applySampleCatalog(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	for _, file := range []string{"service.yaml", "plan-small.yaml", "plan-helm.yaml"} {
		data, err := os.ReadFile(filepath.Join(sampleDir, file))
		must(t, err)
		objs, err := manifests.Decode(data)
		must(t, err)
		for _, o := range objs {
			if o.GetNamespace() != e.catalog {
				t.Fatalf("%s: namespace %q, want the catalog namespace %q", file, o.GetNamespace(), e.catalog)
			}
			must(t, platform.Client.Create(ctx, o))
		}
	}
	cm, err := catalog.ChartConfigMap(filepath.Join(sampleDir, "charts", "namespace-quota"), e.catalog, "namespace-quota-chart")
	must(t, err)
	must(t, platform.Client.Create(ctx, cm))
	for _, name := range []string{"kubernetes-namespace-small", "kubernetes-namespace-medium-helm"} {
		waitFor(t, "plan "+name+" Ready", func() bool {
			p := &osbv1alpha1.SFPlan{}
			must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: name}, p))
			c := readyCondition(p.Status.Conditions)
			return c != nil && c.Status == metav1.ConditionTrue && p.Status.SpecHash != ""
		})
	}
}

// credentials is the bind response of the sample plan.
type credentials struct {
	Credentials struct {
		APIServer string `json:"apiServer"`
		CAData    string `json:"caData"`
		Token     string `json:"token"`
		Namespace string `json:"namespace"`
	} `json:"credentials"`
}

// TestSampleCatalog provisions, binds, unbinds and deprovisions the sample
// plan "small", and shows that the bind credentials work in the instance's
// namespace only.
func TestSampleCatalog(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{catalog: "interoperator"})
	applySampleCatalog(t, e)
	ctx := context.Background()

	// Provision, with parameters for the quota.
	const id = "6f1e2d3c-0000-4000-8000-00000000a001"
	e.createInstance(t, id, sampleServiceID, samplePlanSmall, map[string]any{"cpu": "3", "memory": "5Gi", "pods": 7},
		func(i *osbv1alpha1.SFServiceInstance) { controllerutil.AddFinalizer(i, holdFinalizer) })
	inst := e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
	instanceID := provisioner.InstanceID(e.ns, id)
	ns := "sf-" + instanceID
	if inst.Spec.ClusterID != "target" {
		t.Errorf("spec.clusterId = %q, want the only SFCluster, target", inst.Spec.ClusterID)
	}
	if c := readyCondition(inst.Status.Conditions); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
	if inst.Status.Description != "Namespace "+ns+" is ready" {
		t.Errorf("description = %q, want the status template's response", inst.Status.Description)
	}
	credsNS := credentialsNamespace(instanceID)
	wantResources := []osbv1alpha1.Source{
		{APIVersion: "v1", Kind: "Namespace", Name: ns},
		{APIVersion: "v1", Kind: "ResourceQuota", Name: "quota", Namespace: ns},
		{APIVersion: "v1", Kind: "Namespace", Name: credsNS},
	}
	if !sameSources(inst.Status.Resources, wantResources) {
		t.Errorf("status.resources = %+v, want %+v", inst.Status.Resources, wantResources)
	}
	quota := &corev1.ResourceQuota{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quota"}, quota))
	for res, want := range map[corev1.ResourceName]string{"requests.cpu": "3", "requests.memory": "5Gi", "pods": "7"} {
		if got := quota.Spec.Hard[res]; got.String() != want {
			t.Errorf("quota %s = %s, want %s (from the parameters)", res, got.String(), want)
		}
	}
	if quota.Labels[provisioner.LabelInstanceID] != instanceID || quota.Labels[provisioner.LabelInstanceUID] != string(inst.UID) {
		t.Errorf("quota labels = %v, want %s=%s and %s=%s", quota.Labels, provisioner.LabelInstanceID, instanceID, provisioner.LabelInstanceUID, inst.UID)
	}

	// Bind: the token Secret is filled by the token controller; until
	// then the status template says "in progress".
	const bid = "7a2b3c4d-0000-4000-8000-00000000b001"
	e.createBinding(t, bid, inst)
	b := e.waitBinding(t, bid, osbv1alpha1.StateSucceeded)
	if b.Status.Response == nil || b.Status.Response.SecretRef != "sf-"+bid {
		t.Fatalf("status.response = %+v, want secretRef sf-%s", b.Status.Response, bid)
	}
	secret := &corev1.Secret{}
	must(t, onboarding.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: b.Status.Response.SecretRef}, secret))
	if !metav1.IsControlledBy(secret, b) {
		t.Errorf("the response Secret is not owned by the binding: %+v", secret.OwnerReferences)
	}
	var creds credentials
	must(t, json.Unmarshal(secret.Data[osbv1alpha1.BindingSecretResponseKey], &creds))
	c := creds.Credentials
	wantServer := strings.TrimSuffix(target.Config.Host, "/")
	if c.Token == "" || c.Namespace != ns || strings.TrimSuffix(c.APIServer, "/") != wantServer || c.CAData == "" {
		t.Fatalf("credentials: apiServer=%q namespace=%q token set=%v caData set=%v; want %q, %q, a token and a CA",
			c.APIServer, c.Namespace, c.Token != "", c.CAData != "", wantServer, ns)
	}

	// The credentials never show in status, events or logs.
	for what, text := range map[string]string{
		"binding status":  mustJSON(t, b.Status),
		"instance status": mustJSON(t, e.instance(t, id).Status),
		"binding events":  strings.Join(e.events(t, bid), "\n"),
		"logs":            logs.String(),
	} {
		if strings.Contains(text, c.Token) {
			t.Errorf("the bind token appears in the %s", what)
		}
	}

	// The credentials work in the namespace, and nowhere else.
	tenant := tenantClient(t, c.APIServer, c.CAData, c.Token)
	must(t, tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"}, Data: map[string]string{"k": "v"}}))
	cms := &corev1.ConfigMapList{}
	must(t, tenant.List(ctx, cms, client.InNamespace(ns)))
	if err := tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("listing ConfigMaps in another namespace: %v, want Forbidden", err)
	}
	if err := tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "intruder"}}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a ConfigMap in another namespace: %v, want Forbidden", err)
	}
	if err := tenant.List(ctx, &corev1.NamespaceList{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing namespaces (cluster-scoped): %v, want Forbidden", err)
	}
	if err := tenant.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting the namespace's quota: %v, want Forbidden", err)
	}

	// Unbind: the service account and its token go, and the token stops
	// working.
	saName := "binding-" + bid
	deleteAndWait(t, onboarding.Client, b)
	waitGone(t, target.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: saName}})
	waitGone(t, target.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: saName + "-token"}})
	waitGone(t, target.Client, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName}})
	waitGone(t, onboarding.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "sf-" + bid}})
	waitFor(t, "the unbound token to be rejected", func() bool {
		return apierrors.IsUnauthorized(tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
	})

	// Deprovision: everything recorded goes; the state is succeeded
	// before the instance itself goes.
	must(t, onboarding.Client.Delete(ctx, e.instance(t, id)))
	waitFor(t, "deprovision to succeed", func() bool {
		i := e.instance(t, id)
		return i != nil && i.Status.State == osbv1alpha1.StateSucceeded && len(i.Status.Resources) == 0 &&
			!controllerutil.ContainsFinalizer(i, finalizerOf(t))
	})
	for _, r := range wantResources {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(r.APIVersion)
		u.SetKind(r.Kind)
		u.SetNamespace(r.Namespace)
		u.SetName(r.Name)
		if err := target.Client.Get(ctx, client.ObjectKeyFromObject(u), u); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s still exists after deprovision (%v)", r.Kind, r.Name, err)
		}
	}
	release(t, e, id)
}

// TestSampleCatalogHelm provisions and deprovisions the sample's Helm plan,
// whose chart comes from a ConfigMap.
func TestSampleCatalogHelm(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{catalog: "interoperator-helm"})
	ctx := context.Background()
	// The sample names the catalog namespace "interoperator"; this test
	// runs beside TestSampleCatalog in a namespace of its own.
	createSampleObjects(t, e, func(o *unstructured.Unstructured) {
		if o.GetKind() == "SFPlan" {
			templates, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
			tmpl := templates[0].(map[string]any)
			tmpl["url"] = strings.Replace(tmpl["url"].(string), "configmap://interoperator/", "configmap://"+e.catalog+"/", 1)
			must(t, unstructured.SetNestedSlice(o.Object, templates, "spec", "templates"))
		}
	}, "service.yaml", "plan-helm.yaml")
	cm, err := catalog.ChartConfigMap(filepath.Join(sampleDir, "charts", "namespace-quota"), e.catalog, "namespace-quota-chart")
	must(t, err)
	must(t, platform.Client.Create(ctx, cm))

	const id = "6f1e2d3c-0000-4000-8000-00000000a002"
	e.createInstance(t, id, sampleServiceID, samplePlanHelm, map[string]any{"cpu": "6"},
		func(i *osbv1alpha1.SFServiceInstance) { controllerutil.AddFinalizer(i, holdFinalizer) })
	inst := e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
	ns := "sf-" + provisioner.InstanceID(e.ns, id)
	quota := &corev1.ResourceQuota{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quota"}, quota))
	if got := quota.Spec.Hard["requests.cpu"]; got.String() != "6" {
		t.Errorf("quota requests.cpu = %s, want 6 (from the parameters)", got.String())
	}
	if got := quota.Spec.Hard["requests.memory"]; got.String() != "8Gi" {
		t.Errorf("quota requests.memory = %s, want the default 8Gi", got.String())
	}
	lr := &corev1.LimitRange{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "defaults"}, lr))
	if lr.Labels["app.kubernetes.io/instance"] == "" || lr.Labels[provisioner.LabelInstanceUID] != string(inst.UID) {
		t.Errorf("LimitRange labels = %v, want the chart's and the instance's", lr.Labels)
	}
	if len(inst.Status.Resources) != 3 {
		t.Errorf("status.resources = %+v, want the chart's Namespace, ResourceQuota and LimitRange", inst.Status.Resources)
	}
	must(t, onboarding.Client.Delete(ctx, inst))
	waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
	release(t, e, id)
}

// createSampleObjects creates the objects of the sample catalog's files in
// the env's catalog namespace (the files name "interoperator", which
// TestSampleCatalog uses), each changed by mutate first when it is set.
func createSampleObjects(t *testing.T, e *env, mutate func(*unstructured.Unstructured), files ...string) {
	t.Helper()
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(sampleDir, file))
		must(t, err)
		objs, err := manifests.Decode(data)
		must(t, err)
		for _, o := range objs {
			o.SetNamespace(e.catalog)
			if mutate != nil {
				mutate(o)
			}
			must(t, platform.Client.Create(context.Background(), o))
		}
	}
}

// release removes the test's hold on a deleted instance and waits until it
// is gone.
func release(t *testing.T, e *env, id string) {
	t.Helper()
	inst := e.instance(t, id)
	if inst == nil {
		return
	}
	// A merge patch replaces the whole finalizer list: without the
	// optimistic lock it would put back the runtime's finalizer if the
	// runtime removed it meanwhile, which the API server refuses on an
	// object being deleted. Re-read and retry on conflict instead.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := onboarding.Client.Get(context.Background(), client.ObjectKeyFromObject(inst), inst); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !controllerutil.ContainsFinalizer(inst, holdFinalizer) {
			return nil
		}
		patch := client.MergeFromWithOptions(inst.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(inst, holdFinalizer)
		return client.IgnoreNotFound(onboarding.Client.Patch(context.Background(), inst, patch))
	}))
	waitGone(t, onboarding.Client, inst)
}

// finalizerOf is the provisioner's finalizer on instances (the runtime's,
// named after the API group).
func finalizerOf(*testing.T) string { return osbv1alpha1.GroupVersion.Group + "/finalizer" }

// tenantClient returns a client that authenticates with a bind token.
func tenantClient(t *testing.T, server, caData, token string) client.Client {
	t.Helper()
	ca, err := base64.StdEncoding.DecodeString(caData)
	must(t, err)
	c, err := client.New(&rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, client.Options{Scheme: scheme})
	must(t, err)
	return c
}

func sameSources(got, want []osbv1alpha1.Source) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

// credentialsNamespace is the sample plan's namespace of an instance's
// binding service accounts and their tokens: sfb- and the first 40 hex
// digits of the SHA-256 of the instance's id (provisioner.InstanceID).
func credentialsNamespace(instanceID string) string {
	sum := sha256.Sum256([]byte(instanceID))
	return "sfb-" + hex.EncodeToString(sum[:])[:40]
}
