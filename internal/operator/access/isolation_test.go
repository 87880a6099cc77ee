package access_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The service kind of provider A in TestProviderIsolation, by which the
// tenant's MCP is A's tenant.
const isolationGroup = "isolationtest.services.openmcp.cloud"

var toolKind = schema.GroupVersionKind{Group: isolationGroup, Version: "v1alpha1", Kind: "Tool"}

func toolCRD() *apiextensionsv1.CustomResourceDefinition {
	crd := widgetCRD()
	crd.Name = "tools." + isolationGroup
	crd.Spec.Group = isolationGroup
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Kind: toolKind.Kind, ListKind: "ToolList", Plural: "tools", Singular: "tool"}
	return crd
}

// The service kind of provider C in TestProviderIsolation, a backup
// service like openMCP's Velero provider, whose platform operator lets it
// bind ClusterRoles on its tenants' MCPs.
const backupGroup = "backuptest.services.open-control-plane.io"

var backupKind = schema.GroupVersionKind{Group: backupGroup, Version: "v1alpha1", Kind: "Backup"}

func backupCRD() *apiextensionsv1.CustomResourceDefinition {
	crd := widgetCRD()
	crd.Name = "backups." + backupGroup
	crd.Spec.Group = backupGroup
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Kind: backupKind.Kind, ListKind: "BackupList", Plural: "backups", Singular: "backup"}
	return crd
}

// bindClusterRoles is what the platform operator adds to provider C's MCP
// ceiling (spec.accessPolicy.mcp), as service-provider-velero needs it to
// bind its server's ServiceAccount to cluster-admin.
var bindClusterRoles = rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}}

// isolationEnv is what the attacks of issue #32 on target clusters need:
// providers A and B, each with its namespace as the operator makes it; one
// API server with the token controller (so that a token Secret gets its
// token, as on a real cluster), registered as the MCP of A's tenant
// isolation-tenant/demo and as a shared workload cluster, and serving as
// the onboarding cluster where the tenant's Tool lives; the MCP's admin
// access, granted as the MCP controller asks for it.
type isolationEnv struct {
	target           *testenv.Cluster
	clustersNS       string
	nsA, nsB, nsC    string
	idA, idB, idC    string
	tenantCR         types.NamespacedName
	adminServiceAcct string
}

// Rules of the platform operator's spec.accessPolicy for provider A: the
// opt-ins a real provider asks for (service-provider-velero's
// serviceaccounts/token on the MCP), and Secrets, ConfigMaps and namespaced
// RBAC in every namespace of the workload cluster.
var (
	tokenRequests = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}
	wideWorkload  = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "create", "update", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"get", "create", "update", "delete"}},
	}
)

func startIsolationEnv(t *testing.T) *isolationEnv {
	t.Helper()
	optest.StartEnv(t)
	ctx := t.Context()
	e := &isolationEnv{
		target:     testenv.Start(t, testenv.WithName("isolation"), testenv.WithCRDs(toolCRD(), backupCRD()), testenv.WithControllerManager("serviceaccount-token")),
		clustersNS: optest.NewNamespace(t, "isolation-clusters"),
	}
	optest.RegisterCluster(t, e.clustersNS, "mcp", e.target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)
	optest.RegisterCluster(t, e.clustersNS, "workload", e.target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)

	newProvider := func(name string, kinds []metav1.GroupVersionKind, p *providerv1alpha1.AccessPolicy) (string, string) {
		sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name}}
		sp.Spec.Image = "example.com/" + name + ":v1"
		sp.Spec.AccessPolicy = p
		create(t, optest.Platform.Client, sp)
		sp.Status.Resources = kinds
		if err := optest.Platform.Client.Status().Update(ctx, sp); err != nil {
			t.Fatal(err)
		}
		return optest.NewProviderNamespace(t, "sp-"+name, policy.KindServiceProvider, sp), access.ProviderID(policy.KindServiceProvider, name)
	}
	e.nsA, e.idA = newProvider("isolation-a", []metav1.GroupVersionKind{metav1.GroupVersionKind(toolKind)},
		&providerv1alpha1.AccessPolicy{MCP: []rbacv1.PolicyRule{tokenRequests}, Workload: wideWorkload})
	e.nsB, e.idB = newProvider("isolation-b", nil, nil)
	e.nsC, e.idC = newProvider("isolation-c", []metav1.GroupVersionKind{metav1.GroupVersionKind(backupKind)},
		&providerv1alpha1.AccessPolicy{MCP: []rbacv1.PolicyRule{tokenRequests, bindClusterRoles}})

	// A's tenant: its Tool on the onboarding cluster, its MCP's granted
	// ClusterRequest on the platform.
	tenant := types.NamespacedName{Namespace: "isolation-tenant", Name: "demo"}
	create(t, e.target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant.Namespace}})
	tool := &unstructured.Unstructured{}
	tool.SetGroupVersionKind(toolKind)
	tool.SetNamespace(tenant.Namespace)
	tool.SetName(tenant.Name)
	createServed(t, e.target.Client, tool)
	// The tenant is C's too.
	backup := &unstructured.Unstructured{}
	backup.SetGroupVersionKind(backupKind)
	backup.SetNamespace(tenant.Namespace)
	backup.SetName(tenant.Name)
	createServed(t, e.target.Client, backup)
	e.tenantCR = mcpClusterRequest(t, tenant, types.NamespacedName{Namespace: e.clustersNS, Name: "mcp"})

	// The tenant check reads the onboarding cluster: the target here.
	onboarding := func(ctx context.Context) (client.Reader, error) { return e.target.Client, ctx.Err() }
	optest.StartManagerFor(t, []string{e.nsA, e.nsB, e.nsC, e.clustersNS, e.tenantCR.Namespace}, func(mgr ctrl.Manager) error {
		if err := clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-isolation")).SetupWithManager(mgr); err != nil {
			return err
		}
		return access.NewReconciler(mgr.GetClient(), access.WithName("ar-isolation"), access.WithOnboarding(onboarding)).SetupWithManager(mgr)
	})

	// The MCP's admin access, as the MCP controller asks for it for
	// spec.iam.tokens: not policed, not limited by the admission policies.
	admin := createAccessRequest(t, &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: tenant.Name + ".admin", Namespace: e.tenantCR.Namespace, Labels: map[string]string{
			corev2alpha1.MCPNameLabel: tenant.Name, corev2alpha1.MCPNamespaceLabel: tenant.Namespace,
		}},
		Spec: clustersv1alpha1.AccessRequestSpec{RequestRef: ref(e.tenantCR), Token: &clustersv1alpha1.TokenConfig{
			RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "cluster-admin"}},
		}},
	})
	waitAccess(t, admin.Namespace, admin.Name, clustersv1alpha1.RequestGranted, access.ReasonGranted)
	e.adminServiceAcct = access.ServiceAccountName(admin)
	return e
}

// grant creates an AccessRequest in namespace ns with the token config,
// through clusterRef or requestRef, waits until it is granted and returns
// a client with its credentials.
func (e *isolationEnv) grant(t *testing.T, ns, name string, clusterRef, requestRef *common.ObjectReference, token *clustersv1alpha1.TokenConfig) client.Client {
	t.Helper()
	c, _ := e.grantRequest(t, ns, name, clusterRef, requestRef, token)
	return c
}

// grantRequest is grant that also returns the granted request.
func (e *isolationEnv) grantRequest(t *testing.T, ns, name string, clusterRef, requestRef *common.ObjectReference, token *clustersv1alpha1.TokenConfig) (client.Client, *clustersv1alpha1.AccessRequest) {
	t.Helper()
	createAccessRequest(t, &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       clustersv1alpha1.AccessRequestSpec{ClusterRef: clusterRef, RequestRef: requestRef, Token: token},
	})
	ar := waitAccess(t, ns, name, clustersv1alpha1.RequestGranted, access.ReasonGranted)
	return kubeconfigClient(t, getSecret(t, ns, ar.Status.SecretRef.Name)), ar
}

func (e *isolationEnv) workload() *common.ObjectReference {
	return &common.ObjectReference{Name: "workload", Namespace: e.clustersNS}
}

// forbidden checks that err is the API server's Forbidden with a message
// that contains want. When the attack succeeded, describe says what it
// achieved.
func forbidden(t *testing.T, what string, err error, want string, describe func() string) {
	t.Helper()
	switch {
	case err == nil:
		msg := what + ": allowed, want Forbidden"
		if describe != nil {
			msg += "; " + describe()
		}
		t.Error(msg)
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: got %v, want Forbidden", what, err)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: Forbidden with %q, want a message with %q", what, err, want)
	}
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want it allowed", what, err)
	}
}

// tokenOf waits up to 10 s for the token controller to fill the token
// Secret key and says whose token it holds.
func tokenOf(c client.Client, key client.ObjectKey) func() string {
	return func() string {
		s := &corev1.Secret{}
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return c.Get(ctx, key, s) == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0, nil
		})
		if err != nil {
			return "the token controller did not fill it within 10 s"
		}
		return fmt.Sprintf("the token controller filled Secret %s with the token of ServiceAccount %s (%d bytes), readable by the provider",
			key, s.Annotations[corev1.ServiceAccountNameKey], len(s.Data[corev1.ServiceAccountTokenKey]))
	}
}

func tokenSecret(namespace, name, serviceAccount string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{corev1.ServiceAccountNameKey: serviceAccount}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
}

func webhookRule(group, resource string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
	}
}

// mutatingWebhook is a webhook configuration whose webhook nobody serves;
// it is ignored when called, so that one that was wrongly allowed does not
// break the rest of the test.
func mutatingWebhook(name string, rule admissionregistrationv1.RuleWithOperations) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "steal.isolation.example",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/mutate")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			TimeoutSeconds:          ptr.To[int32](1),
		}},
	}
}

func deployment(namespace, name, serviceAccount string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: serviceAccount,
					Containers:         []corev1.Container{{Name: "c", Image: "example.com/steal:v1"}},
				},
			},
		},
	}
}

// TestProviderIsolation plays the attacks of issue #32 on the two known
// limits of the access policy with providers' real tokens: a provider
// minting ServiceAccount tokens on its tenant's MCP (the MCP's admin
// access among them), and a provider writing in another provider's
// namespaces on a shared workload cluster. Each is refused with a clear
// reason; what the providers need keeps working.
func TestProviderIsolation(t *testing.T) {
	e := startIsolationEnv(t)
	t.Run("MCP", func(t *testing.T) { testMCPTokens(t, e) })
	t.Run("MCPBinder", func(t *testing.T) { testMCPBinder(t, e) })
	t.Run("SharedWorkloadCluster", func(t *testing.T) { testSharedWorkload(t, e) })
}

// testMCPTokens: provider A, with the MCP ceiling's Secrets, workloads and
// namespaces on its tenant's MCP and the platform operator's
// serviceaccounts/token, tries to get the token of the MCP's admin access
// and of the tenant's robot ServiceAccount (bound to cluster-admin).
func testMCPTokens(t *testing.T, e *isolationEnv) {
	ctx := t.Context()
	all := []string{"get", "list", "create", "update", "delete"}
	a, aMCP := e.grantRequest(t, e.nsA, "mcp", nil, ref(e.tenantCR), &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "serviceaccounts", "namespaces"}, Verbs: all},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, Verbs: all},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings", "rolebindings"}, Verbs: all},
		tokenRequests,
	}}}})

	// The tenant's automation on its MCP.
	const team, robot = "isolation-team", "robot"
	create(t, e.target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})
	create(t, e.target.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: robot, Namespace: team}})
	create(t, e.target.Client, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "isolation-team-robot"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: robot, Namespace: team}},
	})

	t.Run("AdminTokenSecret", func(t *testing.T) {
		s := tokenSecret(access.AccessNamespace, "steal-admin", e.adminServiceAcct)
		forbidden(t, "token Secret for the MCP's admin ServiceAccount in "+access.AccessNamespace, a.Create(ctx, s),
			"namespace "+access.AccessNamespace+" holds the ServiceAccounts of every AccessRequest", tokenOf(e.target.Client, client.ObjectKeyFromObject(s)))
	})
	t.Run("OtherServiceAccountTokenSecret", func(t *testing.T) {
		s := tokenSecret(team, "steal-robot", robot)
		forbidden(t, "token Secret for the tenant's ServiceAccount "+team+"/"+robot, a.Create(ctx, s),
			"only in the namespaces it created; namespace "+team+" is not labelled "+access.NamespaceOwnerLabel+"="+e.idA, tokenOf(e.target.Client, client.ObjectKeyFromObject(s)))
	})
	t.Run("TokenRequest", func(t *testing.T) {
		tr := &authenticationv1.TokenRequest{}
		err := a.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: robot, Namespace: team}}, tr)
		forbidden(t, "TokenRequest for "+team+"/"+robot, err, "only in the namespaces it created", func() string {
			return fmt.Sprintf("got a token of %d bytes", len(tr.Status.Token))
		})
	})
	t.Run("PodsAsOtherServiceAccount", func(t *testing.T) {
		forbidden(t, "Deployment in "+team+" running as "+robot, a.Create(ctx, deployment(team, "steal", robot)), "Pods running as a ServiceAccount other than default", nil)
		d := deployment(team, "plain", "")
		allowed(t, "Deployment in "+team+" running as default", a.Create(ctx, d))
		allowed(t, "delete it", a.Delete(ctx, d))
	})
	t.Run("DelegatedServiceAccount", func(t *testing.T) {
		// A creates a ServiceAccount in a namespace of its own, where it
		// may mint its token, and binds it to all it holds (RBAC's
		// escalation check allows that): the ServiceAccount would do
		// for A what A may not.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "isolation-a-agent"}}
		allowed(t, "create a namespace", a.Create(ctx, ns))
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns.Name}}
		allowed(t, "create a ServiceAccount in it", a.Create(ctx, sa))
		ownRole := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: access.ServiceAccountNameFor(aMCP, e.idA) + "-p0"}
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "isolation-a-agent"},
			RoleRef:    ownRole,
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns.Name}},
		}
		err := a.Create(ctx, crb)
		forbidden(t, "bind its ServiceAccount to its ClusterRole cluster-wide", err, "only in RoleBindings in the namespaces it created", nil)
		for _, s := range []rbacv1.Subject{
			{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:" + ns.Name},
			{Kind: rbacv1.UserKind, Name: "system:serviceaccount:" + ns.Name + ":" + sa.Name},
			{Kind: rbacv1.GroupKind, Name: "system:authenticated"},
		} {
			forbidden(t, "bind "+s.Kind+" "+s.Name+" in the tenant's namespace", a.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-", Namespace: team}, RoleRef: ownRole, Subjects: []rbacv1.Subject{s},
			}), "only in RoleBindings in the namespaces it created", nil)
		}
		// The tenant's people may get what A holds; A's ServiceAccount may
		// get it in A's namespace.
		allowed(t, "bind the tenant's group in its namespace", a.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "viewers", Namespace: team}, RoleRef: ownRole,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "isolation-team-viewers"}},
		}))
		allowed(t, "bind its ServiceAccount in its own namespace", a.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns.Name}, RoleRef: ownRole,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns.Name}},
		}))
		if err == nil {
			t.Cleanup(func() { _ = e.target.Client.Delete(context.Background(), crb) })
		}
		// The agent's token holds A's rights in A's namespace only.
		tr := &authenticationv1.TokenRequest{}
		allowed(t, "TokenRequest for it", a.SubResource("token").Create(ctx, sa, tr))
		cfg := rest.CopyConfig(e.target.Config)
		cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, tr.Status.Token
		agent, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		allowed(t, "the agent's Secret in its namespace", agent.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-config", Namespace: ns.Name}}))
		s := tokenSecret(access.AccessNamespace, "agent-steal-admin", e.adminServiceAcct)
		forbidden(t, "the agent's token Secret for the MCP's admin ServiceAccount", agent.Create(ctx, s), "cannot create resource", tokenOf(e.target.Client, client.ObjectKeyFromObject(s)))
		s = tokenSecret(team, "agent-steal-robot", robot)
		forbidden(t, "the agent's token Secret for "+team+"/"+robot, agent.Create(ctx, s), "cannot create resource", tokenOf(e.target.Client, client.ObjectKeyFromObject(s)))
	})
	t.Run("Webhooks", func(t *testing.T) {
		// A mutating webhook on Deployments would let A run the tenant's
		// (or another provider's) Deployments with its own image under
		// their ServiceAccounts; one on RBAC would add A to bindings.
		for name, rule := range map[string]admissionregistrationv1.RuleWithOperations{
			"deployments": webhookRule("apps", "deployments"),
			"pods":        webhookRule("", "pods"),
			"rbac":        webhookRule(rbacv1.GroupName, "rolebindings"),
			"everything":  webhookRule("*", "*"),
		} {
			w := mutatingWebhook("steal-"+name, rule)
			err := a.Create(ctx, w)
			forbidden(t, "MutatingWebhookConfiguration on "+name, err, "may intercept only API groups of custom resources", nil)
			if err == nil {
				_ = e.target.Client.Delete(ctx, w)
			}
		}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "isolation-deny-pods"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "deny.isolation.example", ClientConfig: mutatingWebhook("x", webhookRule("", "pods")).Webhooks[0].ClientConfig,
				Rules: []admissionregistrationv1.RuleWithOperations{webhookRule("", "pods")}, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Ignore), TimeoutSeconds: ptr.To[int32](1),
			}},
		}
		err := a.Create(ctx, v)
		forbidden(t, "ValidatingWebhookConfiguration on pods", err, "may intercept only API groups of custom resources", nil)
		if err == nil {
			_ = e.target.Client.Delete(ctx, v)
		}
		// Its own domain service's webhook, on its own kinds.
		own := mutatingWebhook("isolation-tools", webhookRule(isolationGroup, "tools"))
		allowed(t, "MutatingWebhookConfiguration on its own kinds", a.Create(ctx, own))
		allowed(t, "delete it", a.Delete(ctx, own))
	})
	t.Run("AccessNamespace", func(t *testing.T) {
		forbidden(t, "Opaque Secret in "+access.AccessNamespace, a.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plant", Namespace: access.AccessNamespace}}),
			"may not write in it", nil)
		forbidden(t, "delete namespace "+access.AccessNamespace, a.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: access.AccessNamespace}}),
			"may not write in it", nil)
		forbidden(t, "ServiceAccount in "+access.AccessNamespace, a.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ar-0123456789abcdef.sp-isolation-b", Namespace: access.AccessNamespace}}),
			"may not write in it", nil)
	})
	t.Run("OrdinarySecrets", func(t *testing.T) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: team}, StringData: map[string]string{"password": "x"}}
		allowed(t, "Opaque Secret in the tenant's namespace", a.Create(ctx, s))
		got := &corev1.Secret{}
		allowed(t, "read it back", a.Get(ctx, client.ObjectKeyFromObject(s), got))
		s.StringData = map[string]string{"password": "y"}
		allowed(t, "update it", a.Update(ctx, s))
		allowed(t, "delete it", a.Delete(ctx, s))
	})
	t.Run("OwnNamespace", func(t *testing.T) {
		// A namespace A creates is A's, even when A claims it for B.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "isolation-a-things", Labels: map[string]string{access.NamespaceOwnerLabel: e.idB}}}
		allowed(t, "create a namespace", a.Create(ctx, ns))
		if got := ns.Labels[access.NamespaceOwnerLabel]; got != e.idA {
			t.Fatalf("namespace A created is labelled %s=%q, want %q", access.NamespaceOwnerLabel, got, e.idA)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns.Name}}
		allowed(t, "create a ServiceAccount in it", a.Create(ctx, sa))
		s := tokenSecret(ns.Name, "worker-token", sa.Name)
		allowed(t, "token Secret for its own ServiceAccount", a.Create(ctx, s))
		if got := tokenOf(a, client.ObjectKeyFromObject(s))(); !strings.Contains(got, "filled") {
			t.Errorf("its own token Secret: %s", got)
		}
		tr := &authenticationv1.TokenRequest{}
		allowed(t, "TokenRequest for its own ServiceAccount", a.SubResource("token").Create(ctx, sa, tr))
		allowed(t, "Deployment running as its own ServiceAccount", a.Create(ctx, deployment(ns.Name, "worker", sa.Name)))
		relabelled := ns.DeepCopy()
		relabelled.Labels[access.NamespaceOwnerLabel] = e.idB
		forbidden(t, "relabel its namespace for B", a.Update(ctx, relabelled), "may not change the label", nil)
		tenants := &corev1.Namespace{}
		allowed(t, "read the tenant's namespace", a.Get(ctx, client.ObjectKey{Name: team}, tenants))
		tenants.Labels[access.NamespaceOwnerLabel] = e.idA
		forbidden(t, "claim the tenant's namespace", a.Update(ctx, tenants), "may not change the label", nil)
		forbidden(t, "delete the tenant's namespace", a.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}), "may delete only the namespaces it created", nil)
		allowed(t, "delete its namespace", a.Delete(ctx, ns))
	})
}

// testSharedWorkload: providers A and B share the workload cluster. B has
// a namespace the operator created for its Role and one it created
// itself; A tries to get Roles there, to write there with the platform
// operator's cluster-wide rules, and to delete them.
func testSharedWorkload(t *testing.T, e *isolationEnv) {
	ctx := t.Context()
	rw := []string{"get", "create", "update", "delete"}
	namespaces := clustersv1alpha1.PermissionsRequest{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "delete"}}}}
	inNamespace := func(ns string) clustersv1alpha1.PermissionsRequest {
		return clustersv1alpha1.PermissionsRequest{Namespace: ns, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: rw},
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: rw},
		}}
	}
	const aData, bData, bOwn, aOwn, unowned = "isolation-a-data", "isolation-b-data", "isolation-b-own", "isolation-a-own", "isolation-platform"

	b := e.grant(t, e.nsB, "workload", e.workload(), nil, &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{namespaces, inNamespace(bData)}})
	allowed(t, "B creates a namespace", b.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bOwn}}))
	a := e.grant(t, e.nsA, "workload", e.workload(), nil, &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{namespaces, inNamespace(aData)}})
	for ns, id := range map[string]string{bData: e.idB, bOwn: e.idB, aData: e.idA} {
		got := &corev1.Namespace{}
		if err := e.target.Client.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
			t.Fatal(err)
		}
		if got.Labels[access.NamespaceOwnerLabel] != id {
			t.Errorf("namespace %s is labelled %s=%q, want %q", ns, access.NamespaceOwnerLabel, got.Labels[access.NamespaceOwnerLabel], id)
		}
	}
	create(t, e.target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unowned}})

	t.Run("RolesInOtherProvidersNamespaces", func(t *testing.T) {
		for i, ns := range []string{bData, bOwn} {
			name := fmt.Sprintf("steal-%d", i)
			createAccessRequest(t, &clustersv1alpha1.AccessRequest{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.nsA},
				Spec: clustersv1alpha1.AccessRequestSpec{ClusterRef: e.workload(), Token: &clustersv1alpha1.TokenConfig{
					Permissions: []clustersv1alpha1.PermissionsRequest{inNamespace(ns)},
				}},
			})
			e.waitDenied(t, e.nsA, name, "namespace "+ns+" belongs to another provider")
		}
		// Denied before anything is written for them: nothing brings
		// them back.
		start := testenv.SettledReconcileCount(t, "ar-isolation", 30*time.Second)
		optest.Consistently(t, 3*time.Second, "reconciles after the denials", func() error {
			if n := testenv.ReconcileCount(t, "ar-isolation") - start; n > 1 {
				return fmt.Errorf("%v reconciles, want at most 1", n)
			}
			return nil
		})
	})
	t.Run("RoleInUnownedNamespace", func(t *testing.T) {
		createAccessRequest(t, &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "unowned", Namespace: e.nsA},
			Spec: clustersv1alpha1.AccessRequestSpec{ClusterRef: e.workload(), Token: &clustersv1alpha1.TokenConfig{
				Permissions: []clustersv1alpha1.PermissionsRequest{inNamespace(unowned)},
			}},
		})
		e.waitDenied(t, e.nsA, "unowned", "namespace "+unowned+" exists on this shared cluster and belongs to no provider")

		// The platform operator gives it to A.
		ns := &corev1.Namespace{}
		if err := e.target.Client.Get(ctx, client.ObjectKey{Name: unowned}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels[access.NamespaceOwnerLabel] = e.idA
		if err := e.target.Client.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		touch(t, e.nsA, "unowned")
		waitAccess(t, e.nsA, "unowned", clustersv1alpha1.RequestGranted, access.ReasonGranted)

		// And takes it back: the grant is revoked at the next check.
		if err := e.target.Client.Get(ctx, client.ObjectKey{Name: unowned}, ns); err != nil {
			t.Fatal(err)
		}
		delete(ns.Labels, access.NamespaceOwnerLabel)
		if err := e.target.Client.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		touch(t, e.nsA, "unowned")
		e.waitDenied(t, e.nsA, "unowned", "namespace "+unowned+" exists on this shared cluster and belongs to no provider")
	})
	t.Run("WritesInOtherProvidersNamespace", func(t *testing.T) {
		// With the platform operator's cluster-wide rules, A's token may
		// write in every namespace as far as RBAC goes.
		wide := e.grant(t, e.nsA, "wide", e.workload(), nil, &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: wideWorkload}}})
		for _, ns := range []string{bData, bOwn} {
			forbidden(t, "ConfigMap in B's namespace "+ns, wide.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plant", Namespace: ns}}),
				"namespace "+ns+" belongs to another provider", nil)
			forbidden(t, "Role in B's namespace "+ns, wide.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "plant", Namespace: ns}}),
				"namespace "+ns+" belongs to another provider", nil)
			forbidden(t, "RoleBinding in B's namespace "+ns, wide.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "plant", Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mallory"}},
			}), "namespace "+ns+" belongs to another provider", nil)
			forbidden(t, "token Secret in B's namespace "+ns, wide.Create(ctx, tokenSecret(ns, "steal", "default")), "belongs to another provider", nil)
		}
		allowed(t, "ConfigMap in A's namespace with the wide token", wide.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: aData}}))
	})
	t.Run("DeleteOthersNamespaces", func(t *testing.T) {
		for _, ns := range []string{bOwn, bData, unowned} {
			forbidden(t, "delete namespace "+ns, a.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "may delete only the namespaces it created", nil)
		}
		forbidden(t, "delete namespace "+access.AccessNamespace, a.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: access.AccessNamespace}}), "may not write in it", nil)
	})
	t.Run("OwnNamespaces", func(t *testing.T) {
		allowed(t, "ConfigMap in its namespace", a.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: aData}}))
		allowed(t, "Role in its namespace", a.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: aData},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}))
		allowed(t, "RoleBinding in its namespace", a.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: aData},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: aData}},
		}))
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aOwn}}
		allowed(t, "create a namespace", a.Create(ctx, ns))
		allowed(t, "delete it", a.Delete(ctx, ns))
		allowed(t, "B still writes in its namespace", b.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: bData}}))
	})
	t.Run("UpgradeAdoptsTheRequestsNamespace", func(t *testing.T) {
		// The namespace the operator created for A's request, as an
		// operator without owners left it: no owner label.
		ns := &corev1.Namespace{}
		if err := e.target.Client.Get(ctx, client.ObjectKey{Name: aData}, ns); err != nil {
			t.Fatal(err)
		}
		delete(ns.Labels, access.NamespaceOwnerLabel)
		if err := e.target.Client.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		touch(t, e.nsA, "workload")
		optest.Eventually(t, 30*time.Second, "namespace "+aData+" labelled for A again", func(ctx context.Context) (bool, error) {
			if err := e.target.Client.Get(ctx, client.ObjectKey{Name: aData}, ns); err != nil {
				return false, err
			}
			return ns.Labels[access.NamespaceOwnerLabel] == e.idA, nil
		})
		waitAccess(t, e.nsA, "workload", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	})
}

// waitDenied is waitDenied of the isolation target: Denied by the rule of
// namespace owners with a message that contains detail, and nothing of the
// request on the target.
func (e *isolationEnv) waitDenied(t *testing.T, ns, name, detail string) {
	t.Helper()
	ar := waitAccess(t, ns, name, clustersv1alpha1.RequestDenied, access.ReasonPolicyViolation)
	_, _, msg := optest.ReadyReason(ar.Status.Conditions)
	if want := fmt.Sprintf("rule %q", policy.RuleNamespaceOwner); !strings.Contains(msg, want) || !strings.Contains(msg, detail) {
		t.Errorf("message %q does not name %s and %q", msg, want, detail)
	}
	if slices.Contains(ar.Finalizers, access.Finalizer) || ar.Status.SecretRef != nil {
		t.Errorf("denied request has finalizer %v, secretRef %v", ar.Finalizers, ar.Status.SecretRef)
	}
	var left []string
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := e.target.Client.List(t.Context(), list, client.MatchingLabels{access.RequestUIDLabel: string(ar.UID)}); err != nil {
			t.Fatal(err)
		}
		items, _ := apimeta.ExtractList(list)
		for _, item := range items {
			o := item.(client.Object)
			left = append(left, fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()))
		}
	}
	if len(left) > 0 {
		t.Errorf("objects on the target for a denied request: %v", left)
	}
}

// touch changes an annotation of the AccessRequest, which makes the
// controller check it again (as a platform operator would after fixing
// what the Denied message names).
func touch(t *testing.T, ns, name string) {
	t.Helper()
	ar := &clustersv1alpha1.AccessRequest{}
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, ar); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ar.DeepCopy())
	if ar.Annotations == nil {
		ar.Annotations = map[string]string{}
	}
	ar.Annotations["isolation.test/touched"] = time.Now().Format(time.RFC3339Nano)
	if err := optest.Platform.Client.Patch(t.Context(), ar, patch); err != nil {
		t.Fatal(err)
	}
}

// testMCPBinder: provider C, whose platform operator granted it bind on
// ClusterRoles on its tenants' MCPs, binds the ServiceAccount of its
// domain service to cluster-admin, as service-provider-velero does for its
// server. It still may not bind the ServiceAccounts of other requests or
// Kubernetes' own users and groups, and a provider without the grant (A,
// testMCPTokens) still may not bind its ServiceAccounts at all.
func testMCPBinder(t *testing.T, e *isolationEnv) {
	ctx := t.Context()
	all := []string{"get", "list", "create", "update", "delete"}
	c, cMCP := e.grantRequest(t, e.nsC, "mcp", nil, ref(e.tenantCR), &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "namespaces"}, Verbs: all},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, Verbs: all},
		bindClusterRoles, tokenRequests,
	}}}})
	if got, want := cMCP.Annotations[access.TargetClusterAnnotation], e.clustersNS+"/mcp"; got != want {
		t.Fatalf("request granted on %q, want %q", got, want)
	}
	sa := &corev1.ServiceAccount{}
	if err := e.target.Client.Get(ctx, client.ObjectKey{Namespace: access.AccessNamespace, Name: access.BinderServiceAccountNameFor(cMCP, e.idC)}, sa); err != nil {
		t.Fatalf("the binder's ServiceAccount: %v", err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "isolation-c-backup"}}
	allowed(t, "create a namespace", c.Create(ctx, ns))
	server := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "backup-server", Namespace: ns.Name}}
	allowed(t, "create its server's ServiceAccount", c.Create(ctx, server))
	clusterAdmin := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "isolation-c-backup-server"},
		RoleRef:    clusterAdmin,
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: server.Name, Namespace: ns.Name}},
	}
	allowed(t, "bind its server's ServiceAccount to cluster-admin", c.Create(ctx, crb))
	t.Cleanup(func() { _ = e.target.Client.Delete(context.Background(), crb) })
	tr := &authenticationv1.TokenRequest{}
	allowed(t, "TokenRequest for its server", c.SubResource("token").Create(ctx, server, tr))

	for _, s := range []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: e.adminServiceAcct, Namespace: access.AccessNamespace},
		{Kind: rbacv1.ServiceAccountKind, Name: "ar-0123456789abcdef.sp-isolation-b", Namespace: access.AccessNamespace},
		{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts"},
		{Kind: rbacv1.UserKind, Name: "system:serviceaccount:" + ns.Name + ":" + server.Name},
	} {
		forbidden(t, "bind "+s.Kind+" "+s.Name+" to cluster-admin", c.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "isolation-c-steal-"}, RoleRef: clusterAdmin, Subjects: []rbacv1.Subject{s},
		}), "only in RoleBindings in the namespaces it created", nil)
	}
}
