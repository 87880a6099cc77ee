package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

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
