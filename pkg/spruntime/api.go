package spruntime

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// API is what a ServiceProviderAPI type (for example Velero or FooService)
// implements so that the runtime can drive it. The scaffold generates these
// methods; they read and write the common status fields every
// ServiceProviderAPI carries (status.conditions, status.phase,
// status.observedGeneration).
type API interface {
	client.Object
	// GetConditions returns a pointer to status.conditions.
	GetConditions() *[]metav1.Condition
	// GetPhase and SetPhase read and write status.phase.
	GetPhase() Phase
	SetPhase(Phase)
	// SetObservedGeneration writes status.observedGeneration.
	SetObservedGeneration(int64)
}

// Config is what a provider's ProviderConfig type implements. There is one
// ProviderConfig per provider: cluster-scoped, on the platform cluster, named
// like the provider (--provider-name).
type Config interface {
	client.Object
	// PollInterval is how often every object is reconciled when nothing
	// changes (drift detection). Zero means DefaultPollInterval.
	PollInterval() time.Duration
}

// ConfigValidator is optional. When a ProviderConfig type implements it,
// the runtime calls Validate each time it reads the ProviderConfig. An error
// (for example a duration stored before the API server checked it) stops
// every object of the provider at that point: each gets Ready=False and
// Synced=False with the reason InvalidProviderConfig and the error as the
// message, nothing else is done, and a change of the ProviderConfig
// reconciles them again. Fields whose values the API server validates can
// still hold bad values written before the rule existed, so a ProviderConfig
// type whose fields only decode (such as common.Duration) should implement
// it.
type ConfigValidator interface {
	Validate() error
}

// Reconciler is the domain logic a provider author writes. The runtime calls
// CreateOrUpdate for every object that exists and Delete for one that is
// being deleted, with its ProviderConfig and access to the clusters it acts
// on. Both may set status through the status helpers (StatusProgressing,
// StatusReady, StatusTerminating); the runtime persists status after the
// call. Returning an error built with InvalidUserInput sets Ready=False with
// its reason and does not requeue; any other error is retried with backoff.
// Delete reports completion by returning a zero Result and no error; to wait
// for something, return RequeueAfter.
type Reconciler[T API, C Config] interface {
	CreateOrUpdate(ctx context.Context, obj T, cfg C, clusters ClusterContext) (ctrl.Result, error)
	Delete(ctx context.Context, obj T, cfg C, clusters ClusterContext) (ctrl.Result, error)
}

// Observer is optional. When a Reconciler implements it, the runtime calls
// Observe before CreateOrUpdate: an object that exists and is up to date is
// not updated (only its Ready status is refreshed), and a drift is reported
// on the Synced condition and as an event before CreateOrUpdate repairs it.
type Observer[T API, C Config] interface {
	Observe(ctx context.Context, obj T, cfg C, clusters ClusterContext) (Observation, error)
}

// Observation is what Observe found.
type Observation struct {
	// Exists is true when the domain service exists.
	Exists bool
	// UpToDate is true when it matches the object's spec and config.
	UpToDate bool
	// Drift says what differs when it exists but is not up to date, in
	// words for an event, e.g. "CRD foos.example.domain missing".
	Drift string
}

// UserResourceChecker is optional. When a Reconciler implements it, the
// runtime calls it before Delete: while it reports user resources (for
// example objects of the DomainServiceAPI in the tenant's MCP), deletion
// waits with the condition DeletionBlocked (reason UserResourcesPresent)
// naming them, and Delete is not called.
type UserResourceChecker[T API, C Config] interface {
	UserResources(ctx context.Context, obj T, cfg C, clusters ClusterContext) ([]string, error)
}

// Cluster is access to one cluster: a client and the REST config behind it.
type Cluster struct {
	name   string
	config *rest.Config
	client client.Client
}

// NewCluster wraps a REST config and client as a Cluster.
func NewCluster(name string, cfg *rest.Config, c client.Client) *Cluster {
	return &Cluster{name: name, config: cfg, client: c}
}

// Name identifies the cluster, e.g. the Cluster object's name.
func (c *Cluster) Name() string { return c.name }

// Client returns a client for the cluster.
func (c *Cluster) Client() client.Client { return c.client }

// RESTConfig returns the REST config behind Client.
func (c *Cluster) RESTConfig() *rest.Config { return c.config }

// ClusterContext holds the clusters a request acts on: the tenant's MCP
// cluster and, for providers that asked for one, a shared workload cluster.
// The platform and onboarding clusters are not here: they are the same for
// every request and are given to the Reconciler when it is built.
type ClusterContext struct {
	// MCPCluster is the cluster of the object's ManagedControlPlane (the
	// ManagedControlPlane with the object's name and namespace).
	MCPCluster *Cluster
	// WorkloadCluster is a shared workload cluster, or nil when the
	// provider did not ask for one.
	WorkloadCluster *Cluster
}

// ClusterAccess obtains the clusters for an object and releases them when it
// is deleted. The default implementation (package clusteraccess) goes
// through ClusterRequests and AccessRequests on the platform cluster;
// providers that place objects differently (the inter-operator schedules on
// SFClusters) supply their own.
type ClusterAccess[T API] interface {
	// Clusters returns the object's clusters. ready is false while access is
	// still being granted; the runtime then requeues without calling the
	// Reconciler.
	Clusters(ctx context.Context, obj T) (clusters ClusterContext, ready bool, err error)
	// Release gives up what Clusters obtained; done is false while that is
	// still in progress.
	Release(ctx context.Context, obj T) (done bool, err error)
}
