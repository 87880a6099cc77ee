package clusteraccess

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// readKubeconfig reads the Secret key and parses its kubeconfig. found is
// false when the Secret does not exist.
func (m *Manager) readKubeconfig(ctx context.Context, key types.NamespacedName) (cfg *rest.Config, secret *corev1.Secret, found bool, err error) {
	secret = &corev1.Secret{}
	if err := m.reader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("get kubeconfig Secret %s: %w", key, err)
	}
	cfg, err = kubeconfig.Parse(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		return nil, nil, true, fmt.Errorf("kubeconfig Secret %s key %q: %w", key, clustersv1alpha1.SecretKeyKubeconfig, err)
	}
	return cfg, secret, true, nil
}

// newCluster builds a cluster named name from cfg.
func (m *Manager) newCluster(name string, cfg *rest.Config) (*spruntime.Cluster, error) {
	cfg.QPS, cfg.Burst = defaultQPS, defaultBurst
	if m.configure != nil {
		m.configure(cfg)
	}
	c, err := client.New(cfg, client.Options{Scheme: m.scheme})
	if err != nil {
		return nil, fmt.Errorf("client for cluster %s: %w", name, err)
	}
	return spruntime.NewCluster(name, cfg, c), nil
}

// cachedClusterFor returns the cluster of the granted AccessRequest arKey,
// whose kubeconfig is in the Secret secretKey, reusing the cached one while
// the Secret's resourceVersion is unchanged. ok is false while the Secret is
// missing (the operator writes it again).
func (m *Manager) cachedClusterFor(ctx context.Context, arKey, secretKey types.NamespacedName, name string) (*spruntime.Cluster, bool, error) {
	secret := &corev1.Secret{}
	if err := m.reader.Get(ctx, secretKey, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("get kubeconfig Secret %s: %w", secretKey, err)
	}
	m.mu.Lock()
	cached, ok := m.clusters[arKey]
	m.mu.Unlock()
	if ok && cached.secretVersion == secret.ResourceVersion {
		return cached.cluster, true, nil
	}
	cfg, err := kubeconfig.Parse(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		return nil, false, fmt.Errorf("kubeconfig Secret %s key %q: %w", secretKey, clustersv1alpha1.SecretKeyKubeconfig, err)
	}
	cluster, err := m.newCluster(name, cfg)
	if err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	m.clusters[arKey] = cachedCluster{secretVersion: secret.ResourceVersion, cluster: cluster}
	m.mu.Unlock()
	logf.FromContext(ctx).V(1).Info("Built client from kubeconfig Secret", "cluster", name, "secret", secretKey, "secretVersion", secret.ResourceVersion)
	return cluster, true, nil
}

// forget drops the cached cluster of the AccessRequest arKey.
func (m *Manager) forget(arKey types.NamespacedName) {
	m.mu.Lock()
	delete(m.clusters, arKey)
	m.mu.Unlock()
}

// secretToken is the bearer token of a kubeconfig Secret, re-read when it is
// older than maxAge or was rejected.
type secretToken struct {
	reader client.Reader
	key    types.NamespacedName
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	token   string
	fetched time.Time
}

// get returns the current token. When the Secret cannot be read the last
// token is used: it may well still be valid, and the request's own error
// is more telling than a failed refresh.
func (s *secretToken) get(ctx context.Context) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && s.now().Sub(s.fetched) < s.maxAge {
		return s.token
	}
	secret := &corev1.Secret{}
	if err := s.reader.Get(ctx, s.key, secret); err != nil {
		logf.FromContext(ctx).V(1).Info("Cannot re-read token, using the last one", "secret", s.key, "error", err.Error())
		return s.token
	}
	cfg, err := kubeconfig.Parse(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil || cfg.BearerToken == "" {
		logf.FromContext(ctx).V(1).Info("Kubeconfig Secret holds no token, using the last one", "secret", s.key)
		return s.token
	}
	s.token, s.fetched = cfg.BearerToken, s.now()
	return s.token
}

// expire makes the next get re-read the Secret.
func (s *secretToken) expire() {
	s.mu.Lock()
	s.fetched = time.Time{}
	s.mu.Unlock()
}

// tokenRoundTripper authenticates every request with the current token of
// a secretToken.
type tokenRoundTripper struct {
	token *secretToken
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *tokenRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = utilnet.CloneRequest(req)
	req.Header.Set("Authorization", "Bearer "+t.token.get(req.Context()))
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.token.expire()
	}
	return resp, err
}

// WrappedRoundTripper returns the wrapped transport (for client-go's
// transport inspection).
func (t *tokenRoundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }

// refreshingConfig makes cfg, built from the Secret key, take its bearer
// token from the Secret while it is used, so that tokens the operator
// refreshes are picked up. A config without a bearer token stays as it is.
func (m *Manager) refreshingConfig(cfg *rest.Config, key types.NamespacedName) {
	if cfg.BearerToken == "" {
		return
	}
	tok := &secretToken{reader: m.reader, key: key, maxAge: m.tokenInterval, now: time.Now, token: cfg.BearerToken, fetched: time.Now()}
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &tokenRoundTripper{token: tok, next: rt} })
}
