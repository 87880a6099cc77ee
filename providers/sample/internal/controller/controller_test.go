package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/testenv"

	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
	"github.com/marketplane/marketplane/providers/sample/internal/controller"
)

// userObject is an object of the DomainServiceAPI, as a tenant creates it
// in their MCP cluster.
func userObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(controller.DomainGroupVersion.WithKind(controller.DomainKind))
	u.SetNamespace("default")
	u.SetName(name)
	u.Object["spec"] = map[string]any{"note": "created by the tenant"}
	return u
}

// TestGoesReady: a Sample goes Ready, its DomainServiceAPI is served in the
// tenant's MCP cluster and usable by the tenant, the provider got there
// through its own AccessRequest with no more rights than MCPPermissions,
// and Observe agrees with what CreateOrUpdate made.
func TestGoesReady(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1", "v2")
	mcp := p.createMCP(t)
	p.create(t, "")
	obj := p.waitReady(t)

	if want := apiv1alpha1.GroupVersion.Group + "/finalizer"; !slices.Contains(obj.Finalizers, want) {
		t.Errorf("finalizers = %v, want %s", obj.Finalizers, want)
	}
	crd := domainCRD(t, mcp)
	if crd == nil {
		t.Fatalf("the Sample is Ready but the CRD %s is not in the MCP cluster", controller.DomainCRDName)
	}
	if got := crd.Annotations[controller.VersionAnnotation]; got != "v1" {
		t.Errorf("CRD annotation %s = %q, want the ProviderConfig's default v1", controller.VersionAnnotation, got)
	}
	if got := crd.Labels[controller.ManagedByLabel]; got != p.name {
		t.Errorf("CRD label %s = %q, want %q", controller.ManagedByLabel, got, p.name)
	}
	if ars := p.accessRequests(t); len(ars) != 1 {
		t.Errorf("AccessRequests of the provider for the MCP: %v, want one", ars)
	}

	ctx := context.Background()
	// The tenant uses the DomainServiceAPI.
	mine := userObject("first")
	if err := mcp.Client.Create(ctx, mine); err != nil {
		t.Fatalf("the tenant cannot create a %s: %v", controller.DomainKind, err)
	}
	if err := mcp.Client.Delete(ctx, mine); err != nil {
		t.Fatalf("delete the tenant's %s: %v", controller.DomainKind, err)
	}

	// The provider's own credentials allow what MCPPermissions lists and
	// nothing else.
	pc := p.mcpClientOfProvider(t)
	if err := pc.Get(ctx, client.ObjectKey{Name: controller.DomainCRDName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the provider cannot read its own CRD: %v", err)
	}
	if err := pc.Get(ctx, client.ObjectKey{Name: "others.example.com"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading another CRD: want Forbidden, got %v", err)
	}
	if err := pc.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "SecretList"}}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets in the MCP cluster: want Forbidden, got %v", err)
	}

	// What CreateOrUpdate made is what Observe wants: otherwise every poll
	// would update it and report drift.
	cfg := &apiv1alpha1.ProviderConfig{}
	if err := platformC.Get(ctx, client.ObjectKey{Name: p.name}, cfg); err != nil {
		t.Fatal(err)
	}
	clusters := spruntime.ClusterContext{MCPCluster: spruntime.NewCluster("mcp", mcp.Admin.Config, mcp.Admin.Client)}
	clusters.WorkloadCluster = spruntime.NewCluster("workload", landscape.Workload.Config, landscape.Workload.Client)
	obs, err := controller.NewReconciler(p.name, platformC, p.namespace).Observe(ctx, obj, cfg, clusters)
	if err != nil || !obs.Exists || !obs.UpToDate {
		t.Errorf("Observe after Ready = %+v, %v; want existing and up to date", obs, err)
	}

	ns := &corev1.Namespace{}
	if err := landscape.Workload.Client.Get(ctx, client.ObjectKey{Name: controller.WorkloadNamespace(p.name, obj)}, ns); err != nil {
		t.Fatalf("the workload namespace: %v", err)
	}
	if got := ns.Annotations[controller.OwnerAnnotation]; got != p.tenant+"/"+mcpName {
		t.Errorf("workload namespace annotation %s = %q, want %q", controller.OwnerAnnotation, got, p.tenant+"/"+mcpName)
	}
	if got := ns.Labels[controller.OwnerUIDLabel]; got != string(obj.UID) {
		t.Errorf("workload namespace label %s = %q, want the Sample's UID %s", controller.OwnerUIDLabel, got, obj.UID)
	}
}

// TestProviderConfigChange: a change of the ProviderConfig reconciles the
// Sample at once (not at the next poll, a minute later): the new default
// version reaches the CRD.
func TestProviderConfigChange(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1")
	mcp := p.createMCP(t)
	p.create(t, "")
	p.waitReady(t)
	waitCRD(t, mcp, "have version v1", func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd != nil && crd.Annotations[controller.VersionAnnotation] == "v1"
	})

	p.updateConfig(t, func(cfg *apiv1alpha1.ProviderConfig) { cfg.Spec.Versions = []string{"v2", "v1"} })
	waitCRD(t, mcp, "have the new default version v2", func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd != nil && crd.Annotations[controller.VersionAnnotation] == "v2"
	})
	p.waitReady(t)
}

// TestDriftIsRepaired: someone deletes the CRD in the MCP cluster; the next
// poll finds it missing, reports the drift and installs it again.
func TestDriftIsRepaired(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, time.Second, "v1")
	mcp := p.createMCP(t)
	p.create(t, "")
	p.waitReady(t)
	before := waitCRD(t, mcp, "exist", func(crd *apiextensionsv1.CustomResourceDefinition) bool { return crd != nil })

	if err := mcp.Admin.Client.Delete(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	waitCRD(t, mcp, "be installed again", func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd != nil && crd.UID != before.UID && crd.DeletionTimestamp.IsZero()
	})
	p.waitEvent(t, "Warning", spruntime.ReasonDriftDetected)
	p.waitReady(t)
}

// TestDeletionBlockedByUserObjects: while the tenant has objects of the
// DomainServiceAPI, deleting the Sample waits with DeletionBlocked
// (UserResourcesPresent) and leaves the CRD alone; once they are removed the
// CRD and the Sample go, and the provider's MCP access is released.
func TestDeletionBlockedByUserObjects(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1")
	mcp := p.createMCP(t)
	p.create(t, "")
	p.waitReady(t)
	ctx := context.Background()
	mine := userObject("precious")
	if err := mcp.Client.Create(ctx, mine); err != nil {
		t.Fatalf("create the tenant's %s: %v", controller.DomainKind, err)
	}

	p.delete(t)
	obj := p.waitObj(t, "have DeletionBlocked", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionDeletionBlocked, metav1.ConditionTrue, spruntime.ReasonUserResourcesPresent)
	})
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, spruntime.ConditionDeletionBlocked); !strings.Contains(c.Message, "default/precious") {
		t.Errorf("DeletionBlocked message %q does not name the tenant's object", c.Message)
	}
	if obj.Status.Phase != string(spruntime.PhaseTerminating) {
		t.Errorf("phase = %s, want %s", obj.Status.Phase, spruntime.PhaseTerminating)
	}
	if crd := domainCRD(t, mcp); crd == nil || !crd.DeletionTimestamp.IsZero() {
		t.Fatal("the CRD was deleted although the tenant still has objects of it")
	}
	if err := mcp.Client.Get(ctx, client.ObjectKeyFromObject(mine), userObject("precious")); err != nil {
		t.Fatalf("the tenant's object: %v", err)
	}

	if err := mcp.Client.Delete(ctx, mine); err != nil {
		t.Fatal(err)
	}
	p.waitGone(t)
	waitCRD(t, mcp, "be gone", func(crd *apiextensionsv1.CustomResourceDefinition) bool { return crd == nil })
	if !slices.Contains(p.events(t), "Normal/"+spruntime.ReasonDeletionUnblocked) {
		t.Errorf("no event of DeletionBlocked turning False; events: %v", p.events(t))
	}
	if ars := p.accessRequests(t); len(ars) != 0 {
		t.Errorf("AccessRequests left after deletion: %v", ars)
	}
}

// TestOrphanPolicy: with openmcp.cloud/deletion-policy: Orphan, deleting the
// Sample leaves the DomainServiceAPI in place and only releases the
// provider's access.
func TestOrphanPolicy(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1")
	mcp := p.createMCP(t)
	p.create(t, "")
	p.waitReady(t)

	p.update(t, func(obj *apiv1alpha1.Sample) {
		metav1.SetMetaDataAnnotation(&obj.ObjectMeta, spruntime.DeletionPolicyAnnotation, string(spruntime.DeletionPolicyOrphan))
	})
	p.delete(t)
	p.waitGone(t)
	if crd := domainCRD(t, mcp); crd == nil || !crd.DeletionTimestamp.IsZero() {
		t.Error("the CRD was deleted despite the Orphan policy")
	}
	if ars := p.accessRequests(t); len(ars) != 0 {
		t.Errorf("AccessRequests left after deletion: %v", ars)
	}
	if !slices.Contains(p.events(t), "Normal/"+spruntime.ReasonOrphaned) {
		t.Errorf("no Orphaned event; events: %v", p.events(t))
	}
}

// TestIgnoreAnnotation: openmcp.cloud/operation: ignore stops
// reconciliation, spec changes included; removing it resumes.
func TestIgnoreAnnotation(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1", "v2")
	mcp := p.createMCP(t)
	p.create(t, "v1")
	ready := p.waitReady(t)

	p.update(t, func(obj *apiv1alpha1.Sample) {
		metav1.SetMetaDataAnnotation(&obj.ObjectMeta, spruntime.OperationAnnotation, spruntime.OperationIgnore)
		obj.Spec.Version = "v2"
	})
	throughoutQuietPeriod(func() {
		if crd := domainCRD(t, mcp); crd == nil || crd.Annotations[controller.VersionAnnotation] != "v1" {
			t.Fatal("an ignored Sample was reconciled: its CRD changed")
		}
		if obj := p.get(t); obj.Status.ObservedGeneration != ready.Generation {
			t.Fatalf("an ignored Sample was reconciled: observedGeneration %d, was %d", obj.Status.ObservedGeneration, ready.Generation)
		}
	})

	p.update(t, func(obj *apiv1alpha1.Sample) { delete(obj.Annotations, spruntime.OperationAnnotation) })
	waitCRD(t, mcp, "have version v2", func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd != nil && crd.Annotations[controller.VersionAnnotation] == "v2"
	})
	p.waitReady(t)
}

// TestMissingProviderConfig: without a ProviderConfig the Sample says so in
// its conditions and waits, without a hot loop, until one is created.
func TestMissingProviderConfig(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createMCP(t)
	p.create(t, "")
	p.waitObj(t, "report the missing ProviderConfig", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonProviderConfigMissing) &&
			hasCondition(obj, spruntime.ConditionSynced, metav1.ConditionFalse, spruntime.ReasonProviderConfigMissing)
	})
	p.noHotLoop(t)

	p.createConfig(t, 0, "v1")
	p.waitReady(t)
}

// TestInvalidInput: a version the ProviderConfig does not offer is invalid
// user input: Ready=False (phase Failed) with reason UnsupportedVersion, no
// CRD, no hot loop; fixing the spec makes it Ready.
func TestInvalidInput(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1")
	mcp := p.createMCP(t)
	p.create(t, "v9")
	obj := p.waitObj(t, "report the unsupported version", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonUnsupportedVersion) &&
			hasCondition(obj, spruntime.ConditionSynced, metav1.ConditionFalse, controller.ReasonUnsupportedVersion)
	})
	if obj.Status.Phase != string(spruntime.PhaseFailed) {
		t.Errorf("phase = %s, want %s", obj.Status.Phase, spruntime.PhaseFailed)
	}
	p.noHotLoop(t)
	if domainCRD(t, mcp) != nil {
		t.Error("the CRD was installed for an unsupported version")
	}

	p.update(t, func(obj *apiv1alpha1.Sample) { obj.Spec.Version = "v1" })
	p.waitReady(t)
}

// TestManagedControlPlaneLifecycle: a Sample created before its
// ManagedControlPlane waits (MCPNotFound, no hot loop) and goes Ready when
// the ManagedControlPlane is created; when the ManagedControlPlane is
// deleted first, deleting the Sample still finishes and releases the
// provider's access.
func TestManagedControlPlaneLifecycle(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1")
	p.create(t, "")
	p.waitObj(t, "report the missing ManagedControlPlane", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, clusteraccess.ReasonMCPNotFound)
	})
	p.noHotLoop(t)

	mcp := p.createMCP(t)
	p.waitReady(t)
	waitCRD(t, mcp, "exist", func(crd *apiextensionsv1.CustomResourceDefinition) bool { return crd != nil })

	landscape.DeleteMCP(t, mcp.Name, mcp.Namespace)
	p.delete(t)
	p.waitGone(t)
	if ars := p.accessRequests(t); len(ars) != 0 {
		t.Errorf("AccessRequests left after deletion: %v", ars)
	}
}

// TestInit runs init as the operator's init Job does, with the provider's
// own definition: it installs the CRDs into the platform and onboarding
// clusters (getting onboarding access through an AccessRequest) and
// registers the Sample kind in the ServiceProvider's status.resources.
//
// It does not run in parallel: while the kind is registered, deleting a
// ManagedControlPlane deletes the Sample of its name first, which the
// other tests do not expect. Go runs it before the parallel tests start.
func TestInit(t *testing.T) {
	testenv.SkipIfShort(t)
	// init runs within the test's budget.
	ctx := testContext(t)
	const name = "init-test"
	namespace := landscape.ProviderNamespace(t, "sp-"+name)
	t.Setenv(contract.EnvPodNamespace, namespace)
	kubeconfig, err := landscape.Platform.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	sp := &providerv1alpha1.ServiceProvider{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "example.org/sample:dev"}},
	}
	if err := platformC.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	// With the kind registered, deleting a ManagedControlPlane would delete
	// the Sample of its name first; the other tests do not expect that.
	t.Cleanup(func() {
		if err := platformC.Delete(context.Background(), sp); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete ServiceProvider: %v", err)
		}
	})
	app, err := controller.Provider()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"init", "--environment=test", "--provider-name=" + name, "--kubeconfig=" + kubeconfig}
	if code := app.MainWithArgs(ctx, args, controller.AccessOptions()...); code != 0 {
		if ctx.Err() != nil {
			t.Fatalf("%s: waited for init to install the CRDs (%v); it exited %d", t.Name(), context.Cause(ctx), code)
		}
		t.Fatalf("init exited %d", code)
	}

	check := func(c client.Client, crdName, cluster string) {
		t.Helper()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			t.Fatalf("CRD %s on the %s cluster: %v", crdName, cluster, err)
		}
		if got := crd.Labels[crds.ClusterLabel]; got != cluster {
			t.Errorf("CRD %s: label %s = %q, want %q", crdName, crds.ClusterLabel, got, cluster)
		}
		// init applies with the provider's name as field manager.
		if !slices.ContainsFunc(crd.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == controller.Name }) {
			t.Errorf("CRD %s on the %s cluster was not applied by init (field manager %s)", crdName, cluster, controller.Name)
		}
	}
	group := apiv1alpha1.GroupVersion.Group
	check(onboardingC, "samples."+group, crds.ClusterOnboarding)
	check(platformC, "providerconfigs."+group, crds.ClusterPlatform)
	if err := platformC.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
		t.Fatal(err)
	}
	want := metav1.GroupVersionKind{Group: group, Version: apiv1alpha1.GroupVersion.Version, Kind: "Sample"}
	if !slices.Contains(sp.Status.Resources, want) {
		t.Errorf("ServiceProvider status.resources = %v, want it to contain %v", sp.Status.Resources, want)
	}
}

// TestWorkload: with the ProviderConfig's spec.workload the provider runs
// the Sample's server as a Deployment in the workload cluster, and the
// Sample stays Ready=False (WorkloadNotReady, saying how many replicas are
// available) until the Deployment is Available. The test cluster runs no
// deployment controller, so the test writes the status that controller
// would. A deleted Deployment is created again, deleting the Sample
// removes it, and the provider's rights on the workload cluster cover its
// own Deployments and no others.
func TestWorkload(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, time.Second, "v1")
	const image = "registry.example.com/sample-server:v1"
	p.updateConfig(t, func(cfg *apiv1alpha1.ProviderConfig) {
		cfg.Spec.Workload = &apiv1alpha1.Workload{Image: image, Replicas: ptr.To[int32](2)}
	})
	p.createMCP(t)
	p.create(t, "")

	obj := p.waitObj(t, "wait for its server", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonWorkloadNotReady)
	})
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, spruntime.ConditionReady); !strings.Contains(c.Message, "0 of 2 replicas available") {
		t.Errorf("Ready message %q does not say how many replicas are available", c.Message)
	}
	ctx := context.Background()
	wl := landscape.Workload.Client
	key := client.ObjectKey{Namespace: controller.ServerNamespace, Name: controller.ServerName(p.name, obj)}
	deploy := &appsv1.Deployment{}
	if err := wl.Get(ctx, key, deploy); err != nil {
		t.Fatalf("the server Deployment %s: %v", key, err)
	}
	if c := deploy.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != image || *deploy.Spec.Replicas != 2 {
		t.Errorf("Deployment %s: containers %+v, replicas %d; want one with image %s, 2 replicas", key, c, *deploy.Spec.Replicas, image)
	}
	// Nothing makes it Available but its status: the Sample waits.
	throughoutQuietPeriod(func() {
		if obj := p.get(t); hasCondition(obj, spruntime.ConditionReady, metav1.ConditionTrue, spruntime.ReasonReconcileSuccess) {
			t.Fatalf("the Sample is Ready while its server is not Available: %s", describe(obj))
		}
	})

	setAvailable(t, key)
	p.waitReady(t)

	// The provider's own workload credentials reach its Deployments and no
	// others.
	pc := p.workloadClientOfProvider(t)
	if err := pc.Get(ctx, key, &appsv1.Deployment{}); err != nil {
		t.Errorf("the provider cannot read its own server Deployment: %v", err)
	}
	if err := pc.Get(ctx, client.ObjectKey{Namespace: "default", Name: key.Name}, &appsv1.Deployment{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading a Deployment in namespace default: want Forbidden, got %v", err)
	}
	if err := pc.List(ctx, &appsv1.DeploymentList{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Deployments cluster-wide: want Forbidden, got %v", err)
	}

	// Drift: the Deployment is deleted; the next poll creates it again.
	before := deploy.UID
	if err := wl.Delete(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	eventually(t, pollTimeout, fmt.Sprintf("the deleted server Deployment %s to be created again", key), func(ctx context.Context) (bool, string) {
		err := wl.Get(ctx, key, deploy)
		if client.IgnoreNotFound(err) != nil {
			t.Fatalf("get the server Deployment %s: %v", key, err)
		}
		return err == nil && deploy.UID != before, fmt.Sprintf("read: %v, UID %s (was %s)", err, deploy.UID, before)
	})
	p.waitEvent(t, "Warning", spruntime.ReasonDriftDetected)
	p.waitObj(t, "wait for its new server", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonWorkloadNotReady)
	})
	setAvailable(t, key)
	p.waitReady(t)

	p.delete(t)
	p.waitGone(t)
	if err := wl.Get(ctx, key, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the server Deployment %s after the Sample was deleted: want NotFound, got %v", key, err)
	}
}

// TestImagePullSecrets: the ProviderConfig's spec.imagePullSecrets name a
// Secret in the provider's namespace on the platform cluster; the
// provider copies it next to the Sample's server in the workload cluster,
// the server's pods reference the copy, a rotation reaches the copy, a
// name with no Secret makes the Sample Ready=False/PullSecretMissing
// naming it, and the copy goes with the Sample. The provider's own
// credentials reach Secrets in ServerNamespace only.
func TestImagePullSecrets(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	ctx := context.Background()
	const first, second = `{"auths":{"registry.example.com":{"auth":"Zmlyc3Q6c2VjcmV0"}}}`, `{"auths":{"registry.example.com":{"auth":"c2Vjb25kOnNlY3JldA=="}}}`
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(first)},
	}
	if err := platformC.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	p.createConfig(t, time.Second, "v1")
	p.updateConfig(t, func(cfg *apiv1alpha1.ProviderConfig) {
		cfg.Spec.Workload = &apiv1alpha1.Workload{Image: "registry.example.com/sample-server:v1"}
		cfg.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	})
	p.createMCP(t)
	p.create(t, "")
	obj := p.waitObj(t, "wait for its server", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonWorkloadNotReady)
	})

	wl := landscape.Workload.Client
	server := client.ObjectKey{Namespace: controller.ServerNamespace, Name: controller.ServerName(p.name, obj)}
	copyKey := client.ObjectKey{Namespace: controller.ServerNamespace, Name: server.Name + "-regcred"}
	readCopy := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := wl.Get(ctx, copyKey, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			t.Fatal(err)
		}
		return s
	}
	c := readCopy()
	if c == nil {
		t.Fatalf("no copy %s of the image pull secret in the workload cluster", copyKey)
	}
	if c.Type != corev1.SecretTypeDockerConfigJson || string(c.Data[corev1.DockerConfigJsonKey]) != first || c.Labels[spruntime.PullSecretOwnerLabel] != string(obj.UID) {
		t.Errorf("copy %s: type %s, labels %v; want the source's type and data, owned by the Sample", copyKey, c.Type, c.Labels)
	}
	deploy := &appsv1.Deployment{}
	if err := wl.Get(ctx, server, deploy); err != nil {
		t.Fatalf("the server Deployment %s: %v", server, err)
	}
	if got := deploy.Spec.Template.Spec.ImagePullSecrets; !slices.Equal(got, []corev1.LocalObjectReference{{Name: copyKey.Name}}) {
		t.Errorf("the server's pods pull with %v, want [%s]", got, copyKey.Name)
	}
	setAvailable(t, server)
	p.waitReady(t)

	// The provider's credentials: its copies, and no other Secrets.
	pc := p.workloadClientOfProvider(t)
	if err := pc.Get(ctx, copyKey, &corev1.Secret{}); err != nil {
		t.Errorf("the provider cannot read its copy: %v", err)
	}
	if err := pc.List(ctx, &corev1.SecretList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets in namespace default: want Forbidden, got %v", err)
	}

	// A rotated pull secret reaches the copy by the next poll.
	update(t, platformC, client.ObjectKeyFromObject(src), &corev1.Secret{}, func(s *corev1.Secret) {
		s.Data[corev1.DockerConfigJsonKey] = []byte(second)
	})
	eventually(t, pollTimeout, fmt.Sprintf("the copy %s to get the rotated data", copyKey), func(context.Context) (bool, string) {
		c := readCopy()
		if c == nil {
			return false, "no copy"
		}
		// The data are a secret's: only whether they changed is told.
		return string(c.Data[corev1.DockerConfigJsonKey]) == second, "a copy with the data before the rotation"
	})
	p.waitReady(t)

	// A name without a Secret: Ready=False with a reason naming it.
	p.updateConfig(t, func(cfg *apiv1alpha1.ProviderConfig) {
		cfg.Spec.ImagePullSecrets = append(cfg.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "nosuch"})
	})
	obj = p.waitObj(t, "name the missing pull secret", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonPullSecretMissing)
	})
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, spruntime.ConditionReady); !strings.Contains(c.Message, p.namespace+"/nosuch") {
		t.Errorf("Ready message %q does not name the missing Secret %s/nosuch", c.Message, p.namespace)
	}
	p.updateConfig(t, func(cfg *apiv1alpha1.ProviderConfig) {
		cfg.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	})
	p.waitReady(t)

	p.delete(t)
	p.waitGone(t)
	if c := readCopy(); c != nil {
		t.Errorf("the copy %s is still there after the Sample was deleted", copyKey)
	}
	for _, data := range []string{"Zmlyc3Q6c2VjcmV0", "c2Vjb25kOnNlY3JldA=="} {
		if strings.Contains(logs.String(), data) {
			t.Errorf("the log holds the pull secret's data")
		}
	}
}

// setAvailable writes the status the deployment controller would write once
// every replica of the Deployment key is available.
func setAvailable(t *testing.T, key client.ObjectKey) {
	t.Helper()
	d := &appsv1.Deployment{}
	eventually(t, pollTimeout, fmt.Sprintf("a write of the status of Deployment %s without a conflict", key), func(ctx context.Context) (bool, string) {
		if err := landscape.Workload.Client.Get(ctx, key, d); err != nil {
			t.Fatalf("write the status of Deployment %s: %v", key, err)
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation,
			Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		}
		err := landscape.Workload.Client.Status().Update(ctx, d)
		if apierrors.IsConflict(err) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("write the status of Deployment %s: %v", key, err)
		}
		return true, ""
	})
}

// workloadClientOfProvider returns a client with the provider's own
// credentials for the workload cluster: the kubeconfig of its workload
// AccessRequest.
func (p *provider) workloadClientOfProvider(t *testing.T) client.Client {
	t.Helper()
	ctx := context.Background()
	ar := &clustersv1alpha1.AccessRequest{}
	if err := platformC.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: clusteraccess.WorkloadRequestName(p.name)}, ar); err != nil {
		t.Fatalf("the provider's workload AccessRequest: %v", err)
	}
	if ar.Status.SecretRef == nil {
		t.Fatalf("the provider's workload AccessRequest %s is not granted", ar.Name)
	}
	return p.clientOfAccessRequest(t, ar)
}
