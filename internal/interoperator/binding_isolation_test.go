package interoperator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// TestBindingIsolation plays issue #10's attacks on the sample plan
// "small" with real binding tokens against the target API server: a
// binding's credentials cannot mint a token for a service account with
// rights, cannot create role bindings, cannot read or borrow another
// binding's token, and everything a binding was given is revoked at
// unbind.
func TestBindingIsolation(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	applySamplePlanSmall(t, e)
	ctx := context.Background()

	const id = "6f1e2d3c-0000-4000-8000-00000000a010"
	const bidA, bidB = "7a2b3c4d-0000-4000-8000-00000000b010", "7a2b3c4d-0000-4000-8000-00000000b011"
	e.createInstance(t, id, sampleServiceID, samplePlanSmall, nil,
		func(i *osbv1alpha1.SFServiceInstance) { controllerutil.AddFinalizer(i, holdFinalizer) })
	inst := e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
	ns, credsNS := "sf-"+provisioner.InstanceID(e.ns, id), credentialsNamespace(provisioner.InstanceID(e.ns, id))
	e.createBinding(t, bidA, inst)
	e.createBinding(t, bidB, inst)
	credsA, credsB := e.bindCredentials(t, bidA), e.bindCredentials(t, bidB)
	saA, saB := "binding-"+bidA, "binding-"+bidB
	a := tenantClient(t, credsA.APIServer, credsA.CAData, credsA.Token)
	csA := tenantClientset(t, credsA, "")

	// The credentials work where they should: the precondition of every
	// refusal below.
	must(t, a.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-data"}}))

	// minted collects every token an attack obtained, to check after
	// unbind that none outlives it.
	var minted []string
	t.Run("NoTokenForAnotherServiceAccount", func(t *testing.T) {
		// The attack: a service-account-token Secret, created with
		// edit, for a service account with rights. The token controller
		// looks the service account up in the Secret's own namespace; the
		// bindings' service accounts (and no "owner") live elsewhere, so it
		// deletes the Secret without ever filling it in.
		for _, sa := range []string{"owner", saB, saA} {
			secret := tokenSecret(ns, "steal-"+strings.TrimPrefix(sa, "binding-"), sa)
			must(t, a.Create(ctx, secret))
			if token := waitTokenSecretRefused(t, secret); token != "" {
				minted = append(minted, token)
				rb := roleBinding(ns, "escalate-"+strings.TrimPrefix(sa, "binding-"), "admin", saA, credsNS)
				if err := tenantClient(t, credsA.APIServer, credsA.CAData, token).Create(ctx, rb); err == nil {
					t.Errorf("the token minted for %s created a RoleBinding to admin for binding A", sa)
				}
			}
		}
		// A Secret in the namespace of the service accounts is refused
		// outright: the bindings have no rights there.
		if err := a.Create(ctx, tokenSecret(credsNS, "steal-b", saB)); !apierrors.IsForbidden(err) {
			t.Errorf("creating a token Secret in the credentials namespace %s: %v, want Forbidden", credsNS, err)
		}
		// The control: the token controller is running, and the only
		// service account a binding can get a token for, "default", has
		// no rights.
		def := tokenSecret(ns, "default-token", "default")
		must(t, a.Create(ctx, def))
		defToken := waitToken(t, def)
		minted = append(minted, defToken)
		d := tenantClient(t, credsA.APIServer, credsA.CAData, defToken)
		if err := d.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
			t.Errorf("the default service account's token lists ConfigMaps: %v, want Forbidden", err)
		}
		if err := d.Create(ctx, roleBinding(ns, "default-escalates", "admin", "default", ns)); !apierrors.IsForbidden(err) {
			t.Errorf("the default service account's token creates a RoleBinding: %v, want Forbidden", err)
		}
	})

	t.Run("NoTokenRequestOrImpersonation", func(t *testing.T) {
		// edit may request tokens for, and impersonate, the service
		// accounts of its namespace; none of those has rights.
		for _, where := range []string{ns, credsNS} {
			tr, err := csA.CoreV1().ServiceAccounts(where).CreateToken(ctx, saB, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			if err == nil {
				t.Errorf("binding A got a token for %s/%s", where, saB)
				minted = append(minted, tr.Status.Token)
			} else if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
				t.Errorf("token request for %s/%s: %v, want Forbidden or NotFound", where, saB, err)
			}
			as := tenantClientset(t, credsA, fmt.Sprintf("system:serviceaccount:%s:%s", where, saB))
			if _, err := as.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("binding A impersonating %s/%s: %v, want Forbidden", where, saB, err)
			}
		}
	})

	t.Run("NoRoleBindings", func(t *testing.T) {
		// edit has no rights on RBAC: no binding can widen its own role.
		for _, rb := range []*rbacv1.RoleBinding{
			roleBinding(ns, "escalate-admin", "admin", saA, credsNS),
			roleBinding(ns, "escalate-edit", "edit", saA, credsNS),
			roleBinding(credsNS, "escalate-creds", "edit", saA, credsNS),
		} {
			if err := a.Create(ctx, rb); !apierrors.IsForbidden(err) {
				t.Errorf("binding A creating RoleBinding %s/%s to %s: %v, want Forbidden", rb.Namespace, rb.Name, rb.RoleRef.Name, err)
			}
		}
	})

	t.Run("NoOtherBindingsToken", func(t *testing.T) {
		err := a.Get(ctx, client.ObjectKey{Namespace: credsNS, Name: saB + "-token"}, &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("binding A reading binding B's token Secret: %v, want Forbidden", err)
		}
		if err := a.List(ctx, &corev1.SecretList{}, client.InNamespace(credsNS)); !apierrors.IsForbidden(err) {
			t.Errorf("binding A listing the credentials namespace: %v, want Forbidden", err)
		}
		// Every Secret binding A can read holds no token of B's.
		secrets := &corev1.SecretList{}
		must(t, a.List(ctx, secrets, client.InNamespace(ns)))
		for _, s := range secrets.Items {
			if string(s.Data[corev1.ServiceAccountTokenKey]) == credsB.Token {
				t.Errorf("binding A reads binding B's token in Secret %s/%s", s.Namespace, s.Name)
			}
		}
	})

	// Unbind A: its token is rejected, everything it was given is gone,
	// and B keeps working.
	t.Run("UnbindRevokes", func(t *testing.T) {
		deleteAndWait(t, onboarding.Client, e.binding(t, bidA))
		waitFor(t, "binding A's token to be rejected with 401 after unbind", func() bool {
			return apierrors.IsUnauthorized(a.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
		})
		for _, obj := range []client.Object{
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: saA}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: saA + "-token"}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saA}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "sf-" + bidA}},
		} {
			c := target.Client
			if obj.GetNamespace() == e.ns {
				c = onboarding.Client
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s/%s of binding A remains after unbind (%v)", obj, obj.GetNamespace(), obj.GetName(), err)
			}
		}
		// No RoleBinding of the working namespace names A any more.
		rbs := &rbacv1.RoleBindingList{}
		must(t, target.Client.List(ctx, rbs, client.InNamespace(ns)))
		for _, rb := range rbs.Items {
			for _, s := range rb.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Name == saA {
					t.Errorf("RoleBinding %s still names binding A's service account", rb.Name)
				}
			}
		}
		// Whatever binding A minted while it was bound (only a token of
		// the working namespace's "default", in this plan) can do nothing.
		for i, token := range minted {
			err := tenantClient(t, credsA.APIServer, credsA.CAData, token).List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
			if !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
				t.Errorf("token %d that binding A minted still works after unbind: %v, want Unauthorized or Forbidden", i, err)
			}
		}
		b := tenantClient(t, credsB.APIServer, credsB.CAData, credsB.Token)
		if err := b.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)); err != nil {
			t.Errorf("binding B after A's unbind: %v, want its credentials to keep working", err)
		}
	})

	deleteAndWait(t, onboarding.Client, e.binding(t, bidB))
	must(t, onboarding.Client.Delete(ctx, e.instance(t, id)))
	waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: credsNS}})
	waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	release(t, e, id)
}

// TestUnbindTemplateRevokesBindingObjects shows that a plan's unbind
// template cannot make a binding's credentials outlive it: the unbind
// template takes back what the bind template added to an object of the
// instance, and the objects only the binding rendered (here its service
// account) are deleted as they are without an unbind template.
func TestUnbindTemplateRevokesBindingObjects(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	svc := e.createService(t, "svc-unbind")
	e.createPlan(t, "plan-unbind", svc.Spec.ID, []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: users\ndata:\n  owner: instance\n"),
		gotemplate(osbv1alpha1.ActionBind, `apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ printf "binding-%s" .binding.metadata.name | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: users
data:
  {{ .binding.metadata.name | quote }}: bound
`),
		gotemplate(osbv1alpha1.ActionUnbind, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: users\n"),
	})
	inst := e.createInstance(t, "i-unbind", svc.Spec.ID, "plan-unbind", nil)
	e.waitInstance(t, inst.Name, osbv1alpha1.StateSucceeded)
	const bid = "b-unbind"
	e.createBinding(t, bid, inst)
	e.waitBinding(t, bid, osbv1alpha1.StateSucceeded)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "binding-" + bid}}
	must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(sa), sa))

	deleteAndWait(t, onboarding.Client, e.binding(t, bid))
	if err := target.Client.Get(ctx, client.ObjectKeyFromObject(sa), sa); !apierrors.IsNotFound(err) {
		t.Errorf("the binding's service account remains after an unbind with an unbind template (%v), want it deleted", err)
	}
	users := &corev1.ConfigMap{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "users"}, users))
	if _, ok := users.Data[bid]; ok || users.Data["owner"] != "instance" {
		t.Errorf("the instance's ConfigMap after unbind: %v, want the binding's key taken back and the instance's kept", users.Data)
	}
}

// TestEditCannotMintTokensAcrossNamespaces checks the Kubernetes behaviour
// the sample plan's design rests on, with a subject that has nothing but
// edit in one namespace: a service-account-token Secret is filled in only
// for a service account of the Secret's own namespace (naming one of
// another namespace gets the Secret deleted, never a token), and the
// subject can do nothing in the other namespace.
func TestEditCannotMintTokensAcrossNamespaces(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	n := envCounter.Add(1)
	nsA, nsB := fmt.Sprintf("edit-only-%d", n), fmt.Sprintf("powerful-%d", n)
	for _, name := range []string{nsA, nsB} {
		must(t, target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		t.Cleanup(func() { _ = target.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
	}
	// The subject: a service account in B with edit in A only. B also holds
	// a service account with admin in A: the one worth stealing.
	for _, sa := range []string{"subject", "powerful"} {
		must(t, target.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: sa}}))
	}
	must(t, target.Client.Create(ctx, roleBinding(nsA, "subject", "edit", "subject", nsB)))
	must(t, target.Client.Create(ctx, roleBinding(nsA, "powerful", "admin", "powerful", nsB)))
	subjectSecret := tokenSecret(nsB, "subject-token", "subject")
	must(t, target.Client.Create(ctx, subjectSecret))
	token := waitToken(t, subjectSecret)
	creds := bindCreds{APIServer: target.Config.Host, CAData: base64.StdEncoding.EncodeToString(target.Config.CAData), Token: token}
	c := tenantClient(t, creds.APIServer, creds.CAData, creds.Token)
	waitFor(t, "edit to be granted in "+nsA, func() bool {
		return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(nsA)) == nil
	})

	// In A, a Secret naming B's powerful service account gets no token.
	steal := tokenSecret(nsA, "steal", "powerful")
	must(t, c.Create(ctx, steal))
	waitTokenSecretRefused(t, steal)
	// In B, the subject can do nothing at all.
	if err := c.Create(ctx, tokenSecret(nsB, "steal", "powerful")); !apierrors.IsForbidden(err) {
		t.Errorf("creating a token Secret in %s with edit in %s only: %v, want Forbidden", nsB, nsA, err)
	}
	cs := tenantClientset(t, creds, "")
	if _, err := cs.CoreV1().ServiceAccounts(nsB).CreateToken(ctx, "powerful", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a token request in %s with edit in %s only: %v, want Forbidden", nsB, nsA, err)
	}
}

// applySamplePlanSmall creates the sample service and plan "small" in the
// env's own catalog namespace and waits until the plan is valid.
func applySamplePlanSmall(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	createSampleObjects(t, e, nil, "service.yaml", "plan-small.yaml")
	waitFor(t, "the sample plan small to be valid", func() bool {
		p := &osbv1alpha1.SFPlan{}
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "kubernetes-namespace-small"}, p))
		c := readyCondition(p.Status.Conditions)
		return c != nil && c.Status == metav1.ConditionTrue && p.Status.SpecHash != ""
	})
}

// bindCredentials waits until the binding has succeeded and returns the
// credentials of its bind response.
func (e *env) bindCredentials(t *testing.T, bid string) bindCreds {
	t.Helper()
	b := e.waitBinding(t, bid, osbv1alpha1.StateSucceeded)
	if b.Status.Response == nil {
		t.Fatalf("binding %s succeeded without a response Secret", bid)
	}
	secret := &corev1.Secret{}
	must(t, onboarding.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: b.Status.Response.SecretRef}, secret))
	var creds credentials
	must(t, json.Unmarshal(secret.Data[osbv1alpha1.BindingSecretResponseKey], &creds))
	if creds.Credentials.Token == "" {
		t.Fatalf("binding %s: the bind response has no token", bid)
	}
	return creds.Credentials
}

// bindCreds are the credentials of a sample binding.
type bindCreds = struct {
	APIServer string `json:"apiServer"`
	CAData    string `json:"caData"`
	Token     string `json:"token"`
	Namespace string `json:"namespace"`
}

// tenantClientset returns a clientset that authenticates with the bind
// token of c and, when as is set, impersonates as.
func tenantClientset(t *testing.T, c bindCreds, as string) kubernetes.Interface {
	t.Helper()
	ca, err := base64.StdEncoding.DecodeString(c.CAData)
	must(t, err)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: c.APIServer, BearerToken: c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}, Impersonate: rest.ImpersonationConfig{UserName: as}})
	must(t, err)
	return cs
}

// tokenSecret is a service-account-token Secret for the service account sa.
func tokenSecret(namespace, name, sa string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
}

// roleBinding binds the ClusterRole role to the service account
// saNamespace/sa in namespace.
func roleBinding(namespace, name, role, sa, saNamespace string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNamespace}},
	}
}

// waitToken waits until the token controller has filled in the Secret and
// returns its token.
func waitToken(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	var token string
	waitFor(t, "the token controller to fill in "+s.Namespace+"/"+s.Name, func() bool {
		got := &corev1.Secret{}
		if err := target.Client.Get(context.Background(), client.ObjectKeyFromObject(s), got); err != nil {
			return false
		}
		token = string(got.Data[corev1.ServiceAccountTokenKey])
		return token != ""
	})
	// The API server checks a Secret-based token against the Secret in
	// its informer, which can lag the token controller's write under
	// load: until then the token gets 401, not the answer its rights give.
	waitFor(t, "the API server to accept the token of "+s.Namespace+"/"+s.Name, func() bool {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		if err := target.Client.Create(context.Background(), review); err != nil {
			return false
		}
		return review.Status.Authenticated
	})
	return token
}

// waitTokenSecretRefused waits until the token controller has deleted the
// token Secret s, which names a service account that its namespace does
// not have. If the Secret gets a token instead, the test fails and the
// token is returned, so that the caller can show what it could do.
func waitTokenSecretRefused(t *testing.T, s *corev1.Secret) (minted string) {
	t.Helper()
	waitFor(t, "the token controller to delete "+s.Namespace+"/"+s.Name+" (no such service account in its namespace)", func() bool {
		got := &corev1.Secret{}
		err := target.Client.Get(context.Background(), client.ObjectKeyFromObject(s), got)
		if apierrors.IsNotFound(err) {
			return true
		}
		if err == nil && len(got.Data[corev1.ServiceAccountTokenKey]) > 0 {
			minted = string(got.Data[corev1.ServiceAccountTokenKey])
			return true
		}
		return false
	})
	if minted != "" {
		t.Errorf("Secret %s/%s for service account %s got a token: the subject minted credentials", s.Namespace, s.Name, s.Annotations[corev1.ServiceAccountNameKey])
	}
	return minted
}
