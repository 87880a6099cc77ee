package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/marketplane/marketplane/internal/console"
	"github.com/marketplane/marketplane/pkg/contract"
)

// consoleFlags are the flags of `marketplane console`.
type consoleFlags struct {
	listen             string
	kubeconfig         string
	server             string
	ca                 string
	platformServer     string
	platformKubeconfig string
	platformCA         string
	metricsURL         string
	metricsCA          string
	latencyMetric      string
	tlsCert, tlsKey    string
	secureCookies      bool
	verbosity          string
	serverTimeout      time.Duration
}

// newConsoleCommand returns `marketplane console`: the web console for the
// onboarding cluster. It has no credentials of its own; users sign in with
// their own tokens.
func newConsoleCommand() *cobra.Command {
	f := consoleFlags{listen: "127.0.0.1:0", latencyMetric: console.DefaultLatencyMetric, verbosity: contract.VerbosityInfo, serverTimeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console of the onboarding cluster",
		Long: "Serve the web console: offerings, ordering, instances, bindings and a platform view.\n" +
			"The console holds no credentials: each user signs in with their own bearer token, and\n" +
			"every request to the API server is made with it. --kubeconfig (its current context's\n" +
			"cluster) or --server and --certificate-authority say only where the onboarding\n" +
			"cluster is; any user entry of the kubeconfig is ignored. The URL is printed once the\n" +
			"console listens (--listen 127.0.0.1:0 picks a free port).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConsole(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", f.listen, "address to serve on (host:port; port 0 picks a free one)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig whose current context names the onboarding cluster (address and CA only)")
	fl.StringVar(&f.server, "server", "", "the onboarding cluster's API server URL (instead of --kubeconfig)")
	fl.StringVar(&f.ca, "certificate-authority", "", "PEM file of the CA of the onboarding cluster's API server")
	fl.StringVar(&f.platformKubeconfig, "platform-kubeconfig", "", "kubeconfig whose current context names the platform cluster of the platform view (address and CA only)")
	fl.StringVar(&f.platformServer, "platform-server", "", "the platform cluster's API server URL for the platform view (default: the onboarding cluster)")
	fl.StringVar(&f.platformCA, "platform-certificate-authority", "", "PEM file of the CA of the platform cluster's API server")
	fl.StringVar(&f.metricsURL, "metrics-url", "", "Prometheus endpoint (e.g. the inter-operator's /metrics) for the latency histogram, fetched with the user's token")
	fl.StringVar(&f.metricsCA, "metrics-certificate-authority", "", "PEM file of the CA of --metrics-url")
	fl.StringVar(&f.latencyMetric, "latency-metric", f.latencyMetric, "name of the histogram to draw")
	fl.StringVar(&f.tlsCert, "tls-cert-file", "", "serve over TLS with this certificate (PEM); cookies are then Secure")
	fl.StringVar(&f.tlsKey, "tls-key-file", "", "the key of --tls-cert-file")
	fl.BoolVar(&f.secureCookies, "secure-cookies", false, "mark the session cookie Secure without --tls-cert-file: behind a proxy that terminates TLS")
	fl.DurationVar(&f.serverTimeout, "server-timeout", f.serverTimeout, "how long to wait at start for the API servers to answer (0: do not check)")
	fl.StringVarP(&f.verbosity, contract.FlagVerbosity, "v", f.verbosity, "log verbosity: DEBUG (every request), INFO or ERROR")
	return cmd
}

// consoleOptions turns the flags into console.Options.
func consoleOptions(f consoleFlags, log logr.Logger) (console.Options, error) {
	opts := console.Options{MetricsURL: f.metricsURL, LatencyMetric: f.latencyMetric, SecureCookies: f.secureCookies, Logger: log}
	switch {
	case f.kubeconfig != "" && f.server != "":
		return opts, errors.New("--kubeconfig and --server exclude each other")
	case f.kubeconfig != "":
		c, err := clusterOf(f.kubeconfig, "--kubeconfig")
		if err != nil {
			return opts, err
		}
		opts.Onboarding = c
	case f.server != "":
		opts.Onboarding.Server = f.server
	default:
		return opts, errors.New("say where the onboarding cluster is: --kubeconfig or --server")
	}
	var err error
	if f.ca != "" {
		if opts.Onboarding.CAData, err = os.ReadFile(f.ca); err != nil {
			return opts, fmt.Errorf("read --certificate-authority: %w", err)
		}
	}
	if f.platformKubeconfig != "" {
		if f.platformServer != "" {
			return opts, errors.New("--platform-kubeconfig and --platform-server exclude each other")
		}
		if opts.Platform, err = clusterOf(f.platformKubeconfig, "--platform-kubeconfig"); err != nil {
			return opts, err
		}
	}
	if f.platformServer != "" {
		opts.Platform.Server = f.platformServer
		if f.platformCA != "" {
			if opts.Platform.CAData, err = os.ReadFile(f.platformCA); err != nil {
				return opts, fmt.Errorf("read --platform-certificate-authority: %w", err)
			}
		}
	}
	if f.metricsCA != "" {
		if opts.MetricsCAData, err = os.ReadFile(f.metricsCA); err != nil {
			return opts, fmt.Errorf("read --metrics-certificate-authority: %w", err)
		}
	}
	return opts, nil
}

// clusterOf reads the address and CA of the current context's cluster of
// a kubeconfig; its user is not read.
func clusterOf(path, flag string) (console.Cluster, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return console.Cluster{}, fmt.Errorf("read %s: %w", flag, err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return console.Cluster{}, fmt.Errorf("%s %s has no current context", flag, path)
	}
	cl, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return console.Cluster{}, fmt.Errorf("%s %s: the current context names no cluster", flag, path)
	}
	c := console.Cluster{Server: cl.Server, CAData: cl.CertificateAuthorityData, TLSServerName: cl.TLSServerName}
	if len(c.CAData) == 0 && cl.CertificateAuthority != "" {
		if c.CAData, err = os.ReadFile(cl.CertificateAuthority); err != nil {
			return console.Cluster{}, fmt.Errorf("read the certificate authority of %s: %w", flag, err)
		}
	}
	return c, nil
}

// consoleLogger returns the console's logger on w at verbosity, as the
// providers' --verbosity: ERROR logs errors only, INFO V(0), DEBUG V(1)
// too (every request).
func consoleLogger(w io.Writer, verbosity string) (logr.Logger, error) {
	v := 0
	switch strings.ToUpper(verbosity) {
	case contract.VerbosityInfo:
	case contract.VerbosityDebug:
		v = 1
	case contract.VerbosityError:
		v = -1
	default:
		return logr.Discard(), fmt.Errorf("--%s=%q: want DEBUG, INFO or ERROR", contract.FlagVerbosity, verbosity)
	}
	log := funcr.New(func(prefix, args string) {
		_, _ = fmt.Fprintln(w, prefix, args)
	}, funcr.Options{Verbosity: max(v, 0), LogTimestamp: true})
	if v < 0 {
		return logr.New(errorsOnly{log.GetSink()}), nil
	}
	return log, nil
}

// errorsOnly is a log sink that passes errors on and drops the rest.
type errorsOnly struct{ logr.LogSink }

// Enabled implements logr.LogSink: no info line is.
func (errorsOnly) Enabled(int) bool { return false }

// WithValues implements logr.LogSink.
func (e errorsOnly) WithValues(kv ...any) logr.LogSink {
	return errorsOnly{e.LogSink.WithValues(kv...)}
}

// WithName implements logr.LogSink.
func (e errorsOnly) WithName(name string) logr.LogSink { return errorsOnly{e.LogSink.WithName(name)} }

func runConsole(cmd *cobra.Command, f consoleFlags) error {
	log, err := consoleLogger(cmd.ErrOrStderr(), f.verbosity)
	if err != nil {
		return err
	}
	opts, err := consoleOptions(f, log)
	if err != nil {
		return err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	scheme := "http"
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("load the TLS certificate: %w", err)
		}
		opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	// Fail on bad options before listening.
	if _, err := console.New(opts); err != nil {
		return err
	}
	if f.serverTimeout > 0 {
		if err := checkServer(contextOf(cmd), opts.Onboarding, "onboarding cluster's", f.serverTimeout); err != nil {
			return err
		}
		if opts.Platform.Server != "" {
			if err := checkServer(contextOf(cmd), opts.Platform, "platform cluster's", f.serverTimeout); err != nil {
				return err
			}
		}
	}
	l, err := (&net.ListenConfig{}).Listen(contextOf(cmd), "tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.listen, err)
	}
	if _, err := fmt.Fprintf(cmd.OutOrStdout(), "Marketplane console: %s://%s/\n", scheme, l.Addr()); err != nil {
		_ = l.Close()
		return fmt.Errorf("print the URL: %w", err)
	}
	ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return console.Serve(ctx, l, opts)
}

// checkServer waits up to timeout for c to answer GET /version as a
// Kubernetes API server does (anonymously, or refusing anonymous users),
// so that a wrong address is an error at start rather than at every
// user's sign-in.
func checkServer(ctx context.Context, c console.Cluster, what string, timeout time.Duration) error {
	cfg := &rest.Config{Host: c.Server, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData, ServerName: c.TLSServerName}, Timeout: 5 * time.Second}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("the %s API server %s: %w", what, c.Server, err)
	}
	var last error
	poll := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, last = dc.ServerVersion()
		switch {
		case last == nil, apierrors.IsUnauthorized(last), apierrors.IsForbidden(last):
			last = nil
			return true, nil
		case apierrors.IsNotFound(last):
			// It answers, and it is not an API server: no need to wait.
			return true, nil
		}
		return false, nil
	})
	switch {
	case apierrors.IsNotFound(last):
		return fmt.Errorf("the %s API server %s answers, but not as a Kubernetes API server (GET /version: %w): check --server or --kubeconfig", what, c.Server, last)
	case last != nil && poll != nil:
		return fmt.Errorf("the %s API server %s does not answer within %s (%w): check --server or --kubeconfig, and --certificate-authority for a TLS error", what, c.Server, timeout, last)
	case poll != nil:
		return fmt.Errorf("waiting for the %s API server %s: %w", what, c.Server, poll)
	}
	return nil
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
