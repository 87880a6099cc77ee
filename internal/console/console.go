package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-logr/logr"
)

// Defaults of Options.
const (
	// DefaultSessionTTL is how long a session lives after sign-in.
	DefaultSessionTTL = 8 * time.Hour
	// DefaultLatencyMetric is the histogram the platform view shows: the
	// provider runtime's reconcile durations, which for the inter-operator
	// are the provisioning steps of SFServiceInstances and SFServiceBindings.
	DefaultLatencyMetric = "marketplane_provider_reconcile_duration_seconds"
	// DefaultRequestTimeout bounds every call to an API server or the
	// metrics endpoint made for one page.
	DefaultRequestTimeout = 15 * time.Second
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cluster is the address of an API server: where it is and whom to trust.
// It carries no credentials; every request adds the signed-in user's token.
type Cluster struct {
	// Server is the API server's URL (https://host:port).
	Server string
	// CAData is the PEM of the certificate authorities that sign the API
	// server's serving certificate; empty trusts the system's roots.
	CAData []byte
	// TLSServerName overrides the name checked in the server's certificate.
	TLSServerName string
}

// Options configure the console.
type Options struct {
	// Onboarding is the onboarding cluster: Offerings, SFServiceInstances,
	// SFServiceBindings, providers' kinds. Required.
	Onboarding Cluster
	// Platform is the platform cluster of the platform view
	// (ServiceProviders, SFClusters); empty Server means the onboarding
	// cluster (one API server playing both roles).
	Platform Cluster
	// MetricsURL is a Prometheus endpoint (the inter-operator's /metrics)
	// whose LatencyMetric histogram the platform view draws, fetched with
	// the user's token; empty leaves the histogram out.
	MetricsURL string
	// MetricsCAData is the PEM of the CAs of MetricsURL's certificate;
	// empty trusts the system's roots.
	MetricsCAData []byte
	// LatencyMetric is the histogram's name (DefaultLatencyMetric).
	LatencyMetric string
	// SecureCookies marks the session cookie Secure even on requests that
	// arrived without TLS: for a console behind a proxy that terminates
	// TLS. Over TLS the cookie is always Secure.
	SecureCookies bool
	// TLSConfig, when set, makes Serve serve over TLS (the session cookie
	// is then Secure). New ignores it.
	TLSConfig *tls.Config
	// SessionTTL is a session's lifetime (DefaultSessionTTL).
	SessionTTL time.Duration
	// RequestTimeout bounds each call to a cluster or the metrics endpoint
	// (DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Logger receives one line per request (V(1)) and errors; never a
	// token, a cookie or a credential.
	Logger logr.Logger
}

// Server is the console's http.Handler.
type Server struct {
	opts     Options
	log      logr.Logger
	sessions *sessions
	pages    *pages
	mux      *http.ServeMux
	handler  http.Handler
	metrics  *http.Client
}

var _ http.Handler = &Server{}

// New returns the console for opts.
func New(opts Options) (*Server, error) {
	if opts.Onboarding.Server == "" {
		return nil, errors.New("console: the onboarding cluster's server URL is required")
	}
	for _, c := range []Cluster{opts.Onboarding, opts.Platform} {
		if c.Server == "" {
			continue
		}
		u, err := url.Parse(c.Server)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("console: server %q is not an http(s) URL", c.Server)
		}
		if u.User != nil {
			return nil, errors.New("console: a server URL must not carry credentials")
		}
	}
	if opts.Platform.Server == "" {
		opts.Platform = opts.Onboarding
	}
	if opts.LatencyMetric == "" {
		opts.LatencyMetric = DefaultLatencyMetric
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		sessions: newSessions(opts.SessionTTL),
		pages:    p,
		mux:      http.NewServeMux(),
	}
	if opts.MetricsURL != "" {
		if s.metrics, err = metricsClient(opts.MetricsURL, opts.MetricsCAData, opts.RequestTimeout); err != nil {
			return nil, err
		}
	}
	s.routes()
	// Cross-origin protection (Sec-Fetch-Site, Origin) in front of
	// everything: a form posted from another site never reaches a
	// handler, whatever cookie it carries. The per-session CSRF token is
	// the second line (browsers without those headers).
	s.handler = s.recoverPanics(s.logRequests(http.NewCrossOriginProtection().Handler(s.securityHeaders(s.mux))))
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routes() {
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.authed(s.logout))
	s.mux.HandleFunc("GET /{$}", s.authed(func(w http.ResponseWriter, r *http.Request, _ *session) {
		http.Redirect(w, r, "/offerings", http.StatusSeeOther)
	}))
	s.mux.HandleFunc("GET /offerings", s.authed(s.offeringsPage))
	s.mux.HandleFunc("GET /offerings/{name}", s.authed(s.offeringPage))
	s.mux.HandleFunc("POST /offerings/{name}", s.authed(s.createInstance))
	s.mux.HandleFunc("GET /instances", s.authed(s.instancesPage))
	s.mux.HandleFunc("GET /ns/{ns}/{res}/{name}", s.authed(s.instancePage))
	s.mux.HandleFunc("GET /ns/{ns}/{res}/{name}/live", s.authed(s.instanceLive))
	s.mux.HandleFunc("GET /ns/{ns}/{res}/{name}/delete", s.authed(s.confirmDeleteInstance))
	s.mux.HandleFunc("POST /ns/{ns}/{res}/{name}/delete", s.authed(s.deleteInstance))
	s.mux.HandleFunc("GET /ns/{ns}/bindings/{name}/delete", s.authed(s.confirmDeleteBinding))
	s.mux.HandleFunc("POST /ns/{ns}/bindings/{name}/delete", s.authed(s.deleteBinding))
	s.mux.HandleFunc("POST /ns/{ns}/{res}/{name}/bindings", s.authed(s.createBinding))
	s.mux.HandleFunc("POST /ns/{ns}/bindings/{name}/credentials", s.authed(s.bindingCredentials))
	s.mux.HandleFunc("GET /platform", s.authed(s.platformPage))
	s.mux.HandleFunc("POST /platform/login", s.authed(s.platformLogin))
	s.mux.HandleFunc("POST /platform/logout", s.authed(s.platformLogout))
}

// securityHeaders sets headers every answer carries: no framing, no
// sniffing, no referrer, a script policy that allows only the console's own
// files, and no caching of pages that show a user's data.
func (s *Server) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if !isStatic(r) {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

func isStatic(r *http.Request) bool {
	return len(r.URL.Path) > len("/static/") && r.URL.Path[:len("/static/")] == "/static/"
}

// statusRecorder remembers the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets the live fragments stream when the writer supports it.
func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// logRequests logs method, path (never the query or headers: no
// credential ever travels there, and none is logged), status and duration.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		s.log.V(1).Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.code, "duration", time.Since(start).Round(time.Microsecond).String())
	})
}

// recoverPanics turns a panic into a plain error page: a user never sees a
// stack trace, the log gets the panic value.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // net/http's sentinel, compared as it does
					panic(v)
				}
				s.log.Error(fmt.Errorf("panic: %v", v), "request failed", "method", r.Method, "path", r.URL.Path)
				http.Error(w, "The console failed to answer this request.", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// Serve serves the console for opts on l until ctx ends, then shuts down
// gracefully. With opts.TLSConfig the console is served over TLS (and its
// cookies are Secure).
func Serve(ctx context.Context, l net.Listener, opts Options) error {
	tlsConfig := opts.TLSConfig
	s, err := New(opts)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * opts.requestTimeout(),
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         tlsConfig,
		ErrorLog:          nil,
	}
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(l, "", "")
			return
		}
		errc <- srv.Serve(l)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve console: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down console: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve console: %w", err)
	}
	return nil
}

func (o Options) requestTimeout() time.Duration {
	if o.RequestTimeout <= 0 {
		return DefaultRequestTimeout
	}
	return o.RequestTimeout
}
