package app_test

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/broker/internal/certtest"
	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestCertificateReload runs a broker with HTTPS on the OSB API and on
// exposed metrics, then replaces the certificate files: both listeners
// serve the new certificate without a restart.
func TestCertificateReload(t *testing.T) {
	testenv.SkipIfShort(t)
	cluster := testenv.Start(t, testenv.WithName("broker-certs"))
	ctx := t.Context()
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "interoperator"}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cluster.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certtest.WriteSelfSigned(t, certFile, keyFile, 1)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	if metricsauth.IsLoopback(mln.Addr().String()) {
		t.Fatalf("metrics listener on %s is loopback: its TLS would not be tested", mln.Addr())
	}
	_, metricsPort, _ := net.SplitHostPort(mln.Addr().String())
	o := app.DefaultOptions()
	o.Kubeconfig = kubeconfig
	o.Username, o.Password = "user", "password"
	o.Listener, o.MetricsListener = ln, mln
	o.TLSCertFile, o.TLSKeyFile = certFile, keyFile
	o.ShutdownTimeout = 5 * time.Second
	o.Verbosity = "ERROR"
	ready := make(chan struct{})
	o.Ready = func() { close(ready) }
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the broker did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the broker did not start within a minute")
	}

	addrs := map[string]string{"OSB API": ln.Addr().String(), "metrics": "127.0.0.1:" + metricsPort}
	for name, addr := range addrs {
		if serial := servedSerial(t, addr); serial != 1 {
			t.Fatalf("%s serves the certificate with serial %d; want 1", name, serial)
		}
	}
	certtest.WriteSelfSigned(t, certFile, keyFile, 2)
	for name, addr := range addrs {
		deadline := time.Now().Add(30 * time.Second)
		for servedSerial(t, addr) != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still serves the old certificate 30s after the files changed", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// servedSerial returns the serial number of the certificate addr serves.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // the test reads the certificate, it does not trust it
	conn, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		t.Fatalf("%s served no certificate", addr)
	}
	return certs[0].SerialNumber.Int64()
}
