package controller_test

import (
	"context"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/spruntime"

	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
	"github.com/marketplane/marketplane/providers/sample/internal/controller"
)

// TestCRDOfAnotherIsNeverTakenOver: the DomainServiceAPI's CRD is already
// in the MCP cluster, managed by another provider (or created by the
// tenant). The Sample fails with CRDConflict instead of taking it over,
// and deleting the Sample leaves it in place.
func TestCRDOfAnotherIsNeverTakenOver(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, 0, "v1")
	mcp := p.createMCP(t)
	ctx := context.Background()
	theirs := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: controller.DomainCRDName, Labels: map[string]string{controller.ManagedByLabel: "another-provider"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: controller.DomainGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: controller.DomainKind, ListKind: controller.DomainKind + "List", Plural: controller.DomainPlural},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: controller.DomainVersion, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := mcp.Admin.Client.Create(ctx, theirs); err != nil {
		t.Fatalf("create the other provider's CRD: %v", err)
	}
	taken := func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd == nil || !crd.DeletionTimestamp.IsZero() || crd.UID != theirs.UID || crd.Generation != theirs.Generation ||
			crd.Labels[controller.ManagedByLabel] != "another-provider" || crd.Annotations[controller.VersionAnnotation] != ""
	}

	p.create(t, "")
	obj := p.waitObj(t, "fail with "+controller.ReasonCRDConflict+" (or take the CRD over)", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonCRDConflict) || taken(domainCRD(t, mcp))
	})
	if crd := domainCRD(t, mcp); taken(crd) {
		t.Fatalf("the provider took the other provider's CRD over: labels %v, annotations %v; the Sample is %s", crd.Labels, crd.Annotations, describe(obj))
	}
	p.noHotLoop(t)

	p.delete(t)
	p.waitGone(t)
	if crd := domainCRD(t, mcp); taken(crd) {
		t.Errorf("deleting the Sample deleted or changed the other provider's CRD")
	}
}

// TestOrphanedWorkloadIsNeverAdopted: a Sample deleted with the Orphan
// policy leaves its namespace and server in the workload cluster. A new
// Sample of the same namespace and name, which computes the same names,
// fails with WorkloadConflict instead of adopting them (and the data in
// them), and deleting it leaves them in place.
func TestOrphanedWorkloadIsNeverAdopted(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, time.Second, "v1")
	p.updateConfig(t, func(cfg *apiv1alpha1.ProviderConfig) {
		cfg.Spec.Workload = &apiv1alpha1.Workload{Image: "registry.example.com/sample-server:v1"}
	})
	p.createMCP(t)
	ctx := context.Background()
	create := func(orphan bool) {
		t.Helper()
		obj := &apiv1alpha1.Sample{ObjectMeta: metav1.ObjectMeta{Namespace: p.tenant, Name: mcpName}}
		if orphan {
			metav1.SetMetaDataAnnotation(&obj.ObjectMeta, spruntime.DeletionPolicyAnnotation, string(spruntime.DeletionPolicyOrphan))
		}
		if err := onboardingC.Create(ctx, obj); err != nil {
			t.Fatalf("create Sample: %v", err)
		}
	}

	create(true)
	first := p.waitObj(t, "wait for its server", func(obj *apiv1alpha1.Sample) bool {
		return hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonWorkloadNotReady)
	})
	nsKey := client.ObjectKey{Name: controller.WorkloadNamespace(p.name, first)}
	serverKey := client.ObjectKey{Namespace: controller.ServerNamespace, Name: controller.ServerName(p.name, first)}
	setAvailable(t, serverKey)
	p.waitReady(t)
	p.delete(t)
	p.waitGone(t)
	wl := landscape.Workload.Client
	t.Cleanup(func() {
		for _, o := range []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: serverKey.Namespace, Name: serverKey.Name}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsKey.Name}}} {
			if err := wl.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Errorf("clean up %s: %v", o.GetName(), err)
			}
		}
	})
	// The orphaned namespace and server stay as the first Sample left
	// them: the same objects, with the same labels.
	read := func(key client.ObjectKey, o client.Object) client.Object {
		t.Helper()
		if err := wl.Get(ctx, key, o); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			t.Fatal(err)
		}
		return o
	}
	left := map[client.ObjectKey]client.Object{nsKey: read(nsKey, &corev1.Namespace{}), serverKey: read(serverKey, &appsv1.Deployment{})}
	for key, o := range left {
		if o == nil {
			t.Fatalf("the Orphan policy did not leave %s of the first Sample", key)
		}
		if got := o.GetLabels()[controller.OwnerUIDLabel]; got != string(first.UID) {
			t.Errorf("%s: label %s = %q, want the first Sample's UID %s", key, controller.OwnerUIDLabel, got, first.UID)
		}
	}
	orphaned := func() bool {
		t.Helper()
		for key, was := range left {
			now := read(key, was.DeepCopyObject().(client.Object))
			if now == nil || now.GetUID() != was.GetUID() || !now.GetDeletionTimestamp().IsZero() || !maps.Equal(now.GetLabels(), was.GetLabels()) {
				return false
			}
		}
		return true
	}
	create(false)
	second := p.waitObj(t, "fail with "+controller.ReasonWorkloadConflict+" (or adopt the orphans)", func(obj *apiv1alpha1.Sample) bool {
		return obj != nil && obj.UID != first.UID && (hasCondition(obj, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonWorkloadConflict) ||
			hasCondition(obj, spruntime.ConditionReady, metav1.ConditionTrue, spruntime.ReasonReconcileSuccess))
	})
	if !hasCondition(second, spruntime.ConditionReady, metav1.ConditionFalse, controller.ReasonWorkloadConflict) || !orphaned() {
		t.Fatalf("the new Sample adopted the orphaned namespace or server: %s", describe(second))
	}
	p.noHotLoop(t)

	p.delete(t)
	p.waitGone(t)
	if !orphaned() {
		t.Errorf("deleting the new Sample deleted or changed the orphaned namespace %s or server %s", nsKey.Name, serverKey)
	}
}
