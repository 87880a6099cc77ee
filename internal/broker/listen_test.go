package broker_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/pkg/metricsauth"
)

// TestListenDefaults checks that the broker listens on loopback unless told
// otherwise, for the OSB API and for metrics, in the options and in the
// command's flags.
func TestListenDefaults(t *testing.T) {
	o := app.DefaultOptions()
	if !metricsauth.IsLoopback(o.BindAddress) || !metricsauth.IsLoopback(o.MetricsBindAddress) || !o.MetricsSecure {
		t.Errorf("DefaultOptions: bind %q, metrics %q, secure %t; want loopback addresses and secure metrics", o.BindAddress, o.MetricsBindAddress, o.MetricsSecure)
	}
	f := app.NewCommand().Flags()
	for _, name := range []string{"bind-address", "metrics-bind-address"} {
		if def := f.Lookup(name).DefValue; !metricsauth.IsLoopback(def) {
			t.Errorf("--%s defaults to %q; want a loopback address", name, def)
		}
	}
	if def := f.Lookup("metrics-secure").DefValue; def != "true" {
		t.Errorf("--metrics-secure defaults to %s; want true", def)
	}
}

// TestExposedMetrics runs a broker whose metrics listen on every interface:
// /metrics is served over TLS only to bearer tokens that the platform
// cluster authenticates and authorizes for get on /metrics (401 without a
// token, 403 for a ServiceAccount without the right, 200 with it); the
// probes stay open.
func TestExposedMetrics(t *testing.T) {
	setup(t)
	mln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	if metricsauth.IsLoopback(mln.Addr().String()) {
		t.Fatalf("listener on %s is loopback: the test would not test exposure", mln.Addr())
	}
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"], func(o *app.Options) {
		_ = o.MetricsListener.Close()
		o.MetricsListener = mln
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Errorf("stop broker: %v", err)
		}
	})
	// One request, so that the request counter has a series to show.
	if r := do(t, b.url, call{method: "GET", path: "/v2/catalog"}); r.status != http.StatusOK {
		t.Fatalf("catalog: %s", r)
	}
	_, port, _ := net.SplitHostPort(mln.Addr().String())
	base := "https://127.0.0.1:" + port

	allowed := env.platform.ServiceAccountToken(t, "default", "broker-metrics-scraper")
	denied := env.platform.ServiceAccountToken(t, "default", "broker-metrics-nobody")
	env.platform.AllowNonResourceURL(t, "default", "broker-metrics-scraper", "get", "/metrics")
	ctx := t.Context()

	// The certificate is self-signed (no --tls-cert-file): the test checks
	// authorization, not the certificate.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"MetricsNoToken", "/metrics", "", http.StatusUnauthorized},
		{"MetricsNotAllowed", "/metrics", denied, http.StatusForbidden},
		{"MetricsAllowed", "/metrics", allowed, http.StatusOK},
		{"Healthz", "/healthz", "", http.StatusOK},
		{"Readyz", "/readyz", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET %s: %d %.200s; want %d", tc.path, resp.StatusCode, body, tc.want)
			}
			if served := strings.Contains(string(body), "marketplane_broker_requests_total"); tc.path == "/metrics" && served != (tc.want == http.StatusOK) {
				t.Errorf("GET /metrics with %s served metrics: %t", tc.name, served)
			}
		})
	}
	t.Run("PlainHTTP", func(t *testing.T) {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://127.0.0.1:" + port + "/metrics")
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("plain HTTP to exposed metrics got 200; tokens must not travel in the clear")
			}
		}
	})
}
