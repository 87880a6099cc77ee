package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/broker/internal/certtest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	return certFile, keyFile, certtest.WriteSelfSigned(t, certFile, keyFile, 1)
}

// TestTLSAndCredentialsSecret runs a broker with HTTPS and credentials from
// a Secret on the platform cluster, then rotates the Secret: the new
// credentials are accepted and the old ones refused, without a restart.
func TestTLSAndCredentialsSecret(t *testing.T) {
	setup(t)
	ctx := context.Background()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "broker-credentials", Namespace: "interoperator"},
		Data:       map[string][]byte{app.SecretKeyUsername: []byte("first"), app.SecretKeyPassword: []byte("first-password")},
	}
	if err := env.platform.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"], func(o *app.Options) {
		o.Username, o.Password = "", ""
		o.CredentialsSecret = "interoperator/broker-credentials"
		o.CredentialsRefresh = 100 * time.Millisecond
		o.TLSCertFile, o.TLSKeyFile = certFile, keyFile
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.stop() }()
	base := strings.Replace(b.url, "http://", "https://", 1)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(user, pass string) int {
		req, _ := http.NewRequest("GET", base+"/v2/catalog", nil)
		req.SetBasicAuth(user, pass)
		req.Header.Set("X-Broker-API-Version", "2.17")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("HTTPS request: %v", err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("first", "first-password"); code != 200 {
		t.Fatalf("credentials from the Secret over HTTPS: %d, want 200", code)
	}
	if resp, err := http.Get(b.url + "/v2/catalog"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want net/http's 400 for HTTP on an HTTPS server", resp.StatusCode)
		}
	}

	sec.Data[app.SecretKeyPassword] = []byte("second-password")
	if err := env.platform.Client.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for get("first", "second-password") != 200 {
		if time.Now().After(deadline) {
			t.Fatal("rotated credentials were not accepted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := get("first", "first-password"); code != 401 {
		t.Errorf("old credentials after the rotation: %d, want 401", code)
	}
}
