package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/marketplane/marketplane/pkg/startslot"
)

// apiServerReadyTimeout bounds how long StartAPIServer waits for a
// restarted API server to answer /readyz. A restart against a running etcd
// takes a few seconds; the margin is for machines loaded by parallel tests.
const apiServerReadyTimeout = 90 * time.Second

// apiServerCertDir returns the directory holding the API server's serving
// certificate, its CA, the client-certificate CA and the service-account
// keys. New names it explicitly, under the scratch directory, because
// envtest treats a directory it chose itself as disposable: it deletes it
// when the API server stops and generates new certificates in a new one
// when it starts again, which would break every client made before.
func apiServerCertDir(scratch string) string { return filepath.Join(scratch, "apiserver") }

// apiServerRestartLog returns the file that receives the output of API
// servers started by StartAPIServer, for its error messages.
func (c *Cluster) apiServerRestartLog() string {
	return filepath.Join(c.Dir, "kube-apiserver-restart.log")
}

// StopAPIServer stops the cluster's kube-apiserver process and nothing
// else: etcd keeps running with every object, and the kube-controller-manager
// (if any) keeps retrying. Clients get connection errors until
// StartAPIServer. Tests use the pair to take a cluster down for real, as an
// outage or an upgrade of the control plane does; a Proxy cuts only the
// network. Stopping a stopped API server does nothing.
func (c *Cluster) StopAPIServer() error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if c.apiDown {
		return nil
	}
	if err := c.env.ControlPlane.GetAPIServer().Stop(); err != nil {
		return fmt.Errorf("stop API server of %q: %w", c.Name, err)
	}
	c.apiDown = true
	return nil
}

// StartAPIServer starts the API server stopped by StopAPIServer again on
// the same address and port, with the same serving certificate, CA,
// client-certificate CA and service-account keys, against the same etcd.
// Config, Client, Kubeconfig and every client made from them before the
// stop work again, and every object is still there. It returns when the
// API server answers /readyz through Config. It returns an error naming the
// cause, with the tail of the API server's output, when the process does
// not answer /healthz within the control plane's start timeout (a minute),
// when it then does not answer /readyz within 90 seconds or before ctx
// ends, or at once when it serves a certificate the clients do not trust.
// Starting a running API server does nothing.
//
// The port is free while the API server is down, and the restart binds it
// again a moment after. Another process that asks the kernel for a free
// port in between (a listener, or the local end of an outgoing connection)
// could be given it; then StartAPIServer fails, and the API server's output
// in the error says "address already in use". The kernel hands out ports
// from a range of thousands, so this is rare.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if !c.apiDown {
		return nil
	}
	logPath := c.apiServerRestartLog()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open API server log of %q: %w", c.Name, err)
	}
	apiServer := c.env.ControlPlane.GetAPIServer()
	// envtest reuses the CertDir, ports and client-certificate CA of its
	// APIServer when started again: apiserver.crt exists, so it generates
	// no new certificates (see apiServerCertDir).
	apiServer.Out, apiServer.Err = logFile, logFile
	release, err := startslot.Acquire(ctx)
	if err != nil {
		_ = logFile.Close()
		return fmt.Errorf("restart API server of %q: %w", c.Name, err)
	}
	defer release()
	startErr := apiServer.Start()
	apiServer.Out, apiServer.Err = nil, nil
	// The API server holds its own copy of the file descriptor.
	_ = logFile.Close()
	if startErr != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("restart API server of %q on %s: %w; its output (tail): %s", c.Name, c.Config.Host, startErr, tail(out, 2000))
	}
	c.apiDown = false
	if err := c.waitReady(ctx); err != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("restarted API server of %q: %w; its output (tail): %s", c.Name, err, tail(out, 2000))
	}
	return nil
}

// waitReady polls /readyz through c.Config (so with the certificates and
// CA the clients use) until it answers 200.
func (c *Cluster) waitReady(ctx context.Context) error {
	httpClient, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return fmt.Errorf("HTTP client: %w", err)
	}
	url := strings.TrimSuffix(c.Config.Host, "/") + "/readyz"
	last := errors.New("no answer yet")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, apiServerReadyTimeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		var badCert *tls.CertificateVerificationError
		switch {
		case errors.As(err, &badCert):
			// Waiting cannot fix a certificate the clients do not
			// trust: the API server came back with other certificates.
			return false, fmt.Errorf("the API server's certificate is not the one the clients trust: %w", err)
		case err != nil:
			last = err
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true, nil
		}
		last = fmt.Errorf("/readyz answered %d: %s", resp.StatusCode, tail(body, 1000))
		return false, nil
	})
	switch {
	case wait.Interrupted(err):
		return fmt.Errorf("not ready within %s: %w (last: %w)", apiServerReadyTimeout, err, last)
	case err != nil:
		return err
	}
	return nil
}
