package provider_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/provider"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestAllKindsWithoutClusterAdmin installs one provider of each kind
// through the same reconciler and then checks that no binding anywhere
// grants cluster-admin.
func TestAllKindsWithoutClusterAdmin(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ctx := t.Context()
	sp := serviceProvider("velero", nil)
	cp := &providerv1alpha1.ClusterProvider{ObjectMeta: metav1.ObjectMeta{Name: "kind"}}
	cp.Spec.Image = "ghcr.io/openmcp-project/images/cluster-provider-kind:v0.6.0"
	ps := &providerv1alpha1.PlatformService{ObjectMeta: metav1.ObjectMeta{Name: "audit"}}
	ps.Spec.Image = "ghcr.io/openmcp-project/images/platform-service-audit:v0.1.0"
	ps.Spec.Verbosity = providerv1alpha1.VerbosityError

	for _, tc := range []struct {
		obj    client.Object
		prefix string
		kind   string
	}{
		{sp, "sp", "ServiceProvider"},
		{cp, "cp", "ClusterProvider"},
		{ps, "ps", "PlatformService"},
	} {
		create(t, tc.obj)
		base := tc.prefix + "-" + tc.obj.GetName()
		job := waitForJob(t, base, base+"-init", 1, 1)
		if got := job.Labels[provider.LabelProviderKind]; got != tc.kind {
			t.Errorf("%s: Job label %s = %q, want %q", base, provider.LabelProviderKind, got, tc.kind)
		}
		if got := job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(got, "--provider-name="+tc.obj.GetName()) {
			t.Errorf("%s: init args %q lack --provider-name=%s", base, got, tc.obj.GetName())
		}
		if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != tc.kind {
			t.Errorf("%s: Job controller %+v, want a %s", base, ref, tc.kind)
		}
		install(t, tc.obj, tc.prefix)
		for _, name := range []string{"marketplane:" + base, "marketplane:" + base + "-init"} {
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{}); err != nil {
				t.Errorf("%s: ClusterRoleBinding %s: %v", base, name, err)
			}
		}
	}

	crbs := &rbacv1.ClusterRoleBindingList{}
	if err := k8s.List(ctx, crbs); err != nil {
		t.Fatal(err)
	}
	rbs := &rbacv1.RoleBindingList{}
	if err := k8s.List(ctx, rbs); err != nil {
		t.Fatal(err)
	}
	// Other tests run at the same time: count only the bindings of the
	// providers of this one.
	isOurs := func(labels map[string]string) bool {
		return labels["openmcp.cloud/managed-by"] == provider.ManagedByValue &&
			slices.Contains([]string{sp.Name, cp.Name, ps.Name}, labels[provider.LabelProviderName])
	}
	ours := 0
	for _, b := range crbs.Items {
		if isOurs(b.Labels) {
			ours++
		}
		// system:masters holds cluster-admin by Kubernetes' own
		// bootstrap binding; nothing else may.
		if b.RoleRef.Name == "cluster-admin" && b.Name != "cluster-admin" {
			t.Errorf("ClusterRoleBinding %s refers to cluster-admin (subjects %+v)", b.Name, b.Subjects)
		}
	}
	for _, b := range rbs.Items {
		if isOurs(b.Labels) {
			ours++
		}
		if b.RoleRef.Name == "cluster-admin" {
			t.Errorf("RoleBinding %s/%s refers to cluster-admin (subjects %+v)", b.Namespace, b.Name, b.Subjects)
		}
	}
	if want := 3 * 4; ours != want {
		t.Errorf("found %d bindings of the operator, want %d (2 ClusterRoleBindings and 2 RoleBindings per provider)", ours, want)
	}
}

// TestInvalidSpecNoHotLoop gives a spec the reconciler refuses and checks
// the condition and that it does not retry on its own.
//
// It is not parallel: it counts the reconciles of the controller that all
// ServiceProviders share.
func TestInvalidSpecNoHotLoop(t *testing.T) {
	needsPlatform(t)
	ctx := t.Context()

	// The API server already refuses some bad input.
	dup := serviceProvider("dup-env", func(s *providerv1alpha1.DeploymentSpec) {
		s.Env = []providerv1alpha1.EnvVar{{Name: "FOO", Value: "1"}, {Name: "FOO", Value: "2"}}
	})
	if err := k8s.Create(ctx, dup); !apierrors.IsInvalid(err) {
		t.Errorf("create with duplicate env names: want Invalid from the API server, got %v", err)
	}
	loud := serviceProvider("loud", func(s *providerv1alpha1.DeploymentSpec) { s.Verbosity = "LOUD" })
	if err := k8s.Create(ctx, loud); !apierrors.IsInvalid(err) {
		t.Errorf("create with verbosity LOUD: want Invalid from the API server, got %v", err)
	}

	// What it lets through, the reconciler refuses.
	sp := serviceProvider("shadow", func(s *providerv1alpha1.DeploymentSpec) {
		s.Env = []providerv1alpha1.EnvVar{{Name: "POD_NAMESPACE", Value: "elsewhere"}}
	})
	controller := provider.ControllerName("ServiceProvider")
	create(t, sp)
	msg := "spec.env sets POD_NAMESPACE"
	waitForConditions(t, sp,
		want{Type: providerv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: provider.ReasonInvalidSpec, Message: msg},
		want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: provider.ReasonInvalidSpec, Message: msg})
	waitForEvent(t, sp, string(provider.ReasonInvalidSpec))

	// Give the reconcile triggered by its own status write time to
	// finish, then count over a few seconds: a retry (with or without
	// backoff) would show.
	settle := testenv.ReconcileCount(t, controller)
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Second, false, func(context.Context) (bool, error) {
		now := testenv.ReconcileCount(t, controller)
		changed := now != settle
		settle = now
		return !changed, nil
	})
	start := testenv.ReconcileCount(t, controller)
	window := 4 * time.Second
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		if n := testenv.ReconcileCount(t, controller) - start; n > 1 {
			t.Fatalf("%v reconciles within %v of an invalid spec; want at most 1 (no hot loop)", n, window)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "sp-shadow"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace of an invalid provider: want NotFound, got %v", err)
	}

	// Fixing the spec is enough to go on.
	sp.Spec.Env = []providerv1alpha1.EnvVar{{Name: "SHADOW", Value: "no more"}}
	if err := k8s.Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	waitForJob(t, "sp-shadow", "sp-shadow-init", 2, 1)
	waitForConditions(t, sp, want{Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonInitRunning})
}

// TestMissingPullSecret names a pull secret the operator namespace lacks,
// then creates it.
func TestMissingPullSecret(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	sp := serviceProvider("private", func(s *providerv1alpha1.DeploymentSpec) {
		s.ImagePullSecrets = []common.LocalObjectReference{{Name: "late"}}
	})
	create(t, sp)
	waitForConditions(t, sp, want{
		Type: providerv1alpha1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: providerv1alpha1.ReasonInitJobCreationFailed,
		Message: "image pull secret late not found in namespace " + operatorNamespace,
	})
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "late"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	})
	waitForJob(t, "sp-private", "sp-private-init", 1, 1)
}

// TestOperationAnnotation covers openmcp.cloud/operation: ignore leaves the
// object alone, reconcile reconciles it and is removed.
//
// It is not parallel: it learns that the ignored object was looked at from
// the reconcile count of the controller all ServiceProviders share.
func TestOperationAnnotation(t *testing.T) {
	needsPlatform(t)
	ctx := t.Context()
	controller := provider.ControllerName("ServiceProvider")
	before := testenv.ReconcileCount(t, controller)
	sp := serviceProvider("ignored", nil)
	sp.Annotations = map[string]string{providerv1alpha1.OperationAnnotation: providerv1alpha1.OperationIgnore}
	create(t, sp)
	eventually(t, "the ignored object was looked at", func(context.Context) (bool, string, error) {
		n := testenv.ReconcileCount(t, controller)
		return n > before, fmt.Sprintf("%v reconciles", n-before), nil
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
		t.Fatal(err)
	}
	if len(sp.Finalizers) != 0 || len(sp.Status.Conditions) != 0 || sp.Status.ObservedGeneration != 0 {
		t.Errorf("ignored provider was touched: finalizers %q, status %+v", sp.Finalizers, sp.Status)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "sp-ignored"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace of an ignored provider: want NotFound, got %v", err)
	}

	sp.Annotations[providerv1alpha1.OperationAnnotation] = providerv1alpha1.OperationReconcile
	if err := k8s.Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	waitForJob(t, "sp-ignored", "sp-ignored-init", 1, 1)
	eventually(t, "operation annotation removed", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, err.Error(), nil
		}
		_, has := sp.Annotations[providerv1alpha1.OperationAnnotation]
		return !has && slices.Contains(sp.Finalizers, providerv1alpha1.Finalizer), fmt.Sprintf("annotations %v, finalizers %q", sp.Annotations, sp.Finalizers), nil
	})
}

// TestDeletionLeavesNothing installs a provider with everything optional
// turned on, deletes it, and looks for every kind of object the operator
// could have created, by label, by name and by owner.
func TestDeletionLeavesNothing(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	ctx := t.Context()
	sp := serviceProvider("doomed", func(s *providerv1alpha1.DeploymentSpec) {
		s.ImagePullSecrets = []common.LocalObjectReference{{Name: pullSecretName}}
		s.RunReplicas = 2
	})
	// A finalizer of the test's own keeps the object after the operator
	// dropped its finalizer, so that the order can be checked.
	const hold = "test.marketplane.io/hold"
	sp.Finalizers = []string{hold}
	create(t, sp)
	install(t, sp, "sp")
	const ns = "sp-doomed"
	// Something the provider itself keeps in its namespace goes too.
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed.kubeconfig"}}); err != nil {
		t.Fatal(err)
	}
	uid := sp.UID

	if err := k8s.Delete(ctx, sp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "operator finalizer dropped", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, err.Error(), nil
		}
		return !slices.Contains(sp.Finalizers, providerv1alpha1.Finalizer), fmt.Sprintf("finalizers %q", sp.Finalizers), nil
	})
	// The finalizer goes only after everything is gone: check at once.
	if sp.Status.Phase != providerv1alpha1.PhaseUninstalling {
		t.Errorf("phase during deletion = %q, want Uninstalling", sp.Status.Phase)
	}
	byName := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "marketplane:sp-doomed"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "marketplane:sp-doomed-init"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "marketplane:sp-doomed"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "marketplane:sp-doomed-init"}},
	}
	if gone, left := notFound(ctx, byName...); !gone {
		t.Errorf("left behind when the finalizer was dropped: %s", left)
	}
	lists := []client.ObjectList{
		&corev1.NamespaceList{}, &batchv1.JobList{}, &corev1.PodList{}, &appsv1.DeploymentList{}, &appsv1.ReplicaSetList{},
		&corev1.ServiceList{}, &corev1.ServiceAccountList{}, &corev1.SecretList{}, &corev1.ConfigMapList{},
		&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
	}
	for _, list := range lists {
		if err := k8s.List(ctx, list); err != nil {
			t.Fatalf("list %T: %v", list, err)
		}
		items, err := metaItems(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			labelled := o.GetLabels()[provider.LabelProviderName] == "doomed"
			owned := slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == uid })
			if labelled || owned || o.GetNamespace() == ns {
				t.Errorf("left behind: %T %s/%s (labels %v)", o, o.GetNamespace(), o.GetName(), o.GetLabels())
			}
		}
	}

	patch := client.MergeFrom(sp.DeepCopy())
	sp.Finalizers = nil
	if err := k8s.Patch(ctx, sp, patch); err != nil {
		t.Fatal(err)
	}
}

// metaItems returns the items of a typed list as objects.
func metaItems(list client.ObjectList) ([]client.Object, error) {
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("items of %T: %w", list, err)
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("item %T of %T is not an object", o, list)
		}
		out = append(out, co)
	}
	return out, nil
}
