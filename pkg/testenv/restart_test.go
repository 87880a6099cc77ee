package testenv_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestAPIServerRestart stops a cluster's API server and starts it again:
// while it is down a client made before gets errors; afterwards the same
// client, a client from the kubeconfig and the API server's serving
// certificate are unchanged, and the object created before is still there
// (etcd kept running). The cluster serves every API group (WithFullAPI),
// before and after the restart.
func TestAPIServerRestart(t *testing.T) {
	c := testenv.Start(t, testenv.WithName("restart"), testenv.WithCRDs(), testenv.WithFullAPI())
	checkFullAPI(t, c)
	ctx := t.Context()

	fromKubeconfig, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	must(t, err)
	kubeconfigClient, err := client.New(fromKubeconfig, client.Options{Scheme: c.Scheme})
	must(t, err)
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-restart", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	must(t, c.Client.Create(ctx, before))
	must(t, kubeconfigClient.Get(ctx, client.ObjectKeyFromObject(before), &corev1.ConfigMap{}))
	certBefore := servingCert(t, c)

	start := time.Now()
	must(t, c.StopAPIServer())
	t.Logf("API server stopped in %s", time.Since(start).Round(time.Millisecond))
	must(t, c.StopAPIServer()) // a second stop does nothing

	for name, cl := range map[string]client.Client{"Client": c.Client, "kubeconfig client": kubeconfigClient} {
		reqCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := cl.Get(reqCtx, client.ObjectKeyFromObject(before), &corev1.ConfigMap{})
		cancel()
		if err == nil {
			t.Fatalf("%s: read while the API server is stopped succeeded", name)
		}
		t.Logf("%s while the API server is down: %v", name, err)
	}

	start = time.Now()
	must(t, c.StartAPIServer(ctx))
	t.Logf("API server started again and ready in %s", time.Since(start).Round(time.Millisecond))
	must(t, c.StartAPIServer(ctx)) // a second start does nothing
	checkFullAPI(t, c)

	if certAfter := servingCert(t, c); !bytes.Equal(certBefore, certAfter) {
		t.Errorf("the API server serves a different certificate after the restart")
	}
	for name, cl := range map[string]client.Client{"Client": c.Client, "kubeconfig client": kubeconfigClient} {
		got := &corev1.ConfigMap{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(before), got); err != nil {
			t.Fatalf("%s after the restart: %v", name, err)
		}
		if got.UID != before.UID || got.Data["k"] != "v" {
			t.Errorf("%s after the restart: got ConfigMap uid %s data %v, want uid %s data k=v", name, got.UID, got.Data, before.UID)
		}
	}
	must(t, kubeconfigClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart", Namespace: "default"}}))
}

// servingCert returns the DER bytes of the certificate c's API server
// presents.
func servingCert(t *testing.T, c *testenv.Cluster) []byte {
	t.Helper()
	u, err := url.Parse(c.Config.Host)
	must(t, err)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the certificate
	must(t, err)
	defer func() { _ = conn.Close() }()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		t.Fatalf("the API server at %s presented no certificate", u.Host)
	}
	return certs[0].Raw
}

// checkFullAPI fails t unless c serves the groups a small cluster lacks.
func checkFullAPI(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	served := servedGroupVersions(t, c)
	for _, gv := range notSmall {
		if !served[gv] {
			t.Errorf("%s is not served by a cluster started WithFullAPI", gv)
		}
	}
}
