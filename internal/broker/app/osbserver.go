package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/marketplane/marketplane/internal/broker/kubestore"
)

// osbServer is the manager runnable that serves the OSB API. It listens
// only once ready returns (the caches and catalogs have synced), and when
// the manager stops it, closes the listener and gives in-flight requests
// shutdownTimeout to finish.
type osbServer struct {
	srv *http.Server
	// listener, when set, is used instead of listening on address.
	listener net.Listener
	address  string
	// tls, when set, serves HTTPS.
	tls             *tls.Config
	shutdownTimeout time.Duration
	ready           func(context.Context) error
	// serving, when set, is called once the server listens.
	serving func()
	log     logr.Logger
}

var _ manager.LeaderElectionRunnable = (*osbServer)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica serves. The manager stops such runnables first, while the
// caches that in-flight requests wait on still run.
func (*osbServer) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (s *osbServer) Start(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it served
		}
		return err
	}
	ln, err := s.listen()
	if err != nil {
		return err
	}
	s.log.Info("Serving the OSB API", "address", ln.Addr().String(), "tls", s.tls != nil)
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()
	if s.serving != nil {
		s.serving()
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve OSB API: %w", err)
	case <-ctx.Done():
	}
	return s.shutdown(served)
}

// listen opens the listener (or takes the given one), with TLS when
// configured.
func (s *osbServer) listen() (net.Listener, error) {
	ln := s.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.address); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", s.address, err)
		}
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	return ln, nil
}

// shutdown closes the listener and waits up to shutdownTimeout for
// in-flight requests.
func (s *osbServer) shutdown(served <-chan error) error {
	s.log.Info("Shutting down; letting in-flight requests finish", "timeout", s.shutdownTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down OSB API: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve OSB API: %w", err)
	}
	return nil
}

// osbServer is the OSB server of p serving handler.
func (p *process) osbServer(handler http.Handler) *osbServer {
	s := &osbServer{
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: p.o.ReadHeaderTimeout,
			ReadTimeout:       p.o.ReadTimeout,
			WriteTimeout:      p.o.WriteTimeout,
			IdleTimeout:       p.o.IdleTimeout,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          newServerErrorLog(p.log),
		},
		listener:        p.o.Listener,
		address:         p.o.BindAddress,
		shutdownTimeout: p.o.ShutdownTimeout,
		ready:           p.awaitSync,
		serving:         p.o.Ready,
		log:             p.log.WithValues("minAPIVersion", p.minVersion.String()),
	}
	if p.certs != nil {
		s.tls = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: p.certs.GetCertificate}
	}
	return s
}

// awaitSync registers the store's informers, waits up to CacheSyncTimeout
// for them and the catalogs, and then adds what needs synced caches: the
// tombstone reaper and the credentials refresh.
func (p *process) awaitSync(ctx context.Context) error {
	if err := p.store.Informers(ctx); err != nil {
		return fmt.Errorf("store informers: %w", err)
	}
	syncCtx, cancel := context.WithTimeout(ctx, p.o.CacheSyncTimeout)
	defer cancel()
	synced := p.storeCluster.GetCache().WaitForCacheSync(syncCtx) && waitFor(syncCtx, p.watcher.Synced) &&
		(p.offerings == nil || waitFor(syncCtx, p.offerings.Synced))
	if !synced {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("caches did not sync within %s", p.o.CacheSyncTimeout)
	}
	reaper := kubestore.NewReaper(p.storeCluster.GetCache(), p.onboardingClient, p.o.TombstoneTTL, kubestore.WithReaperLogger(p.log.WithName("reaper")))
	if err := p.mgr.Add(reaper); err != nil {
		return fmt.Errorf("add tombstone reaper: %w", err)
	}
	if p.o.CredentialsSecret == "" {
		return nil
	}
	refresh := manager.RunnableFunc(func(ctx context.Context) error {
		refreshCredentials(ctx, p.o, p.platformClient, p.auth, p.log)
		return nil
	})
	if err := p.mgr.Add(refresh); err != nil {
		return fmt.Errorf("add credentials refresh: %w", err)
	}
	return nil
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
