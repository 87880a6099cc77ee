package clusters

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Defaults of a Registry.
const (
	// DefaultRefreshInterval is how long a Target is used before its
	// kubeconfig Secret is read again.
	DefaultRefreshInterval = 30 * time.Second
	// DefaultRequestTimeout bounds every request to a target cluster,
	// client-go's retries of reads included, so that a target that stops
	// answering holds a worker for this long at most and its instances
	// report it (ClusterUnreachable) instead of waiting on a hung request.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultQPS and DefaultBurst are the client-side rate limits of the
	// clients of target clusters. The negative QPS turns client-go's
	// limiter off (its defaults, 5 and 10, or any fixed limit per client
	// would throttle provisioning on a healthy server): the target's API
	// Priority and Fairness protects it. WithRateLimits sets lower limits.
	DefaultQPS   = -1
	DefaultBurst = 400
)

// Target is access to the cluster of one SFCluster.
type Target struct {
	// Cluster is the cluster's client and REST config.
	*spruntime.Cluster
	// Applier applies objects to the cluster.
	Applier *apply.Applier
	// Server is the API server URL of the kubeconfig.
	Server string
	// CAData is the CA bundle of the API server, PEM; empty when the
	// kubeconfig trusts the system's roots.
	CAData []byte

	// httpClient is the HTTP client behind Cluster's client, so that
	// forgetting the Target can close its idle connections.
	httpClient *http.Client
}

// Variable returns what templates see as .cluster: the SFCluster's name,
// the API server URL and the CA bundle in base64. It holds no credentials.
func (t *Target) Variable() map[string]any {
	return map[string]any{
		"name":   t.Name(),
		"server": t.Server,
		"caData": base64.StdEncoding.EncodeToString(t.CAData),
	}
}

// Registry hands out Targets for SFClusters.
type Registry struct {
	clusters client.Reader
	secrets  client.Reader
	scheme   *runtime.Scheme
	refresh  time.Duration
	timeout  time.Duration
	qps      float32
	burst    int
	now      func() time.Time

	mu       sync.Mutex
	entries  map[types.NamespacedName]*entry
	onForget []func(namespace, name string)
}

type entry struct {
	secret          types.NamespacedName
	resourceVersion string
	checked         time.Time
	target          *Target
}

// Option configures a Registry.
type Option func(*Registry)

// WithRefreshInterval sets how long a Target is used before the kubeconfig
// Secret is read again (DefaultRefreshInterval).
func WithRefreshInterval(d time.Duration) Option {
	return func(r *Registry) {
		if d > 0 {
			r.refresh = d
		}
	}
}

// WithRequestTimeout bounds every request to a target cluster, retries
// included (DefaultRequestTimeout).
func WithRequestTimeout(d time.Duration) Option {
	return func(r *Registry) {
		if d > 0 {
			r.timeout = d
		}
	}
}

// WithRateLimits sets the client-side rate limits of target clients
// (DefaultQPS, DefaultBurst); a QPS or burst that is not positive leaves
// the defaults.
func WithRateLimits(qps float32, burst int) Option {
	return func(r *Registry) {
		if qps > 0 && burst > 0 {
			r.qps, r.burst = qps, burst
		}
	}
}

// NewRegistry returns a Registry that reads SFClusters with clusters
// (usually the platform cluster's cached client) and their kubeconfig
// Secrets with secrets (usually the platform cluster's API reader, so that
// the inter-operator needs no watch on Secrets). Target clients use scheme.
func NewRegistry(clusters, secrets client.Reader, scheme *runtime.Scheme, opts ...Option) *Registry {
	r := &Registry{
		clusters: clusters,
		secrets:  secrets,
		scheme:   scheme,
		refresh:  DefaultRefreshInterval,
		timeout:  DefaultRequestTimeout,
		qps:      DefaultQPS,
		burst:    DefaultBurst,
		now:      time.Now,
		entries:  map[types.NamespacedName]*entry{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Target returns access to the SFCluster name in namespace. A missing
// SFCluster or kubeconfig is an *Error.
func (r *Registry) Target(ctx context.Context, namespace, name string) (*Target, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	sfc := &resourcev1alpha1.SFCluster{}
	if err := r.clusters.Get(ctx, key, sfc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: ReasonClusterNotFound, Message: fmt.Sprintf("SFCluster %s does not exist in namespace %s", name, namespace)}
		}
		return nil, fmt.Errorf("get SFCluster %s: %w", key, err)
	}
	secretKey := types.NamespacedName{Namespace: namespace, Name: sfc.Spec.SecretRef}

	r.mu.Lock()
	e := r.entries[key]
	if e != nil && e.secret == secretKey && r.now().Sub(e.checked) < r.refresh {
		t := e.target
		r.mu.Unlock()
		return t, nil
	}
	r.mu.Unlock()

	secret := &corev1.Secret{}
	if err := r.secrets.Get(ctx, secretKey, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: ReasonInvalidKubeconfig, Message: fmt.Sprintf("the kubeconfig Secret %s of SFCluster %s does not exist", secretKey.Name, name)}
		}
		return nil, fmt.Errorf("get kubeconfig Secret of SFCluster %s: %w", key, err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[key]; e != nil && e.secret == secretKey && e.resourceVersion == secret.ResourceVersion {
		e.checked = r.now()
		return e.target, nil
	}
	t, err := r.newTarget(name, secret.Data[resourcev1alpha1.KubeconfigSecretKey])
	if err != nil {
		return nil, &Error{Reason: ReasonInvalidKubeconfig, Message: fmt.Sprintf("the kubeconfig Secret %s of SFCluster %s: %v", secretKey.Name, name, err)}
	}
	r.entries[key] = &entry{secret: secretKey, resourceVersion: secret.ResourceVersion, checked: r.now(), target: t}
	return t, nil
}

// Forget drops the cached Target of an SFCluster, for example after its
// credentials were refused or the SFCluster was deleted, and closes the
// idle connections of its client: nothing keeps a connection to a cluster
// that left open. The next Target call reads the Secret again. Callers
// that still hold the Target may go on using it.
func (r *Registry) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	e := r.entries[key]
	delete(r.entries, key)
	hooks := r.onForget
	r.mu.Unlock()
	if e != nil && e.target.httpClient != nil {
		e.target.httpClient.CloseIdleConnections()
	}
	for _, f := range hooks {
		f(namespace, name)
	}
}

// OnForget registers f to be called, outside the Registry's lock, after
// every Forget: what else keeps per-cluster state (watches) lets it go too.
// Register before the Registry is used.
func (r *Registry) OnForget(f func(namespace, name string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onForget = append(r.onForget, f)
}

// Cached reports whether the Registry holds a Target for the SFCluster
// name in namespace.
func (r *Registry) Cached(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries[types.NamespacedName{Namespace: namespace, Name: name}] != nil
}

func (r *Registry) newTarget(name string, data []byte) (*Target, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("key %q is empty or missing", resourcev1alpha1.KubeconfigSecretKey)
	}
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		return nil, err
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("read the CA file the kubeconfig names: %w", err)
		}
	}
	cfg.QPS, cfg.Burst = r.qps, r.burst
	cfg.UserAgent = "marketplane-interoperator"
	// The client's requests are bounded; the config handed out is not, so
	// that watches made from it are not cut.
	requests := rest.CopyConfig(cfg)
	requests.Timeout = r.timeout
	httpClient, err := rest.HTTPClientFor(requests)
	if err != nil {
		return nil, fmt.Errorf("HTTP client: %w", err)
	}
	c, err := client.New(requests, client.Options{Scheme: r.scheme, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Target{
		Cluster:    spruntime.NewCluster(name, rest.CopyConfig(cfg), c),
		Applier:    apply.New(c),
		Server:     cfg.Host,
		CAData:     ca,
		httpClient: httpClient,
	}, nil
}
