package metricsauth_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/testenv"
)

func TestIsLoopback(t *testing.T) {
	cases := map[string]struct {
		addr string
		want bool
	}{
		"IPv4Loopback":  {addr: "127.0.0.1:8080", want: true},
		"OtherLoopback": {addr: "127.0.0.53:8080", want: true},
		"IPv6Loopback":  {addr: "[::1]:8080", want: true},
		"Localhost":     {addr: "localhost:8080", want: true},
		"AllInterfaces": {addr: ":8080", want: false},
		"Unspecified4":  {addr: "0.0.0.0:8080", want: false},
		"Unspecified6":  {addr: "[::]:8080", want: false},
		"PodIP":         {addr: "10.1.2.3:8080", want: false},
		"HostName":      {addr: "metrics.example.com:8080", want: false},
		"Disabled":      {addr: "0", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := metricsauth.IsLoopback(tc.addr); got != tc.want {
				t.Errorf("IsLoopback(%q) = %t, want %t", tc.addr, got, tc.want)
			}
		})
	}
}

// TestFlagDefaults checks that metrics listen on loopback and are secure
// unless told otherwise.
func TestFlagDefaults(t *testing.T) {
	var f metricsauth.Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.AddFlags(fs, metricsauth.DefaultBindAddress)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if !metricsauth.IsLoopback(f.BindAddress) || !f.Secure || f.Protected() {
		t.Errorf("defaults %+v: want a loopback address, secure, and (on loopback) no authentication", f)
	}
	if err := fs.Parse([]string{"--metrics-bind-address=:8080"}); err != nil {
		t.Fatal(err)
	}
	if !f.Protected() {
		t.Errorf("%+v: an address on every interface must be protected", f)
	}
	if err := fs.Parse([]string{"--metrics-secure=false"}); err != nil {
		t.Fatal(err)
	}
	if f.Protected() {
		t.Errorf("%+v: --metrics-secure=false turns protection off", f)
	}
}

// TestExposedMetricsNeedAuthorizedToken serves controller-runtime's metrics
// endpoint with ServerOptions on every interface, against a real API
// server's TokenReview and SubjectAccessReview: no token is 401, a token
// of a ServiceAccount without the right is 403, one allowed to get
// /metrics is 200, and plain HTTP is refused. On loopback the same options
// serve plain HTTP without authentication.
func TestExposedMetricsNeedAuthorizedToken(t *testing.T) {
	cluster := testenv.Start(t, testenv.WithName("metrics"))
	ctx := t.Context()
	allowed, denied := cluster.ServiceAccountToken(t, "default", "scraper"), cluster.ServiceAccountToken(t, "default", "nobody")
	cluster.AllowNonResourceURL(t, "default", "scraper", "get", "/metrics")

	addr := serve(ctx, t, cluster.Config, metricsauth.Flags{BindAddress: ":0", Secure: true})
	if metricsauth.IsLoopback(addr) {
		t.Fatalf("the exposed server listens on %s, a loopback address: the test would not test exposure", addr)
	}
	_, port, _ := net.SplitHostPort(addr)
	url := "https://127.0.0.1:" + port + "/metrics"
	// The certificate is self-signed: the test checks authorization, not
	// the certificate.
	insecure := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"NoToken", "", http.StatusUnauthorized},
		// The API server's TokenReview reports an error for a token that
		// is no JWT; controller-runtime's filter answers that with 500
		// "Authentication failed". Refused either way.
		{"ForgedToken", "not-a-token", http.StatusInternalServerError},
		{"NotAllowed", denied, http.StatusForbidden},
		{"Allowed", allowed, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, insecure, url, tc.token)
			if status != tc.want {
				t.Fatalf("GET %s with %s: %d %s; want %d", url, tc.name, status, body, tc.want)
			}
			if served := strings.Contains(body, "# TYPE"); served != (tc.want == http.StatusOK) {
				t.Errorf("GET %s with %s served metrics: %t; want %t\n%.300s", url, tc.name, served, tc.want == http.StatusOK, body)
			}
		})
	}
	t.Run("PlainHTTP", func(t *testing.T) {
		status, body := get(t, &http.Client{Timeout: 30 * time.Second}, "http://127.0.0.1:"+port+"/metrics", allowed)
		if status == http.StatusOK {
			t.Fatalf("plain HTTP to the exposed endpoint: %d %.200s; want it refused (tokens must not travel in the clear)", status, body)
		}
	})

	t.Run("Loopback", func(t *testing.T) {
		addr := serve(ctx, t, cluster.Config, metricsauth.Flags{BindAddress: "127.0.0.1:0", Secure: true})
		if !metricsauth.IsLoopback(addr) {
			t.Fatalf("listens on %s; want loopback", addr)
		}
		if status, body := get(t, &http.Client{Timeout: 30 * time.Second}, "http://"+addr+"/metrics", ""); status != http.StatusOK {
			t.Errorf("loopback metrics without a token: %d %.200s; want 200", status, body)
		}
	})
}

// serve starts a controller-runtime metrics server with ServerOptions(f)
// until the test ends and returns the address it listens on.
func serve(ctx context.Context, t *testing.T, cfg *rest.Config, f metricsauth.Flags) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(metricsauth.ServerOptions(f, nil), cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	bound, ok := srv.(interface{ GetBindAddr() string })
	if !ok {
		t.Fatalf("%T does not report its address", srv)
	}
	var addr string
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		addr = bound.GetBindAddr()
		return addr != "", nil
	}); err != nil {
		t.Fatalf("the metrics server did not listen within a minute: %v", err)
	}
	return addr
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
