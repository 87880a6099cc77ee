package providertest_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/providerrequests"
	"github.com/marketplane/marketplane/pkg/providertest"
)

// TestKCPIsolation runs a landscape WithKCP and creates two MCPs: each gets
// a Cluster of the kcp profile (no static MCP cluster exists) served by a
// workspace of its own, and the tenant's kubeconfig reaches that
// workspace. With real requests it shows that the token the tenant of one
// MCP gets cannot read the other MCP's objects, nor kcp's root workspace:
// kcp refuses it (403 or 401), while it reads its own.
func TestKCPIsolation(t *testing.T) {
	if ns, _ := providerrequests.Namespace("ClusterProvider", providertest.KCPProviderName); ns != providertest.KCPClustersNamespace {
		t.Fatalf("KCPClustersNamespace is %s, but the operator puts ClusterProvider %s in %s", providertest.KCPClustersNamespace, providertest.KCPProviderName, ns)
	}
	l := providertest.Start(t, providertest.WithKCP())
	ctx := t.Context()
	if len(l.MCPClusters) != 0 || l.KCP == nil {
		t.Fatalf("landscape WithKCP: %d MCP API servers and kcp %v; want none and kcp", len(l.MCPClusters), l.KCP)
	}

	a := l.CreateMCP(t, "a", "tenant-a")
	b := l.CreateMCP(t, "b", "tenant-b")
	for _, m := range []*providertest.MCP{a, b} {
		cl := &clustersv1alpha1.Cluster{}
		if err := l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: providertest.KCPClustersNamespace, Name: m.ClusterName}, cl); err != nil {
			t.Fatalf("MCP %s: its Cluster: %v", m.Name, err)
		}
		if cl.Spec.Profile != providertest.KCPProfile || cl.Annotations[clusters.BackendAnnotation] != "kcp" {
			t.Errorf("MCP %s: Cluster %s has profile %q, backend %q; want the kcp profile and backend", m.Name, cl.Name, cl.Spec.Profile, cl.Annotations[clusters.BackendAnnotation])
		}
		if !strings.HasPrefix(m.Config.Host, l.KCP.URL+"/clusters/root:") {
			t.Errorf("MCP %s: the tenant's kubeconfig points at %s, want a workspace of %s", m.Name, m.Config.Host, l.KCP.URL)
		}
	}
	if a.ClusterName == b.ClusterName || a.Config.Host == b.Config.Host {
		t.Fatalf("MCPs a and b share Cluster %s / workspace %s", a.ClusterName, a.Config.Host)
	}

	// Each tenant writes a secret into its own MCP.
	for _, m := range []*providertest.MCP{a, b} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "secret-of-" + m.Name, Namespace: metav1.NamespaceDefault},
			Data: map[string]string{"owner": m.Name}}
		if err := m.Client.Create(ctx, cm); err != nil {
			t.Fatalf("MCP %s: the tenant creates a ConfigMap in its own MCP: %v", m.Name, err)
		}
		if err := m.Admin.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
			t.Errorf("MCP %s: the ConfigMap is not in its workspace: %v", m.Name, err)
		}
	}
	for _, c := range []struct{ token, other *providertest.MCP }{{a, b}, {b, a}} {
		// The other MCP's workspace, and kcp's root, with this tenant's
		// credentials: plain requests, no discovery first.
		for _, host := range []string{c.other.Config.Host, l.KCP.URL + "/clusters/root"} {
			foreign := rest.CopyConfig(c.token.Config)
			foreign.Host = host
			cs, err := kubernetes.NewForConfig(foreign)
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("the token of MCP %s at %s", c.token.Name, host)
			_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "secret-of-"+c.other.Name, metav1.GetOptions{})
			refused(t, what+": get the other MCP's ConfigMap", err)
			_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			refused(t, what+": list ConfigMaps", err)
			_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
			refused(t, what+": create a namespace", err)
		}
		// The same request on its own workspace is allowed: the refusals
		// above are the other workspace's, not a broken token.
		own, err := kubernetes.NewForConfig(c.token.Config)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := own.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "secret-of-"+c.token.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the token of MCP %s on its own workspace: %v", c.token.Name, err)
		}
	}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "secret-of-b"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("MCP a's own workspace: get b's ConfigMap name: %v, want NotFound (b's objects are not there)", err)
	}
}

// refused fails unless err is the API server's 403 Forbidden or 401
// Unauthorized.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) || (status.Status().Code != http.StatusForbidden && status.Status().Code != http.StatusUnauthorized) {
		t.Errorf("%s: %v, want 403 Forbidden or 401 Unauthorized", what, err)
		return
	}
	t.Logf("%s: %d %s", what, status.Status().Code, status.Status().Message)
}
