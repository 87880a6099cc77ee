package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/broker"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/code"
	"github.com/marketplane/marketplane/internal/broker/kubestore"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/version"
)

// Run runs the broker until ctx ends, then shuts down gracefully: the
// listener closes, in-flight requests get ShutdownTimeout to finish.
func Run(ctx context.Context, o Options) error {
	p, err := newProcess(ctx, o)
	if err != nil {
		return err
	}
	return p.mgr.Start(ctx)
}

// process is one broker: a controller-runtime manager on the platform
// cluster, whose cache holds the catalog namespace, and the runnables it
// runs. The manager elects no leader: the broker keeps no state of its own,
// so every replica serves.
type process struct {
	o          Options
	log        logr.Logger
	minVersion osb.APIVersion

	platformCfg, onboardingCfg       *rest.Config
	platformClient, onboardingClient client.Client
	mgr                              manager.Manager
	// storeCluster and offeringCluster are caches of the onboarding
	// cluster, run by mgr; offeringCluster is nil without code offerings.
	storeCluster, offeringCluster cluster.Cluster

	auth      *osb.BasicAuth
	reg       *prometheus.Registry
	watcher   *catalog.Watcher
	offerings *catalog.OfferingWatcher
	store     *kubestore.Store
	// certs serve the certificate of TLSCertFile; nil without TLS.
	certs *certwatcher.CertWatcher
}

// newProcess checks the options, connects to both clusters, reads the
// credentials and adds every part of the broker to a new manager.
func newProcess(ctx context.Context, o Options) (*process, error) {
	minVersion, err := o.validate()
	if err != nil {
		return nil, err
	}
	p := &process{o: o, log: o.logger(), minVersion: minVersion}
	// controller-runtime's caches and clients log through its global
	// logger, which otherwise prints a warning with a stack trace.
	ctrl.SetLogger(p.log)
	scheme, err := install.NewScheme()
	if err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	if err := p.connect(scheme); err != nil {
		return nil, err
	}
	if p.auth, err = initialCredentials(ctx, o, p.platformClient); err != nil {
		return nil, err
	}
	if err := p.newManager(scheme); err != nil {
		return nil, err
	}
	handler, err := p.newHandler()
	if err != nil {
		return nil, err
	}
	if err := p.addServers(handler); err != nil {
		return nil, err
	}
	return p, nil
}

// logger is the Logger option, else one of Verbosity, named "broker".
func (o Options) logger() logr.Logger {
	log := (&contract.Flags{Verbosity: o.Verbosity}).Logger()
	if o.Logger != nil {
		log = *o.Logger
	}
	return log.WithName("broker")
}

// connect loads the configurations of both clusters and makes their
// clients, which read without a cache.
func (p *process) connect(scheme *runtime.Scheme) error {
	// No client-side limits (a negative QPS turns client-go's limiter off):
	// the API servers' priority and fairness protects them, and a fixed
	// limit per client would cap the broker's request rate on a healthy
	// server (docs/architecture.md, "Client limits").
	var err error
	if p.platformCfg, err = restConfig(p.o.Kubeconfig, -1, 40); err != nil {
		return fmt.Errorf("platform cluster: %w", err)
	}
	p.onboardingCfg = p.platformCfg
	if p.o.OnboardingKubeconfig != "" {
		if p.onboardingCfg, err = restConfig(p.o.OnboardingKubeconfig, -1, 200); err != nil {
			return fmt.Errorf("onboarding cluster: %w", err)
		}
	}
	if p.o.WrapOnboardingTransport != nil {
		// A copy: without an onboarding kubeconfig the two are one.
		p.onboardingCfg = rest.CopyConfig(p.onboardingCfg)
		p.onboardingCfg.Wrap(p.o.WrapOnboardingTransport)
	}
	if p.platformClient, err = client.New(p.platformCfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("platform client: %w", err)
	}
	if p.onboardingClient, err = client.New(p.onboardingCfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("onboarding client: %w", err)
	}
	return nil
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

// newManager makes the manager and the caches it runs: the catalog
// namespace of the platform cluster (the manager's own cache), the store's
// cache and, with code offerings, the Offerings' cache of the onboarding
// cluster. The manager's metrics server and health probes are off: the
// broker serves its own (metricsServer).
func (p *process) newManager(scheme *runtime.Scheme) error {
	// The OSB server shuts down gracefully first; then the watchers, the
	// caches and the metrics server stop.
	grace := p.o.ShutdownTimeout + 15*time.Second
	mgr, err := manager.New(p.platformCfg, manager.Options{
		Scheme: scheme,
		Logger: p.log.WithName("manager"),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{p.o.CatalogNamespace: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
		},
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		GracefulShutdownTimeout: &grace,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	p.mgr = mgr
	if p.storeCluster, err = p.addCache(scheme, kubestore.CacheOptions(cache.Options{})); err != nil {
		return fmt.Errorf("store cache: %w", err)
	}
	if p.o.CodeOfferingsNamespace != "" {
		if p.offeringCluster, err = p.addCache(scheme, cache.Options{DefaultTransform: cache.TransformStripManagedFields()}); err != nil {
			return fmt.Errorf("offering cache: %w", err)
		}
	}
	return nil
}

// addCache adds a cache of the onboarding cluster to the manager, as a
// cluster.Cluster: the manager starts it with its own cache.
func (p *process) addCache(scheme *runtime.Scheme, opts cache.Options) (cluster.Cluster, error) {
	c, err := cluster.New(p.onboardingCfg, func(co *cluster.Options) {
		co.Scheme = scheme
		co.Logger = p.log
		co.Cache = opts
	})
	if err != nil {
		return nil, fmt.Errorf("onboarding cluster: %w", err)
	}
	if err := p.mgr.Add(c); err != nil {
		return nil, fmt.Errorf("add onboarding cluster: %w", err)
	}
	return c, nil
}

// newHandler builds the OSB handler and the watchers and store it reads
// from: the SF backend, and with code offerings the merged catalog and the
// code backend, behind the osb transport.
func (p *process) newHandler() (http.Handler, error) {
	o, log := p.o, p.log
	p.reg = prometheus.NewRegistry()
	// The broker serves its own registry, not controller-runtime's: the
	// build information is registered here too.
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.Collector())
	metrics, err := osb.NewMetrics(p.reg)
	if err != nil {
		return nil, err
	}
	p.watcher = catalog.NewWatcher(p.mgr.GetCache(), o.CatalogNamespace, catalog.WithLogger(log.WithName("catalog")))
	p.store = kubestore.New(p.storeCluster.GetCache(), p.onboardingClient)
	sfOpts := []sf.Option{sf.WithLogger(log), sf.WithSyncTimeout(o.SyncTimeout)}
	if o.RecheckInterval > 0 {
		sfOpts = append(sfOpts, sf.WithRecheckInterval(o.RecheckInterval))
	}
	var cat osb.Catalog = p.watcher
	if p.offeringCluster != nil {
		p.offerings = catalog.NewOfferingWatcher(p.offeringCluster.GetCache(), log.WithName("offerings"))
		cat = broker.NewMergedCatalog(p.watcher, p.offerings.Snapshot, log.WithName("catalog"))
	}
	sfBackend, err := sf.New(cat, p.store, sfOpts...)
	if err != nil {
		return nil, err
	}
	var codeBackend *code.Offerings
	if p.offerings != nil {
		if codeBackend, err = code.New(cat, p.onboardingClient, p.platformClient, o.CodeOfferingsNamespace,
			code.WithSFStore(p.store), code.WithBindTimeout(o.SyncTimeout), code.WithLogger(log.WithName("code"))); err != nil {
			return nil, err
		}
	}
	return broker.NewHandler(cat, sfBackend, codeBackend, p.auth,
		osb.WithLogger(log), osb.WithMetrics(metrics), osb.WithMinAPIVersion(p.minVersion), osb.WithMaxBodyBytes(o.MaxBodyBytes))
}

// addServers adds the catalog watchers, the certificate watcher, the OSB
// server and the metrics server to the manager.
func (p *process) addServers(handler http.Handler) error {
	// The watchers are runnables without NeedLeaderElection: the manager
	// starts them after its caches (no leader election to wait for) and
	// stops them after the OSB server.
	if err := p.mgr.Add(p.watcher); err != nil {
		return fmt.Errorf("add catalog watcher: %w", err)
	}
	if p.offerings != nil {
		if err := p.mgr.Add(p.offerings); err != nil {
			return fmt.Errorf("add offering watcher: %w", err)
		}
	}
	if p.o.TLSCertFile != "" {
		certs, err := certwatcher.New(p.o.TLSCertFile, p.o.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		if err := p.mgr.Add(certs); err != nil {
			return fmt.Errorf("add certificate watcher: %w", err)
		}
		p.certs = certs
	}
	if err := p.mgr.Add(p.osbServer(handler)); err != nil {
		return fmt.Errorf("add OSB server: %w", err)
	}
	if p.o.MetricsListener == nil && (p.o.MetricsBindAddress == "" || p.o.MetricsBindAddress == "0") {
		return nil
	}
	ms, err := p.metricsServer()
	if err != nil {
		return err
	}
	if err := p.mgr.Add(ms); err != nil {
		_ = ms.Listener.Close()
		return fmt.Errorf("add metrics server: %w", err)
	}
	return nil
}
