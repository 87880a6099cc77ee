package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// TestDeniedRequestsShowOnProvider: a Denied AccessRequest of a provider,
// in its own namespace or labelled with its name in an MCP's platform
// namespace, shows in its RequestsGranted condition with the request's
// name and the denial's message (the rule); another provider's request
// that carries the victim's name in a namespace that is no MCP's does not;
// once the denied requests are gone, the condition is True again.
func TestDeniedRequestsShowOnProvider(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	victim := serviceProvider("denied-victim", nil)
	other := serviceProvider("denied-other", nil)
	create(t, victim)
	create(t, other)
	waitForConditions(t, victim, want{Type: provider.ConditionRequestsGranted, Status: metav1.ConditionTrue, Reason: provider.ReasonNoneDenied})
	waitForConditions(t, other, want{Type: provider.ConditionRequestsGranted, Status: metav1.ConditionTrue, Reason: provider.ReasonNoneDenied})

	mcpNS := corev2alpha1.StableMCPNamespace("tenant-denied", "cp")
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mcpNS, Labels: map[string]string{
		corev2alpha1.MCPNamespaceLabel: "tenant-denied", corev2alpha1.MCPNameLabel: "cp"}}})
	t.Cleanup(func() { deleteAndWait(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mcpNS}}) })

	const initRule = `rule "permissions within the ceiling": token.permissions[0]: * */* not allowed on onboarding clusters`
	const mcpRule = `rule "no Kubernetes admin roles": token.roleRefs[0]: cluster-admin`
	denied := deniedRequest(t, "sp-denied-victim", "onboarding-init", nil, initRule)
	deniedRequest(t, mcpNS, "victim--cp--mcp", map[string]string{providerv1alpha1.ManagedByLabel: victim.Name}, mcpRule)
	// The other provider, in its own namespace, names the victim.
	spoof := deniedRequest(t, "sp-denied-other", "spoof", map[string]string{providerv1alpha1.ManagedByLabel: victim.Name}, "spoofed")

	waitForConditions(t, victim, want{Type: provider.ConditionRequestsGranted, Status: metav1.ConditionFalse, Reason: provider.ReasonRequestDenied,
		Message: "AccessRequest " + mcpNS + "/victim--cp--mcp Denied (PolicyViolation): " + mcpRule})
	msg := apimeta.FindStatusCondition(victim.Status.Conditions, string(provider.ConditionRequestsGranted)).Message
	if init := "AccessRequest sp-denied-victim/onboarding-init Denied (PolicyViolation): " + initRule; !strings.Contains(msg, init) {
		t.Errorf("RequestsGranted message %q does not name %q", msg, init)
	}
	if strings.Contains(msg, "spoof") {
		t.Errorf("RequestsGranted message %q names the other provider's request", msg)
	}
	waitForConditions(t, other, want{Type: provider.ConditionRequestsGranted, Status: metav1.ConditionFalse, Reason: provider.ReasonRequestDenied,
		Message: "AccessRequest sp-denied-other/spoof Denied"})

	deleteAndWait(t, denied)
	deleteAndWait(t, spoof)
	deleteAndWait(t, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: mcpNS, Name: "victim--cp--mcp"}})
	waitForConditions(t, victim, want{Type: provider.ConditionRequestsGranted, Status: metav1.ConditionTrue, Reason: provider.ReasonNoneDenied})
	waitForConditions(t, other, want{Type: provider.ConditionRequestsGranted, Status: metav1.ConditionTrue, Reason: provider.ReasonNoneDenied})
}

// deniedRequest creates an AccessRequest in namespace and marks it Denied
// with message, as the access controller does (it does not run in this
// suite).
func deniedRequest(t *testing.T, namespace, name string, labels map[string]string, message string) *clustersv1alpha1.AccessRequest {
	t.Helper()
	ar := &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &common.ObjectReference{Name: "some-request", Namespace: namespace},
			Token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}}},
		},
	}
	eventually(t, "namespace "+namespace+" exists", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
		return err == nil, fmt.Sprint(err), nil
	})
	create(t, ar)
	ar.Status.Phase = clustersv1alpha1.RequestDenied
	ar.Status.Conditions = []metav1.Condition{{Type: common.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "PolicyViolation",
		Message: message, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(t.Context(), ar); err != nil {
		t.Fatalf("mark AccessRequest %s/%s Denied: %v", namespace, name, err)
	}
	return ar
}
