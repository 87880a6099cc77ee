package clusteraccess_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/providertest"
)

// readCRDs is what the tests' init asks for on the onboarding cluster.
var readCRDs = []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}}}

// TestOnboarding obtains onboarding access as a provider's init does, with
// the init ServiceAccount's platform permissions (which cannot update
// requests), and checks that the cluster survives a token the API server no
// longer accepts.
func TestOnboarding(t *testing.T) {
	l := env(t)
	t.Parallel()
	ns := l.ProviderNamespace(t, "sp-onboarding")
	pc := providerClient(t, l, ns, "init", nil, initRoleRules)
	m, err := clusteraccess.New(pc, providerName, ns,
		clusteraccess.WithPollInterval(200*time.Millisecond), clusteraccess.WithTimeout(pollTimeout),
		clusteraccess.WithTokenRefreshInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	perms := clusteraccess.Permissions{Rules: readCRDs}
	cluster, err := m.Onboarding(ctx, "init", perms)
	if err != nil {
		t.Fatalf("Onboarding() = %v", err)
	}
	if cluster.Name() != providertest.OnboardingClusterName {
		t.Errorf("Name() = %q, want %q", cluster.Name(), providertest.OnboardingClusterName)
	}
	c := cluster.Client()
	if err := c.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{}); err != nil {
		t.Errorf("list CRDs (allowed): %v", err)
	}
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: got %v, want Forbidden", err)
	}
	key := client.ObjectKey{Namespace: ns, Name: clusteraccess.RequestName(providerName, "onboarding-init")}
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := l.Platform.Client.Get(ctx, key, cr); err != nil || cr.Spec.Purpose != clustersv1alpha1.PurposeOnboarding {
		t.Errorf("ClusterRequest %s: %v, purpose %q; want purpose onboarding", key, err, cr.Spec.Purpose)
	}

	t.Run("Again", func(t *testing.T) {
		// A second init finds its requests: nothing to update (init may
		// not), granted at once.
		if _, err := m.Onboarding(ctx, "init", perms); err != nil {
			t.Fatalf("Onboarding() again = %v", err)
		}
	})

	t.Run("TokenReplaced", func(t *testing.T) {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := l.Platform.Client.Get(ctx, key, ar); err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{}
		if err := l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ar.Status.SecretRef.Name}, secret); err != nil {
			t.Fatal(err)
		}
		oldCfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
		if err != nil {
			t.Fatal(err)
		}
		old, err := client.New(oldCfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Invalidate the token: delete its ServiceAccount on the
		// onboarding cluster and wait until the API server rejects it.
		// The operator labels it with the request's UID (its name names
		// the provider too, when the request is the provider's).
		accounts := &corev1.ServiceAccountList{}
		if err := l.Onboarding.Client.List(ctx, accounts, client.InNamespace(access.AccessNamespace), client.MatchingLabels{access.RequestUIDLabel: string(ar.UID)}); err != nil || len(accounts.Items) != 1 {
			t.Fatalf("the ServiceAccount of AccessRequest %s: %d found, %v", key, len(accounts.Items), err)
		}
		if err := l.Onboarding.Client.Delete(ctx, &accounts.Items[0]); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the old token is rejected", func(ctx context.Context) error {
			switch err := old.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{}); {
			case err == nil:
				return errors.New("the old token is still accepted, want Unauthorized")
			case !apierrors.IsUnauthorized(err):
				return fmt.Errorf("got %w, want Unauthorized", err)
			}
			return nil
		})
		// Deleting the Secret makes the operator recreate the
		// ServiceAccount and write a new token.
		if err := l.Platform.Client.Delete(ctx, secret); err != nil {
			t.Fatal(err)
		}
		// The refresh interval is an hour: only the rejection makes the
		// cluster read the new token.
		eventually(t, "the cluster works with the new token", func(ctx context.Context) error {
			return c.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{})
		})
	})
}

// TestRequestDenied asks for a purpose no cluster serves: the error wraps
// ErrAccessDenied and says why.
func TestRequestDenied(t *testing.T) {
	l := env(t)
	t.Parallel()
	ns := l.ProviderNamespace(t, "sp-denied")
	m, err := clusteraccess.New(l.Platform.Client, providerName, ns,
		clusteraccess.WithPollInterval(200*time.Millisecond), clusteraccess.WithTimeout(pollTimeout))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Request(t.Context(), "nothing-serves-this", "x", clusteraccess.Permissions{Rules: readCRDs})
	t.Logf("Request() = %v", err)
	if !errors.Is(err, clusteraccess.ErrAccessDenied) || !strings.Contains(err.Error(), "NoMatchingCluster") {
		t.Errorf("Request() = %v, want ErrAccessDenied naming the reason NoMatchingCluster", err)
	}
}

// TestRequestTimeout names what is pending when access is not granted in
// time.
func TestRequestTimeout(t *testing.T) {
	l := env(t)
	t.Parallel()
	ns := l.ProviderNamespace(t, "sp-timeout")
	// The timeout covers creating the requests and the grant of the
	// ClusterRequest before them, so it must outlast those on a loaded
	// machine (1 s did not, with other tests of the package running in
	// parallel; 10 s did not once in a full make test, ending while the
	// ClusterRequest was still pending); nothing grants this access, so
	// any timeout ends the same way.
	m, err := clusteraccess.New(l.Platform.Client, providerName, ns,
		clusteraccess.WithPollInterval(100*time.Millisecond), clusteraccess.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A Role in a namespace that must exist but does not: the operator
	// retries and the request stays pending.
	perms := clusteraccess.Permissions{Roles: []clustersv1alpha1.PermissionsRequest{{
		Namespace: "does-not-exist", DisableAutomaticNamespaceCreation: true, Rules: readCRDs,
	}}}
	_, err = m.Onboarding(t.Context(), "pending", perms)
	t.Logf("Onboarding() = %v", err)
	if err == nil || errors.Is(err, clusteraccess.ErrAccessDenied) || !strings.Contains(err.Error(), "AccessRequest "+ns+"/") {
		t.Errorf("Request() = %v, want a timeout naming the pending AccessRequest", err)
	}
}
