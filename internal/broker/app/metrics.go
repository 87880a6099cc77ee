package app

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/marketplane/marketplane/pkg/metricsauth"
)

// metricsShutdownTimeout bounds the metrics server's shutdown.
const metricsShutdownTimeout = 5 * time.Second

// metricsServer serves /metrics, /healthz and /readyz on the metrics
// address (or the given listener), as a manager HTTP server: it starts
// before the caches and stops last.
//
// It is not the manager's metrics server, which serves controller-runtime's
// global registry (the broker serves its own, and several brokers may run
// in one process), cannot take a listener, and puts its authentication in
// front of every path, probes too (a kubelet's probes carry no token).
//
// On an address that is not loopback, with MetricsSecure, it serves TLS and
// /metrics requires a bearer token the platform cluster authenticates and
// authorizes; /healthz and /readyz stay open (they tell nothing but "ok").
func (p *process) metricsServer() (*manager.Server, error) {
	ln := p.o.MetricsListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", p.o.MetricsBindAddress); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", p.o.MetricsBindAddress, err)
		}
	}
	handler, secure, err := p.metricsHandler(ln.Addr().String())
	if err == nil && secure {
		var tlsCfg *tls.Config
		if tlsCfg, err = p.metricsTLS(); err == nil {
			ln = tls.NewListener(ln, tlsCfg)
		}
	}
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	p.log.Info("Serving metrics", "address", ln.Addr().String(), "secure", secure)
	timeout := metricsShutdownTimeout
	return &manager.Server{
		Name:            "metrics",
		Server:          &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second},
		Listener:        ln,
		ShutdownTimeout: &timeout,
	}, nil
}

// metricsHandler serves the broker's registry and the probes; secure
// reports whether /metrics needs authentication on addr.
func (p *process) metricsHandler(addr string) (http.Handler, bool, error) {
	exposed := !metricsauth.IsLoopback(addr)
	secure := exposed && p.o.MetricsSecure
	metrics := promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg})
	if secure {
		var err error
		if metrics, err = metricsauth.Protect(metrics, p.platformCfg, p.log.WithName("metrics")); err != nil {
			return nil, false, err // wrapped by metricsauth
		}
	} else if exposed {
		p.log.Info("Serving metrics without authentication on an address that is not loopback (--metrics-secure=false)", "address", addr)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.watcher.Synced() {
			http.Error(w, "catalog not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux, secure, nil
}

// metricsTLS serves exposed metrics with the OSB API's certificate (re-read
// when it changes), or a self-signed one without.
func (p *process) metricsTLS() (*tls.Config, error) {
	if p.certs == nil {
		return metricsauth.SelfSignedTLS()
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: p.certs.GetCertificate}, nil
}
