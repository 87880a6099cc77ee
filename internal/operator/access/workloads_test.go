package access_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
)

// TestWorkloadsNotSupported registers a Cluster annotated as a kcp
// workspace (workloads: none): a request for ConfigMaps is granted there,
// and so is one for "*" in apps; a request naming Deployments is Denied
// with WorkloadsNotSupported, the message naming the Cluster and the
// backend, and gets nothing on the cluster; a granted request changed to
// name Pods is Denied and loses what it had (objects, Secret, token).
func TestWorkloadsNotSupported(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ctx := t.Context()
	ns := optest.NewNamespace(t, "ar-workloads")
	startControllers(t, ns, "ar-workloads")
	cl := optest.RegisterCluster(t, ns, "ws", optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)
	update(t, cl, func() {
		cl.Annotations[clusters.WorkloadsAnnotation] = clusters.WorkloadsNone
		cl.Annotations[clusters.BackendAnnotation] = "kcp"
	})
	request := func(name string, rules ...rbacv1.PolicyRule) *clustersv1alpha1.AccessRequest {
		return createAccessRequest(t, &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: clustersv1alpha1.AccessRequestSpec{
				ClusterRef: &common.ObjectReference{Name: "ws", Namespace: ns},
				Token:      &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Namespace: "team-w", Rules: rules}}},
			},
		})
	}
	configmaps := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}

	request("configmaps", configmaps)
	waitAccess(t, ns, "configmaps", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	request("apps-star", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"get"}})
	waitAccess(t, ns, "apps-star", clustersv1alpha1.RequestGranted, access.ReasonGranted)

	deploy := request("deployments", configmaps, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}})
	ar := waitAccess(t, ns, "deployments", clustersv1alpha1.RequestDenied, access.ReasonWorkloadsNotSupported)
	_, _, msg := optest.ReadyReason(ar.Status.Conditions)
	for _, want := range []string{"Cluster " + ns + "/ws", "is a kcp workspace", "runs no Pods or Deployments", "deployments.apps", "workload cluster"} {
		if !strings.Contains(msg, want) {
			t.Errorf("deployments: message %q lacks %q", msg, want)
		}
	}
	if got := labelled(t, string(deploy.UID)); len(got) != 0 {
		t.Errorf("deployments: denied, but the cluster has %v for it", got)
	}
	if ar.Status.SecretRef != nil {
		t.Errorf("deployments: denied, but status.secretRef = %v", ar.Status.SecretRef)
	}

	// Granted first, then changed to name Pods.
	changed := request("changed", configmaps)
	ar = waitAccess(t, ns, "changed", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	old := kubeconfigClient(t, getSecret(t, ns, ar.Status.SecretRef.Name))
	if err := old.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-w")); err != nil {
		t.Fatalf("changed: the granted token cannot list ConfigMaps: %v", err)
	}
	update(t, changed, func() {
		changed.Spec.Token.Permissions[0].Rules = []rbacv1.PolicyRule{configmaps,
			{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}}}
	})
	ar = waitAccess(t, ns, "changed", clustersv1alpha1.RequestDenied, access.ReasonWorkloadsNotSupported)
	if _, _, msg := optest.ReadyReason(ar.Status.Conditions); !strings.Contains(msg, "pods") {
		t.Errorf("changed: message %q does not name pods", msg)
	}
	if got := labelled(t, string(changed.UID)); len(got) != 0 {
		t.Errorf("changed: denied, but the cluster still has %v for it", got)
	}
	if ar.Status.SecretRef != nil {
		t.Errorf("changed: denied, but status.secretRef = %v", ar.Status.SecretRef)
	}
	err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: access.SecretName(changed)}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("changed: the kubeconfig Secret is still there after the denial (err %v)", err)
	}
	optest.Eventually(t, 30*time.Second, "the revoked token is refused", func(ctx context.Context) (bool, error) {
		err := old.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-w"))
		return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err), nil
	})
}

// update applies mutate to the current obj and updates it, again on a
// conflict with a controller.
func update(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	optest.Eventually(t, 10*time.Second, "update "+obj.GetName(), func(ctx context.Context) (bool, error) {
		if _, err := optest.CreateOrUpdate(ctx, obj, mutate); err != nil {
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return false, err
		}
		return true, nil
	})
}
