package compat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess"

	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/validation"
	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
	"github.com/marketplane/marketplane/test/openmcp-compat/internal/app"
	"github.com/marketplane/marketplane/test/openmcp-compat/internal/controller"
)

// validateGrant is the grant docs/openmcp-compat.md shows for openMCP's
// template, whose requests this provider makes.
const validateGrant = `
  accessPolicy:
    secrets: ClusterWide
    onboarding:
    - apiGroups: [apiextensions.k8s.io]
      resources: [customresourcedefinitions]
      verbs: ["*"]
    mcp:
    - apiGroups: ["*"]
      resources: ["*"]
      verbs: ["*"]
    workload:
    - apiGroups: ["*"]
      resources: ["*"]
      verbs: ["*"]
    roleRefs:
      mcp: [cluster-admin]
      workload: [cluster-admin]
`

// manifests are what the validation flow deploys: the ServiceProvider
// named provider with the image and then spec (indented YAML lines), its
// ProviderConfig, a ControlPlane (openMCP's own kind) tenant-<t> in
// namespace team-<t> and the tenant's Echo, named like the ControlPlane.
func manifests(provider, spec, t string) string {
	return `apiVersion: openmcp.cloud/v1alpha1
kind: ServiceProvider
metadata:
  name: ` + provider + `
spec:
  image: ` + providerImage + spec + `
---
apiVersion: echo.services.open-control-plane.io/v1alpha1
kind: ProviderConfig
metadata:
  name: ` + provider + `
spec:
  pollInterval: 10s
---
apiVersion: core.open-control-plane.io/v2alpha1
kind: ControlPlane
metadata:
  name: tenant-` + t + `
  namespace: team-` + t + `
---
apiVersion: echo.services.open-control-plane.io/v1alpha1
kind: Echo
metadata:
  name: tenant-` + t + `
  namespace: team-` + t + `
spec:
  message: hello tenant-` + t + `
`
}

// validateManifests deploy the provider in the template's shape with the
// template's grant.
var validateManifests = manifests(providerName, validateGrant, "a")

// TestValidate runs the compatibility provider, written only on openMCP's
// libraries, through Marketplane's validation flow on an in-process
// landscape of its own, with a check of its DomainServiceAPI, the Greeting
// API, in the tenant's ControlPlane.
func TestValidate(t *testing.T) {
	if testing.Short() {
		t.Skip("deploys a provider on a landscape of API servers; run without -short")
	}
	spec := specOf(t, validateManifests)
	validation.Validate(t, spec, providertest.InProcess(), validation.WithCheck(checkGreetingAPI), validation.WithTimeout(timeout))
}

// TestValidateWithoutGrant: without the platform operator's grant, the
// provider's init asks for CRDs with verbs "*" on the onboarding cluster,
// is denied, logs it and exits 0, as openMCP's template does. The
// validation flow fails at provider-init and names the AccessRequest and
// the rule that refused it.
func TestValidateWithoutGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("deploys a provider on a landscape of API servers; run without -short")
	}
	manifests := strings.Replace(validateManifests, validateGrant, "", 1)
	if manifests == validateManifests {
		t.Fatal("the manifests hold no grant to remove")
	}
	spec := specOf(t, manifests)
	rep := validation.Run(t.Context(), spec, providertest.InProcess(), validation.WithTimeout(timeout))
	var init *validation.Step
	for i := range rep.Steps {
		if rep.Steps[i].ID == validation.StepProviderInit {
			init = &rep.Steps[i]
		}
	}
	want := []string{
		"init exited 0, but the operator denied its request",
		// The template names its onboarding requests after its API group.
		"AccessRequest sp-" + providerName + "/" + clusteraccess.StableRequestNameFromLocalName(v1alpha1.GroupVersion.Group, "onboarding-init") + " Denied (PolicyViolation)",
		`rule "permissions within the ceiling"`,
	}
	if rep.Passed || init == nil || init.Result != validation.ResultFailed {
		t.Fatalf("report passed=%v, provider-init %+v; want provider-init failed", rep.Passed, init)
	}
	for _, w := range want {
		if !strings.Contains(init.Message, w) {
			t.Errorf("provider-init message %q does not say %q", init.Message, w)
		}
	}
}

// veleroGrant is the grant docs/openmcp-compat.md shows for openMCP's
// Velero provider, whose requests this provider makes with
// COMPAT_PROVIDER_SHAPE=velero.
const veleroGrant = `
  accessPolicy:
    onboarding:
    - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
    mcp:
    - {apiGroups: [""], resources: [namespaces, serviceaccounts], verbs: ["*"]}
    - {apiGroups: [""], resources: [serviceaccounts/token], verbs: [create]}
    - {apiGroups: [apiextensions.k8s.io], resources: [customresourcedefinitions], verbs: ["*"]}
    - {apiGroups: [apps], resources: [deployments], verbs: ["*"]}
    - {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles, clusterrolebindings], verbs: ["*"]}
    workload:
    - {apiGroups: [""], resources: [namespaces, secrets, serviceaccounts], verbs: ["*"]}
    - {apiGroups: [apps], resources: [deployments], verbs: ["*"]}
    - {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles, clusterrolebindings], verbs: ["*"]}
`

// veleroManifests deploy the provider in Velero's shape: its
// ServiceProvider named velero, as Velero's requests are labelled, with
// exactly Velero's grant.
var veleroManifests = manifests(app.VeleroControllerName, `
  env:
  - name: `+app.EnvShape+`
    value: `+app.ShapeVelero+veleroGrant, "v")

// TestValidateVelero runs the provider in the shape of openMCP's Velero
// provider (everything on onboarding for init and run, the non-advanced
// clusteraccess reconciler with Velero's explicit rules on the control
// plane and the workload cluster, a server identity bound to cluster-admin
// in the control plane) through the validation flow with the grant
// docs/openmcp-compat.md shows for Velero.
func TestValidateVelero(t *testing.T) {
	if testing.Short() {
		t.Skip("deploys a provider on a landscape of API servers; run without -short")
	}
	spec := specOf(t, veleroManifests)
	validation.Validate(t, spec, providertest.InProcess(), validation.WithCheck(checkAsVelero), validation.WithTimeout(timeout))
}

// checkAsVelero checks what the Velero-shaped provider did for the
// tenant's Echo: the Greeting API in the ControlPlane, usable by the
// tenant; its server's ServiceAccount there bound to cluster-admin; on the
// workload cluster the Echo's Secret and a token of that ServiceAccount
// which the control plane accepts as the server's.
func checkAsVelero(ctx context.Context, env validation.CheckEnv) error {
	cp := env.ControlPlane
	if cp == nil || len(env.Services) != 1 || env.Workload == nil {
		return errors.New("want a control plane, the Echo and a workload cluster")
	}
	echo := env.Services[0]
	message, _, _ := unstructured.NestedString(echo.Object, "spec", "message")
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: controller.GreetingCRDName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return fmt.Errorf("get CRD %s in the control plane: %w", controller.GreetingCRDName, err)
	}
	if err := cp.Client.Create(ctx, greeting("from-the-check", "hi")); err != nil {
		return fmt.Errorf("create a Greeting as the tenant: %w", err)
	}
	crb := &rbacv1.ClusterRoleBinding{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: controller.ServerName}, crb); err != nil {
		return fmt.Errorf("get the server's ClusterRoleBinding in the control plane: %w", err)
	}
	if crb.RoleRef.Name != "cluster-admin" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != controller.ServerName {
		return fmt.Errorf("ClusterRoleBinding %s binds %v to %s, want ServiceAccount %s to cluster-admin", crb.Name, crb.Subjects, crb.RoleRef.Name, controller.ServerName)
	}

	ns := controller.WorkloadNamespace(echo.GetNamespace(), echo.GetName())
	secret := &corev1.Secret{}
	if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.GreetingSecret}, secret); err != nil {
		return fmt.Errorf("get the Echo's Secret on the workload cluster: %w", err)
	}
	if got := string(secret.Data["message"]); got != message {
		return fmt.Errorf("Secret %s/%s on the workload cluster says %q, want %q", ns, secret.Name, got, message)
	}
	if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.ServerTokenSecret}, secret); err != nil {
		return fmt.Errorf("get the server's token on the workload cluster: %w", err)
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(secret.Data["token"])}}
	if err := cp.Client.Create(ctx, review); err != nil {
		return fmt.Errorf("review the server's token in the control plane: %w", err)
	}
	if want := "system:serviceaccount:" + controller.ServerNamespace + ":" + controller.ServerName; !review.Status.Authenticated || review.Status.User.Username != want {
		return fmt.Errorf("the control plane takes the server's token for %q (authenticated %v), want %s", review.Status.User.Username, review.Status.Authenticated, want)
	}
	fmt.Fprintf(env.Out, "%s %s/%s serves CRD %s; ServiceAccount %s/%s is cluster-admin there; workload Secret %s/%s says %q; its token is accepted\n",
		cp.Kind, cp.Namespace, cp.Name, controller.GreetingCRDName, controller.ServerNamespace, controller.ServerName, ns, controller.GreetingSecret, message)
	return nil
}

// specOf returns the validation spec of manifests, with the provider's
// image run from the binary TestMain built.
func specOf(t *testing.T, manifests string) validation.Spec {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := validation.SpecFromFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	spec.Images = map[string]string{providerImage: binary}
	return spec
}

// checkGreetingAPI checks what the provider did for the tenant's Echo:
// the Greeting CRD in the ControlPlane with the Greeting that carries the
// Echo's message, a Greeting the tenant creates with their own kubeconfig,
// and the Echo's ConfigMap on the workload cluster.
func checkGreetingAPI(ctx context.Context, env validation.CheckEnv) error {
	cp := env.ControlPlane
	if cp == nil {
		return errors.New("the flow created no control plane")
	}
	if cp.Kind != "ControlPlane" {
		return fmt.Errorf("the control plane is a %s, want the ControlPlane of the manifests", cp.Kind)
	}
	if len(env.Services) != 1 {
		return fmt.Errorf("%d service objects, want the Echo", len(env.Services))
	}
	message, _, _ := unstructured.NestedString(env.Services[0].Object, "spec", "message")

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: controller.GreetingCRDName}, crd); err != nil {
		return fmt.Errorf("get CRD %s in the control plane: %w", controller.GreetingCRDName, err)
	}
	welcome := greeting(controller.GreetingName, "")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(welcome), welcome); err != nil {
		return fmt.Errorf("get the provider's Greeting %s/%s: %w", welcome.GetNamespace(), welcome.GetName(), err)
	}
	if got, _, _ := unstructured.NestedString(welcome.Object, "spec", "message"); got != message {
		return fmt.Errorf("Greeting %s/%s says %q, want the Echo's message %q", welcome.GetNamespace(), welcome.GetName(), got, message)
	}
	own := greeting("from-the-check", "hi")
	if err := cp.Client.Create(ctx, own); err != nil {
		return fmt.Errorf("create a Greeting as the tenant: %w", err)
	}
	fmt.Fprintf(env.Out, "%s %s/%s serves CRD %s: Greeting %s/%s says %q; created Greeting %s/%s\n",
		cp.Kind, cp.Namespace, cp.Name, crd.Name, welcome.GetNamespace(), welcome.GetName(), message, own.GetNamespace(), own.GetName())

	if env.Workload == nil {
		return errors.New("no workload cluster")
	}
	echo := env.Services[0]
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: controller.WorkloadNamespace(echo.GetNamespace(), echo.GetName()), Name: "greeting"}
	if err := env.Workload.Get(ctx, key, cm); err != nil {
		return fmt.Errorf("get ConfigMap %s on the workload cluster: %w", key, err)
	}
	if cm.Data["message"] != message {
		return fmt.Errorf("ConfigMap %s on the workload cluster says %q, want %q", key, cm.Data["message"], message)
	}
	fmt.Fprintf(env.Out, "workload cluster: ConfigMap %s says %q\n", key, message)
	return nil
}

// greeting is a Greeting in controller.GreetingNamespace with spec.message
// message (none when empty).
func greeting(name, message string) *unstructured.Unstructured {
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Greeting"))
	g.SetNamespace(controller.GreetingNamespace)
	g.SetName(name)
	if message != "" {
		g.Object["spec"] = map[string]any{"message": message}
	}
	return g
}
