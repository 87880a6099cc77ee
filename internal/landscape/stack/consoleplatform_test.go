package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestConsolePlatformViewer: the landscape's token for the console's
// platform view is the platform viewer's, written 0600; it reads what the
// platform view shows and nothing else (no Secrets, no writes), and a
// second start (a resumed landscape) writes a working token again.
func TestConsolePlatformViewer(t *testing.T) {
	testenv.SkipIfShort(t)
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	c, err := testenv.New(testenv.WithName("console-platform-viewer"), testenv.WithCRDs(all...))
	if err != nil {
		t.Fatalf("start the API server: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), ConsolePlatformTokenFile)
	for run := 1; run <= 2; run++ {
		if err := ensureConsolePlatformViewer(ctx, c.Client, path); err != nil {
			t.Fatalf("start %d: %v", run, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = strings.TrimSpace(string(raw))
	viewer, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := viewer.Create(ctx, review); err != nil {
		t.Fatalf("the token is not accepted: %v", err)
	}
	if want := "system:serviceaccount:" + ConsolePlatformNamespace + ":" + ConsolePlatformAccount; review.Status.UserInfo.Username != want {
		t.Errorf("the token is %q, want %q", review.Status.UserInfo.Username, want)
	}
	if err := viewer.List(ctx, &providerv1alpha1.ServiceProviderList{}); err != nil {
		t.Errorf("the viewer lists ServiceProviders: %v, want allowed", err)
	}
	if err := viewer.List(ctx, &resourcev1alpha1.SFClusterList{}); err != nil {
		t.Errorf("the viewer lists SFClusters: %v, want allowed", err)
	}
	if err := viewer.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer lists Secrets: %v, want Forbidden", err)
	}
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "forged"}}
	sp.Spec.Image = "registry.example.com/forged:1"
	if err := viewer.Create(ctx, sp); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer creates a ServiceProvider: %v, want Forbidden", err)
	}
}
