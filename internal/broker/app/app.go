package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/broker"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/code"
	"github.com/marketplane/marketplane/internal/broker/kubestore"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/version"
)

// Environment variables that supply the basic-auth credentials, so that
// they need not appear on the command line.
const (
	EnvUsername = "MARKETPLANE_BROKER_USERNAME"
	EnvPassword = "MARKETPLANE_BROKER_PASSWORD"
)

// Keys of the credentials Secret.
const (
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
)

// Options configure the broker process.
type Options struct {
	// Kubeconfig is the platform cluster's kubeconfig (catalog, credentials
	// Secret); empty means in-cluster or $KUBECONFIG.
	Kubeconfig string
	// OnboardingKubeconfig is the onboarding cluster's kubeconfig
	// (instances, bindings, bind Secrets); empty means the platform's.
	OnboardingKubeconfig string
	// CatalogNamespace holds the SFServices and SFPlans on the platform.
	CatalogNamespace string

	// BindAddress is where the OSB API listens; loopback by default, so
	// that a broker is only reachable from elsewhere when it is told to
	// be (with TLS, --bind-address=:9293).
	BindAddress string
	// MetricsBindAddress serves /metrics, /healthz and /readyz; empty or
	// "0" disables it.
	MetricsBindAddress string
	// MetricsSecure: on an address that is not loopback, the metrics
	// address serves HTTPS (the TLS files, else a self-signed
	// certificate) and /metrics only to bearer tokens the platform
	// cluster authenticates and authorizes for get on the URL.
	MetricsSecure bool
	// TLSCertFile and TLSKeyFile enable HTTPS; the files are re-read when
	// they change.
	TLSCertFile, TLSKeyFile string

	// Username and Password are the basic-auth credentials when no
	// CredentialsSecret is given.
	Username, Password string
	// CredentialsSecret, "namespace/name" on the platform cluster, holds
	// the credentials (keys username, password); it is re-read every
	// CredentialsRefresh.
	CredentialsSecret  string
	CredentialsRefresh time.Duration

	// MinAPIVersion is the oldest X-Broker-API-Version accepted.
	MinAPIVersion string
	// MaxBodyBytes limits request bodies (413 beyond).
	MaxBodyBytes int64
	// SyncTimeout bounds the wait of requests for synchronous plans.
	SyncTimeout time.Duration
	// TombstoneTTL is how long a finished deletion answers "succeeded".
	TombstoneTTL time.Duration
	// CodeOfferingsNamespace, when set, also serves the code-based
	// offerings (ServiceProviders that opted into OSB, read from the
	// Offerings of the onboarding cluster): it is the broker's namespace
	// on the platform cluster that holds the AccessRequests of their
	// bindings and the kubeconfig Secrets they are granted. Empty (the
	// default): SFServices only.
	CodeOfferingsNamespace string

	// Server timeouts. WriteTimeout 0 means SyncTimeout plus 15s;
	// ShutdownTimeout 0 means SyncTimeout plus 10s.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout, ShutdownTimeout time.Duration
	// CacheSyncTimeout bounds the wait for the caches at start.
	CacheSyncTimeout time.Duration

	// Verbosity is DEBUG, INFO or ERROR.
	Verbosity string

	// Listener, when set, is used instead of listening on BindAddress.
	Listener net.Listener
	// MetricsListener, when set, is used instead of listening on
	// MetricsBindAddress.
	MetricsListener net.Listener
	// Logger, when set, replaces the one Verbosity selects.
	Logger *logr.Logger
	// Ready, when set, is called once the broker serves.
	Ready func()
	// RecheckInterval, when set, replaces sf.DefaultRecheckInterval:
	// how often a request waiting for the provisioner re-reads the object
	// without a change notification.
	RecheckInterval time.Duration
	// WrapOnboardingTransport, when set, wraps the transport of every
	// request to the onboarding cluster (to count them, say).
	WrapOnboardingTransport func(http.RoundTripper) http.RoundTripper
}

// DefaultBindAddress is where the OSB API listens by default: loopback.
const DefaultBindAddress = "127.0.0.1:9293"

// DefaultOptions returns the defaults of every option.
func DefaultOptions() Options {
	return Options{
		CatalogNamespace:   "interoperator",
		BindAddress:        DefaultBindAddress,
		MetricsBindAddress: metricsauth.DefaultBindAddress,
		MetricsSecure:      true,
		CredentialsRefresh: 30 * time.Second,
		MinAPIVersion:      osb.DefaultMinAPIVersion.String(),
		MaxBodyBytes:       osb.DefaultMaxBodyBytes,
		SyncTimeout:        sf.DefaultSyncTimeout,
		TombstoneTTL:       kubestore.DefaultTombstoneTTL,
		ReadHeaderTimeout:  10 * time.Second,
		ReadTimeout:        30 * time.Second,
		IdleTimeout:        120 * time.Second,
		CacheSyncTimeout:   2 * time.Minute,
		Verbosity:          contract.VerbosityInfo,
	}
}

// NewCommand returns the marketplane-broker command.
func NewCommand() *cobra.Command {
	o := DefaultOptions()
	cmd := &cobra.Command{
		Use:   "marketplane-broker",
		Short: "Open Service Broker API v2.17 for the Marketplane inter-operator",
		Long: `marketplane-broker serves the Open Service Broker API v2.17. The catalog comes from
the SFService and SFPlan objects of the platform cluster; every provision, update,
bind and unbind is recorded as an SFServiceInstance or SFServiceBinding on the
onboarding cluster, where the inter-operator's provisioner acts on it.

Credentials: --credentials-secret (recommended), or $` + EnvUsername + ` and
$` + EnvPassword + `, or --username/--password. They are never logged.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Username == "" {
				o.Username = os.Getenv(EnvUsername)
			}
			if o.Password == "" {
				o.Password = os.Getenv(EnvPassword)
			}
			return Run(cmd.Context(), o)
		},
	}
	version.AddFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the platform cluster (catalog, credentials Secret); default in-cluster or $KUBECONFIG")
	f.StringVar(&o.OnboardingKubeconfig, "onboarding-kubeconfig", o.OnboardingKubeconfig, "kubeconfig of the onboarding cluster (instances, bindings); default the platform cluster")
	f.StringVar(&o.CatalogNamespace, "catalog-namespace", o.CatalogNamespace, "namespace of the SFServices and SFPlans on the platform cluster")
	f.StringVar(&o.BindAddress, "bind-address", o.BindAddress, `address the OSB API listens on; loopback by default, e.g. ":9293" (with --tls-cert-file) to serve platforms on other hosts`)
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, `address of /metrics, /healthz and /readyz; "0" disables it. Loopback by default; on any other address see --metrics-secure`)
	f.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "on an address that is not loopback, serve HTTPS (the --tls-cert-file, else self-signed) and answer /metrics only to bearer tokens the platform cluster authenticates (TokenReview) and authorizes for get on the URL (SubjectAccessReview); the probes stay open. false serves everything in the clear")
	f.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "serve HTTPS with this certificate (PEM); re-read when it changes")
	f.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "private key of --tls-cert-file (PEM)")
	f.StringVar(&o.Username, "username", o.Username, "basic-auth username (default $"+EnvUsername+")")
	f.StringVar(&o.Password, "password", o.Password, "basic-auth password (default $"+EnvPassword+"); prefer the environment or --credentials-secret, flags are visible to other local users")
	f.StringVar(&o.CredentialsSecret, "credentials-secret", o.CredentialsSecret, "namespace/name of a Secret on the platform cluster with keys username and password")
	f.DurationVar(&o.CredentialsRefresh, "credentials-refresh", o.CredentialsRefresh, "how often the credentials Secret is re-read")
	f.StringVar(&o.MinAPIVersion, "min-api-version", o.MinAPIVersion, "oldest X-Broker-API-Version accepted (412 for older or missing)")
	f.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest request body accepted (413 beyond)")
	f.DurationVar(&o.SyncTimeout, "sync-timeout", o.SyncTimeout, "how long a request for a synchronous plan waits for the provisioner")
	f.StringVar(&o.CodeOfferingsNamespace, "code-offerings-namespace", o.CodeOfferingsNamespace, "also serve the ServiceProviders that opted into OSB (their Offerings on the onboarding cluster); the namespace on the platform cluster for the AccessRequests of their bindings. Empty: SFServices only")
	f.DurationVar(&o.TombstoneTTL, "tombstone-ttl", o.TombstoneTTL, "how long last_operation reports a finished deletion as succeeded before 410 Gone")
	f.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", o.ReadHeaderTimeout, "server read-header timeout")
	f.DurationVar(&o.ReadTimeout, "read-timeout", o.ReadTimeout, "server read timeout")
	f.DurationVar(&o.WriteTimeout, "write-timeout", o.WriteTimeout, "server write timeout (0: --sync-timeout plus 15s)")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "keep-alive idle timeout")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight requests may finish after SIGTERM (0: --sync-timeout plus 10s)")
	f.StringVarP(&o.Verbosity, "verbosity", "v", o.Verbosity, "log verbosity: DEBUG, INFO or ERROR")
	return cmd
}

// validate checks the options and fills derived defaults.
func (o *Options) validate() (osb.APIVersion, error) {
	v, err := osb.ParseAPIVersion(o.MinAPIVersion)
	if err != nil {
		return v, fmt.Errorf("--min-api-version: %w", err)
	}
	switch strings.ToUpper(o.Verbosity) {
	case contract.VerbosityDebug, contract.VerbosityInfo, contract.VerbosityError:
	default:
		return v, fmt.Errorf("--verbosity=%q: want DEBUG, INFO or ERROR", o.Verbosity)
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return v, errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if o.CredentialsSecret == "" && (o.Username == "" || o.Password == "") {
		return v, fmt.Errorf("credentials are required: --credentials-secret, or $%s and $%s (or --username and --password)", EnvUsername, EnvPassword)
	}
	if o.CredentialsSecret != "" {
		if ns, name, ok := strings.Cut(o.CredentialsSecret, "/"); !ok || ns == "" || name == "" {
			return v, fmt.Errorf("--credentials-secret=%q: want namespace/name", o.CredentialsSecret)
		}
	}
	if o.MaxBodyBytes <= 0 || o.SyncTimeout <= 0 || o.TombstoneTTL <= 0 {
		return v, errors.New("--max-body-bytes, --sync-timeout and --tombstone-ttl must be positive")
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = o.SyncTimeout + 15*time.Second
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = o.SyncTimeout + 10*time.Second
	}
	if o.WriteTimeout <= o.SyncTimeout {
		return v, errors.New("--write-timeout must exceed --sync-timeout, or synchronous requests are cut off")
	}
	return v, nil
}

// Run runs the broker until ctx ends, then shuts down gracefully: the
// listener closes, in-flight requests get ShutdownTimeout to finish.
func Run(ctx context.Context, o Options) error {
	minVersion, err := o.validate()
	if err != nil {
		return err
	}
	log := (&contract.Flags{Verbosity: o.Verbosity}).Logger()
	if o.Logger != nil {
		log = *o.Logger
	}
	log = log.WithName("broker")
	// controller-runtime's caches and clients log through its global
	// logger, which otherwise prints a warning with a stack trace.
	ctrl.SetLogger(log)

	scheme, err := install.NewScheme()
	if err != nil {
		return err
	}
	// No client-side limits (a negative QPS turns client-go's limiter off):
	// the API servers' priority and fairness protects them, and a fixed
	// limit per client would cap the broker's request rate on a healthy
	// server (docs/architecture.md, "Client limits").
	platformCfg, err := restConfig(o.Kubeconfig, -1, 40)
	if err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	onboardingCfg := platformCfg
	if o.OnboardingKubeconfig != "" {
		if onboardingCfg, err = restConfig(o.OnboardingKubeconfig, -1, 200); err != nil {
			return fmt.Errorf("onboarding cluster: %w", err)
		}
	}
	if o.WrapOnboardingTransport != nil {
		// A copy: without an onboarding kubeconfig the two are one.
		onboardingCfg = rest.CopyConfig(onboardingCfg)
		onboardingCfg.Wrap(o.WrapOnboardingTransport)
	}
	platformClient, err := client.New(platformCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("platform client: %w", err)
	}
	onboardingClient, err := client.New(onboardingCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("onboarding client: %w", err)
	}
	catalogCache, err := cache.New(platformCfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{o.CatalogNamespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return fmt.Errorf("catalog cache: %w", err)
	}
	storeCache, err := cache.New(onboardingCfg, kubestore.CacheOptions(cache.Options{Scheme: scheme}))
	if err != nil {
		return fmt.Errorf("store cache: %w", err)
	}

	auth, err := initialCredentials(ctx, o, platformClient)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	// The broker serves its own registry, not controller-runtime's: the
	// build information is registered here too.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.Collector())
	metrics, err := osb.NewMetrics(reg)
	if err != nil {
		return err
	}
	watcher := catalog.NewWatcher(catalogCache, o.CatalogNamespace, catalog.WithLogger(log.WithName("catalog")))
	store := kubestore.New(storeCache, onboardingClient)
	reaper := kubestore.NewReaper(storeCache, onboardingClient, o.TombstoneTTL, kubestore.WithReaperLogger(log.WithName("reaper")))
	sfOpts := []sf.Option{sf.WithLogger(log), sf.WithSyncTimeout(o.SyncTimeout)}
	if o.RecheckInterval > 0 {
		sfOpts = append(sfOpts, sf.WithRecheckInterval(o.RecheckInterval))
	}
	var cat osb.Catalog = watcher
	var offeringCache cache.Cache
	var offerings *catalog.OfferingWatcher
	if o.CodeOfferingsNamespace != "" {
		if offeringCache, err = cache.New(onboardingCfg, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()}); err != nil {
			return fmt.Errorf("offering cache: %w", err)
		}
		offerings = catalog.NewOfferingWatcher(offeringCache, log.WithName("offerings"))
		cat = broker.NewMergedCatalog(watcher, offerings.Snapshot, log.WithName("catalog"))
	}
	sfBackend, err := sf.New(cat, store, sfOpts...)
	if err != nil {
		return err
	}
	var codeBackend *code.Offerings
	if offerings != nil {
		if codeBackend, err = code.New(cat, onboardingClient, platformClient, o.CodeOfferingsNamespace,
			code.WithSFStore(store), code.WithBindTimeout(o.SyncTimeout), code.WithLogger(log.WithName("code"))); err != nil {
			return err
		}
	}
	handler, err := broker.NewHandler(cat, sfBackend, codeBackend, auth,
		osb.WithLogger(log), osb.WithMetrics(metrics), osb.WithMinAPIVersion(minVersion), osb.WithMaxBodyBytes(o.MaxBodyBytes))
	if err != nil {
		return err
	}

	// The caches, the catalog watcher and the reaper outlive ctx: on
	// shutdown the server first lets in-flight requests finish, and those
	// may be waiting for the provisioner through the caches. cancel stops
	// them once the server is done (or when one of them fails).
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	g, gctx := errgroup.WithContext(bg)
	g.Go(func() error { return catalogCache.Start(gctx) })
	g.Go(func() error { return storeCache.Start(gctx) })
	g.Go(func() error { return watcher.Start(gctx) })
	if offerings != nil {
		g.Go(func() error { return offeringCache.Start(gctx) })
		g.Go(func() error { return offerings.Start(gctx) })
	}
	if err := store.Informers(gctx); err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	syncCtx, syncCancel := context.WithTimeout(gctx, o.CacheSyncTimeout)
	synced := storeCache.WaitForCacheSync(syncCtx) && waitFor(syncCtx, watcher.Synced) &&
		(offerings == nil || waitFor(syncCtx, offerings.Synced))
	syncCancel()
	if !synced {
		cancel()
		return errors.Join(fmt.Errorf("caches did not sync within %s", o.CacheSyncTimeout), g.Wait())
	}
	g.Go(func() error { return reaper.Start(gctx) })
	if o.CredentialsSecret != "" {
		g.Go(func() error { refreshCredentials(gctx, o, platformClient, auth, log); return nil })
	}

	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          newServerErrorLog(log),
	}
	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.BindAddress); err != nil {
			cancel()
			return errors.Join(fmt.Errorf("listen on %s: %w", o.BindAddress, err), g.Wait())
		}
	}
	if o.TLSCertFile != "" {
		certs, err := newCertReloader(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			cancel()
			_ = ln.Close()
			return errors.Join(err, g.Wait())
		}
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	g.Go(func() error {
		log.Info("Serving the OSB API", "address", ln.Addr().String(), "tls", o.TLSCertFile != "", "minAPIVersion", minVersion.String())
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve OSB API: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		select {
		case <-ctx.Done():
		case <-gctx.Done():
		}
		log.Info("Shutting down; letting in-flight requests finish", "timeout", o.ShutdownTimeout)
		sctx, scancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
		defer scancel()
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("shut down OSB API: %w", err)
		}
		return nil
	})
	if o.MetricsListener != nil || (o.MetricsBindAddress != "" && o.MetricsBindAddress != "0") {
		ms, err := metricsServer(o, platformCfg, reg, watcher, log)
		if err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
		g.Go(func() error {
			if err := ms.Serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve metrics: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			return ms.srv.Shutdown(sctx)
		})
	}
	if o.Ready != nil {
		o.Ready()
	}
	return g.Wait()
}

// restConfig loads a kubeconfig (empty: in-cluster or $KUBECONFIG) with
// deliberate client-side rate limits.
func restConfig(path string, qps float32, burst int) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// initialCredentials builds the authenticator from the Secret or the
// options. The Secret must be readable at start.
func initialCredentials(ctx context.Context, o Options, c client.Client) (*osb.BasicAuth, error) {
	if o.CredentialsSecret == "" {
		return osb.NewBasicAuth(o.Username, o.Password)
	}
	user, pass, err := readCredentials(ctx, o.CredentialsSecret, c)
	if err != nil {
		return nil, err
	}
	return osb.NewBasicAuth(user, pass)
}

func readCredentials(ctx context.Context, ref string, c client.Client) (string, string, error) {
	ns, name, _ := strings.Cut(ref, "/")
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		return "", "", fmt.Errorf("read credentials Secret %s: %w", ref, err)
	}
	user, pass := string(sec.Data[SecretKeyUsername]), string(sec.Data[SecretKeyPassword])
	if user == "" || pass == "" {
		return "", "", fmt.Errorf("credentials Secret %s: keys %s and %s must be set", ref, SecretKeyUsername, SecretKeyPassword)
	}
	return user, pass, nil
}

// refreshCredentials re-reads the credentials Secret until ctx ends, so
// that rotated credentials take effect without a restart. A failed read
// keeps the current credentials.
func refreshCredentials(ctx context.Context, o Options, c client.Client, auth *osb.BasicAuth, log logr.Logger) {
	t := time.NewTicker(o.CredentialsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		user, pass, err := readCredentials(ctx, o.CredentialsSecret, c)
		if err != nil {
			log.Error(err, "Cannot re-read the credentials; keeping the current ones")
			continue
		}
		_ = auth.Set(user, pass)
	}
}

// probeServer serves metrics and health probes.
type probeServer struct {
	srv *http.Server
	ln  net.Listener
}

// Serve serves until the server is shut down.
func (p *probeServer) Serve() error { return p.srv.Serve(p.ln) }

// metricsServer listens on the metrics address (or uses the given
// listener). On an address that is not loopback, with MetricsSecure, it
// serves TLS and /metrics requires a bearer token the platform cluster
// authenticates and authorizes; /healthz and /readyz stay open (they tell
// nothing but "ok", and a kubelet's probes carry no token).
func metricsServer(o Options, platformCfg *rest.Config, reg *prometheus.Registry, watcher *catalog.Watcher, log logr.Logger) (*probeServer, error) {
	ln := o.MetricsListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", o.MetricsBindAddress); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", o.MetricsBindAddress, err)
		}
	}
	exposed := !metricsauth.IsLoopback(ln.Addr().String())
	secure := exposed && o.MetricsSecure
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	if secure {
		var err error
		if metrics, err = metricsauth.Protect(metrics, platformCfg, log.WithName("metrics")); err != nil {
			_ = ln.Close()
			return nil, err
		}
		tlsCfg, err := metricsTLS(o)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, tlsCfg)
	} else if exposed {
		log.Info("Serving metrics without authentication on an address that is not loopback (--metrics-secure=false)", "address", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !watcher.Synced() {
			http.Error(w, "catalog not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	log.Info("Serving metrics", "address", ln.Addr().String(), "secure", secure)
	return &probeServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln}, nil
}

// metricsTLS serves exposed metrics with the OSB API's certificate (re-read
// when it changes), or a self-signed one without.
func metricsTLS(o Options) (*tls.Config, error) {
	if o.TLSCertFile == "" {
		return metricsauth.SelfSignedTLS()
	}
	certs, err := newCertReloader(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}, nil
}
