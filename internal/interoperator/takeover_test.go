package interoperator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestSameNameTakeoverThroughBroker is issue #32's report, step by step.
// Tenant A provisions and binds through the real broker (OSB over HTTP)
// and stores data with its binding's token. Tenant B holds only its own
// ServiceAccount token with edit (and the service kinds) in its own
// namespace (onboardingTenant); it creates an SFServiceInstance with A's instance id
// as name, same service and plan, and a binding, reads with that binding's
// token, and deletes its instance. Before the fix B's instance recorded
// A's namespace, B's token read A's ConfigMap, and B's deletion deleted
// A's namespace while the broker still answered A's last_operation with
// succeeded. Now B works in a namespace of its own, is refused A's data,
// and A keeps everything.
func TestSameNameTakeoverThroughBroker(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	id := uniqueName("victim2-")
	bidA, bidB := uniqueName("bind-a-"), uniqueName("bind-b-")
	nsB := uniqueName("tenant-b-")
	e := newEnv(t, envOptions{namespace: sf.InstanceNamespace(id), moreNamespaces: []string{nsB}})
	applySamplePlanSmall(t, e)
	ctx := context.Background()
	osb := startBroker(t, e.catalog, "osb-platform", randomHex(t, 16), testenv.Logger().WithName("broker"))
	osb.identity = "takeover"

	// A, through the broker.
	query := "service_id=" + sampleServiceID + "&plan_id=" + samplePlanSmall
	osb.expect(http.MethodPut, "/v2/service_instances/"+id, map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall,
		"organization_guid": "org-a", "space_guid": "space-a"}, http.StatusCreated)
	var credsA credentials
	must(t, json.Unmarshal(osb.expect(http.MethodPut, "/v2/service_instances/"+id+"/service_bindings/"+bidA,
		map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall}, http.StatusCreated), &credsA))
	workA := credsA.Credentials.Namespace
	if workA != "sf-"+id {
		t.Fatalf("A's namespace is %q, want sf-%s (Service Fabrik's convention for broker instances)", workA, id)
	}
	tokenA := tenantClient(t, credsA.Credentials.APIServer, credsA.Credentials.CAData, credsA.Credentials.Token)
	must(t, tokenA.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workA, Name: "a-data"}, Data: map[string]string{"secret": "A's"}}))

	// B, with its own token only: same name, same service and plan.
	b := onboardingTenant(t, nsB)
	// edit reads Secrets; this onboarding API server runs no controller
	// manager to aggregate edit's rules, so the test grants it directly.
	must(t, onboarding.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "tenant-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}))
	must(t, onboarding.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "tenant-secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-secrets"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: nsB, Name: "tenant"}}}))
	instB := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: id},
		Spec: osbv1alpha1.SFServiceInstanceSpec{InstanceID: id, ServiceID: sampleServiceID, PlanID: samplePlanSmall}}
	must(t, b.Create(ctx, instB))
	waitFor(t, "B's instance to finish", func() bool {
		must(t, b.Get(ctx, client.ObjectKeyFromObject(instB), instB))
		return instB.Status.State.IsTerminal() && instB.Status.ObservedGeneration == instB.Generation
	})
	if instB.Status.State != osbv1alpha1.StateSucceeded {
		t.Fatalf("B's instance: %s, want succeeded in a namespace of its own", describeInstance(instB))
	}
	// Errors, not fatal: the steps below show what a takeover leads to.
	if hasNamespace(instB.Status.Resources, workA) {
		t.Errorf("B's instance took over A's namespace %s: status.resources %+v", workA, instB.Status.Resources)
	}
	bindingB := &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: bidB},
		Spec: osbv1alpha1.SFServiceBindingSpec{ID: bidB, InstanceID: id, ServiceID: sampleServiceID, PlanID: samplePlanSmall}}
	must(t, b.Create(ctx, bindingB))
	waitFor(t, "B's binding to succeed", func() bool {
		must(t, b.Get(ctx, client.ObjectKeyFromObject(bindingB), bindingB))
		return bindingB.Status.State == osbv1alpha1.StateSucceeded && bindingB.Status.Response != nil
	})
	secret := &corev1.Secret{}
	must(t, b.Get(ctx, client.ObjectKey{Namespace: nsB, Name: bindingB.Status.Response.SecretRef}, secret))
	var credsB credentials
	must(t, json.Unmarshal(secret.Data[osbv1alpha1.BindingSecretResponseKey], &credsB))
	if want := "sf-" + provisioner.InstanceID(nsB, id); credsB.Credentials.Namespace != want {
		t.Errorf("B's credentials are for namespace %q, want its own %q", credsB.Credentials.Namespace, want)
	}
	tokenB := tenantClient(t, credsB.Credentials.APIServer, credsB.Credentials.CAData, credsB.Credentials.Token)
	if err := tokenB.Get(ctx, client.ObjectKey{Namespace: workA, Name: "a-data"}, &corev1.ConfigMap{}); !apierrors.IsForbidden(err) {
		t.Errorf("B's binding token reading A's ConfigMap: %v, want Forbidden", err)
	}

	// B deletes its binding and instance; A keeps its namespace and data,
	// and the broker tells the truth about A.
	must(t, b.Delete(ctx, bindingB))
	must(t, b.Delete(ctx, instB))
	waitFor(t, "B's instance to be gone", func() bool {
		return apierrors.IsNotFound(b.Get(ctx, client.ObjectKeyFromObject(instB), &osbv1alpha1.SFServiceInstance{}))
	})
	cm := &corev1.ConfigMap{}
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: workA, Name: "a-data"}, cm); err != nil || cm.Data["secret"] != "A's" {
		t.Errorf("A's data after B deleted its instance: %v %v, want it untouched", err, cm.Data)
	}
	if err := tokenA.Get(ctx, client.ObjectKey{Namespace: workA, Name: "a-data"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("A's binding token after B's deletion: %v, want it to work", err)
	}
	var last struct{ State string }
	must(t, json.Unmarshal(osb.expect(http.MethodGet, "/v2/service_instances/"+id+"/last_operation?"+query, nil, http.StatusOK), &last))
	if last.State != "succeeded" {
		t.Errorf("A's last_operation: %q, want succeeded", last.State)
	}

	osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"/service_bindings/"+bidA+"?"+query, nil, http.StatusOK)
	osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"?"+query, nil, http.StatusOK)
	waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workA}})
}
