package clusteraccess

import (
	"errors"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Defaults of a Manager.
const (
	// DefaultPollInterval is how often Request checks whether its access
	// has been granted.
	DefaultPollInterval = 2 * time.Second
	// DefaultTimeout is how long Request waits for its access.
	DefaultTimeout = 5 * time.Minute
	// DefaultTokenRefreshInterval is how often the clusters of Request
	// re-read their token from the Secret while they are in use.
	DefaultTokenRefreshInterval = time.Minute
)

// Client-side rate limits of the clients a Manager builds: providers create
// objects in bursts (CRDs, RBAC, deployments), which client-go's default of
// 5 QPS, or any fixed limit per client, would throttle on a healthy API
// server. A negative QPS turns client-go's limiter off; the API server's
// priority and fairness protects it. WithRESTConfig sets lower limits
// (providerapp's --kube-api-qps does).
const (
	defaultQPS   = -1
	defaultBurst = 100
)

// Manager obtains clusters for one provider. It is safe for concurrent use.
type Manager struct {
	platform  client.Client
	reader    client.Reader
	provider  string
	namespace string

	scheme        *runtime.Scheme
	mcp           Permissions
	workload      *Permissions
	ttl           *common.Duration
	pollInterval  time.Duration
	timeout       time.Duration
	tokenInterval time.Duration
	configure     func(*rest.Config)

	mu sync.Mutex
	// clusters caches the clusters of granted AccessRequests (by the
	// request's key) with the resourceVersion of the Secret they were
	// built from.
	clusters map[types.NamespacedName]cachedCluster
}

// cachedCluster is a cluster built from one version of a kubeconfig Secret.
type cachedCluster struct {
	secretVersion string
	cluster       *spruntime.Cluster
}

// Option configures a Manager.
type Option func(*Manager)

// WithMCPPermissions sets what the provider may do in the tenants' MCP
// clusters. Without it the provider's ServiceAccount there has no rights
// beyond discovery.
func WithMCPPermissions(p Permissions) Option {
	return func(m *Manager) { m.mcp = p }
}

// WithWorkloadCluster makes Clusters also return a shared workload cluster,
// on which the provider gets p.
func WithWorkloadCluster(p Permissions) Option {
	return func(m *Manager) { m.workload = &p }
}

// WithScheme sets the scheme of the clients the Manager builds (default:
// the Kubernetes built-in kinds and apiextensions.k8s.io/v1). Add the kinds
// the provider reads and writes on its clusters.
func WithScheme(s *runtime.Scheme) Option {
	return func(m *Manager) { m.scheme = s }
}

// WithAPIReader sets how the Manager reads ClusterRequests, AccessRequests
// and Secrets (default: the platform client given to New). Pass the
// uncached reader of a manager or cluster (GetAPIReader) when the platform
// client is cached: a cached read of a Secret would start a cluster-wide
// Secret informer, which a provider may not run.
func WithAPIReader(r client.Reader) Option {
	return func(m *Manager) { m.reader = r }
}

// WithTokenTTL sets the lifetime of the tokens the AccessRequests ask for
// (default: the operator's, 24 h). The operator refreshes tokens when 80 %
// of their lifetime has passed.
func WithTokenTTL(d time.Duration) Option {
	return func(m *Manager) { m.ttl = common.DurationOf(d) }
}

// WithPollInterval sets how often Request checks its access (default
// DefaultPollInterval).
func WithPollInterval(d time.Duration) Option {
	return func(m *Manager) { m.pollInterval = d }
}

// WithTimeout sets how long Request waits for its access (default
// DefaultTimeout). A deadline of the context given to Request applies too.
func WithTimeout(d time.Duration) Option {
	return func(m *Manager) { m.timeout = d }
}

// WithTokenRefreshInterval sets how often the clusters of Request re-read
// their token (default DefaultTokenRefreshInterval).
func WithTokenRefreshInterval(d time.Duration) Option {
	return func(m *Manager) { m.tokenInterval = d }
}

// WithRESTConfig lets the caller adjust the REST config of every client the
// Manager builds, for example its QPS, Burst or UserAgent.
func WithRESTConfig(fn func(*rest.Config)) Option {
	return func(m *Manager) { m.configure = fn }
}

// New returns a Manager for the provider providerName whose namespace on the
// platform cluster is namespace (POD_NAMESPACE). platform is a client of the
// platform cluster with the provider's identity; it creates and updates the
// requests in namespace.
func New(platform client.Client, providerName, namespace string, opts ...Option) (*Manager, error) {
	switch {
	case platform == nil:
		return nil, errors.New("clusteraccess: the platform client is nil")
	case providerName == "":
		return nil, errors.New("clusteraccess: the provider name is empty")
	case namespace == "":
		return nil, errors.New("clusteraccess: the provider namespace is empty")
	}
	m := &Manager{
		platform:      platform,
		reader:        platform,
		provider:      providerName,
		namespace:     namespace,
		pollInterval:  DefaultPollInterval,
		timeout:       DefaultTimeout,
		tokenInterval: DefaultTokenRefreshInterval,
		clusters:      map[types.NamespacedName]cachedCluster{},
	}
	for _, opt := range opts {
		opt(m)
	}
	if m.scheme == nil {
		s, err := defaultScheme()
		if err != nil {
			return nil, err
		}
		m.scheme = s
	}
	return m, nil
}

// ProviderName returns the provider's name.
func (m *Manager) ProviderName() string { return m.provider }

// Namespace returns the provider's namespace on the platform cluster, where
// its requests and their Secrets are.
func (m *Manager) Namespace() string { return m.namespace }

func defaultScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("clusteraccess: build scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("clusteraccess: build scheme: %w", err)
	}
	return s, nil
}
