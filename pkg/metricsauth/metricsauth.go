package metricsauth

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Defaults of the flags.
const (
	// DefaultBindAddress is where metrics listen unless told otherwise:
	// loopback, port 8080.
	DefaultBindAddress = "127.0.0.1:8080"
	// DefaultProbeBindAddress is where health probes listen unless told
	// otherwise.
	DefaultProbeBindAddress = "127.0.0.1:8081"
)

// Flags are the metrics flags a process offers.
type Flags struct {
	// BindAddress is --metrics-bind-address; "0" disables metrics.
	BindAddress string
	// Secure is --metrics-secure: on an address that is not loopback,
	// serve HTTPS and require an authorized bearer token.
	Secure bool
	// CertDir is --metrics-cert-dir: tls.crt and tls.key for the HTTPS
	// endpoint; without them a self-signed certificate is generated.
	CertDir string
}

// AddFlags registers --metrics-bind-address (default bindAddress),
// --metrics-secure (default true) and --metrics-cert-dir on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet, bindAddress string) {
	fs.StringVar(&f.BindAddress, "metrics-bind-address", bindAddress,
		`address of the metrics endpoint; "0" disables it. Loopback by default; on any other address (e.g. ":8080" in a pod) see --metrics-secure`)
	fs.BoolVar(&f.Secure, "metrics-secure", true,
		"on an address that is not loopback, serve metrics over HTTPS to callers whose bearer token the cluster authenticates (TokenReview) and authorizes for get on the URL (SubjectAccessReview); false serves them in the clear to anyone who can reach the address")
	fs.StringVar(&f.CertDir, "metrics-cert-dir", "",
		"directory with tls.crt and tls.key for the HTTPS metrics endpoint (default: a self-signed certificate)")
}

// Protected reports whether metrics on these flags need authentication:
// they are on, secure, and not on loopback.
func (f Flags) Protected() bool {
	return f.BindAddress != "" && f.BindAddress != "0" && f.Secure && !IsLoopback(f.BindAddress)
}

// IsLoopback reports whether a listen address reaches loopback only:
// its host is localhost or a loopback IP. An empty host (":8080") or an
// unspecified one ("0.0.0.0", "::") means every interface; a host name
// other than localhost may resolve to anything.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServerOptions returns the controller-runtime metrics server options for
// f. When Protected, the endpoint serves HTTPS and is wrapped in
// authentication and authorization by the cluster of authConfig, or of the
// manager's config when authConfig is nil. A provider passes its platform
// cluster here: that is where its pods run and where a scraper's
// ServiceAccount lives, while its manager talks to the onboarding cluster.
func ServerOptions(f Flags, authConfig *rest.Config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: f.BindAddress}
	if !f.Protected() {
		return o
	}
	o.SecureServing = true
	o.CertDir = f.CertDir
	o.FilterProvider = func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		if authConfig == nil {
			return filters.WithAuthenticationAndAuthorization(c, hc)
		}
		ac, err := rest.HTTPClientFor(authConfig)
		if err != nil {
			return nil, fmt.Errorf("metrics authentication client: %w", err)
		}
		return filters.WithAuthenticationAndAuthorization(authConfig, ac)
	}
	return o
}

// Protect wraps h, a metrics handler not served by controller-runtime (the
// broker's), in the same authentication and authorization by the cluster
// of cfg. Serve the result over TLS only (SelfSignedTLS when there is no
// certificate): bearer tokens must not cross the network in the clear.
func Protect(h http.Handler, cfg *rest.Config, log logr.Logger) (http.Handler, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	protected, err := filter(log, h)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	return protected, nil
}

// SelfSignedTLS returns a TLS configuration with a new self-signed
// certificate for localhost and 127.0.0.1, as controller-runtime's secure
// metrics server makes when it has no certificate: scrapers then skip
// verification or pin it, but tokens travel encrypted.
func SelfSignedTLS() (*tls.Config, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil, "")
	if err != nil {
		return nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}
