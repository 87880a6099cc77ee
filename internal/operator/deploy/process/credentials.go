package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TokenSource mints tokens for ServiceAccounts on the platform cluster.
type TokenSource interface {
	// Token returns a token for namespace/serviceAccount valid for about
	// ttl, and when it expires.
	Token(ctx context.Context, namespace, serviceAccount string, ttl time.Duration) (token string, expires time.Time, err error)
}

// TokenSourceFn adapts a function to TokenSource.
type TokenSourceFn func(ctx context.Context, namespace, serviceAccount string, ttl time.Duration) (string, time.Time, error)

// Token calls fn.
func (fn TokenSourceFn) Token(ctx context.Context, namespace, serviceAccount string, ttl time.Duration) (string, time.Time, error) {
	return fn(ctx, namespace, serviceAccount, ttl)
}

// TokenRequester is the TokenSource that calls the TokenRequest API
// (serviceaccounts/token) with a client of the platform cluster.
type TokenRequester struct {
	// Client talks to the platform cluster.
	Client client.Client
}

// Token requests a token with the TokenRequest API.
func (r TokenRequester) Token(ctx context.Context, namespace, serviceAccount string, ttl time.Duration) (string, time.Time, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: serviceAccount}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(ttl / time.Second)),
	}}
	if err := r.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", time.Time{}, fmt.Errorf("request token for service account %s/%s: %w", namespace, serviceAccount, err)
	}
	return req.Status.Token, req.Status.ExpirationTimestamp.Time, nil
}

// Refreshing: a token is replaced when this fraction of its lifetime has
// passed, and a failed refresh is retried after refreshRetry.
const (
	refreshAtFraction = 0.8
	refreshRetry      = 10 * time.Second
	refreshTimeout    = 30 * time.Second
)

// credentials are the token and kubeconfig files of one role (init or
// run) of a provider, kept fresh by a refresher goroutine.
type credentials struct {
	d                         *Deployer
	namespace, serviceAccount string
	tokenPath, kubeconfigPath string

	mu        sync.Mutex
	refreshAt time.Time

	stop chan struct{}
	done chan struct{}
}

// ensureCredentials makes sure p has fresh credentials of role for
// namespace/serviceAccount and returns the kubeconfig path. The first call
// mints a token synchronously and starts the refresher.
func (d *Deployer) ensureCredentials(ctx context.Context, p *provider, role, namespace, serviceAccount string) (string, error) {
	if c := p.creds[role]; c != nil {
		if c.namespace == namespace && c.serviceAccount == serviceAccount {
			return c.kubeconfigPath, nil
		}
		_ = c.close(false) // the new credentials overwrite the files
		delete(p.creds, role)
	}
	c := &credentials{
		d:              d,
		namespace:      namespace,
		serviceAccount: serviceAccount,
		tokenPath:      p.tokenPath(role),
		kubeconfigPath: filepath.Join(p.dir, role+".kubeconfig"),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
	}
	kubeconfig, err := d.kubeconfig(c.tokenPath, namespace, serviceAccount)
	if err != nil {
		return "", err
	}
	if err := c.mint(ctx); err != nil {
		return "", err
	}
	if err := writeFileAtomic(c.kubeconfigPath, kubeconfig); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	if len(d.caData) > 0 {
		if err := writeFileAtomic(p.caPath(), d.caData); err != nil {
			return "", fmt.Errorf("write platform CA: %w", err)
		}
	}
	p.creds[role] = c
	go c.refresh(context.WithoutCancel(ctx))
	return c.kubeconfigPath, nil
}

// tokenPath is the token file of role, which ensureCredentials keeps fresh.
func (p *provider) tokenPath(role string) string { return filepath.Join(p.dir, role+".token") }

// caPath is where ensureCredentials writes the platform CA bundle.
func (p *provider) caPath() string { return filepath.Join(p.dir, "ca.crt") }

// dropCredentials stops the refresher of role and deletes its files.
func (p *provider) dropCredentials(role string) error {
	c := p.creds[role]
	if c == nil {
		return nil
	}
	delete(p.creds, role)
	if err := c.close(true); err != nil {
		return fmt.Errorf("remove %s credentials: %w", role, err)
	}
	return nil
}

// mint requests a new token and replaces the token file.
func (c *credentials) mint(ctx context.Context) error {
	token, expires, err := c.d.tokens.Token(ctx, c.namespace, c.serviceAccount, c.d.opts.tokenTTL)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(c.tokenPath, []byte(token)); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	now := c.d.clock.Now()
	lifetime := expires.Sub(now)
	c.mu.Lock()
	c.refreshAt = now.Add(time.Duration(float64(lifetime) * refreshAtFraction))
	c.mu.Unlock()
	return nil
}

// refresh mints a new token whenever the current one is due, until close.
func (c *credentials) refresh(ctx context.Context) {
	defer close(c.done)
	log := logr.FromContextOrDiscard(ctx).WithValues("serviceAccount", c.namespace+"/"+c.serviceAccount)
	for {
		c.mu.Lock()
		wait := c.refreshAt.Sub(c.d.clock.Now())
		c.mu.Unlock()
		select {
		case <-c.stop:
			return
		case <-c.d.clock.After(max(wait, 0)):
		}
		mintCtx, cancel := context.WithTimeout(ctx, refreshTimeout)
		err := c.mint(mintCtx)
		cancel()
		if err != nil {
			log.Error(err, "Refreshing the token of a provider process failed; retrying", "retryAfter", refreshRetry)
			c.mu.Lock()
			c.refreshAt = c.d.clock.Now().Add(refreshRetry)
			c.mu.Unlock()
			continue
		}
		log.V(1).Info("Refreshed the token of a provider process")
	}
}

// close stops the refresher and, with remove, deletes the files.
func (c *credentials) close(remove bool) error {
	close(c.stop)
	<-c.done
	if !remove {
		return nil
	}
	var errs []error
	for _, f := range []string{c.tokenPath, c.kubeconfigPath} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kubeconfig returns a kubeconfig for the platform API server whose user
// reads its token from tokenPath.
func (d *Deployer) kubeconfig(tokenPath, namespace, serviceAccount string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["platform"] = &clientcmdapi.Cluster{
		Server:                   d.server,
		CertificateAuthorityData: d.caData,
		InsecureSkipTLSVerify:    d.cfg.Platform.Insecure,
		TLSServerName:            d.cfg.Platform.ServerName,
	}
	cfg.AuthInfos[serviceAccount] = &clientcmdapi.AuthInfo{TokenFile: tokenPath}
	cfg.Contexts["platform"] = &clientcmdapi.Context{Cluster: "platform", AuthInfo: serviceAccount, Namespace: namespace}
	cfg.CurrentContext = "platform"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return data, nil
}

// platformEndpoint returns the server URL and CA bundle of the platform API
// server for kubeconfigs.
func platformEndpoint(cfg *rest.Config) (string, []byte, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("platform API server address: %w", err)
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", nil, fmt.Errorf("read platform CA: %w", err)
		}
	}
	return u.String(), ca, nil
}

// writeFileAtomic replaces path with data (mode 0600) so that readers never
// see a partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// caFile is p's copy of the platform CA bundle, or "" when the platform's
// REST config has none (ensureCredentials writes it then).
func (d *Deployer) caFile(p *provider) string {
	if len(d.caData) == 0 {
		return ""
	}
	return p.caPath()
}
