package v1alpha1

// Purposes a cluster can serve. A Cluster lists the purposes it serves; a
// ClusterRequest asks for one. The scheduler may know further purposes.
const (
	// PurposePlatform is the cluster that runs the platform's controllers
	// and providers.
	PurposePlatform = "platform"
	// PurposeOnboarding is the tenants' entry point. It may have no workers.
	PurposeOnboarding = "onboarding"
	// PurposeMCP is a tenant's managed control plane. It may have no workers.
	PurposeMCP = "mcp"
	// PurposeWorkload runs the workloads of domain services.
	PurposeWorkload = "workload"
)

// Tenancy says whether a cluster serves one ClusterRequest or several.
// +kubebuilder:validation:Enum=Exclusive;Shared
type Tenancy string

// The tenancy models of a cluster.
const (
	// TenancyExclusive means that the cluster serves a single request.
	TenancyExclusive Tenancy = "Exclusive"
	// TenancyShared means that the cluster serves any number of requests.
	TenancyShared Tenancy = "Shared"
)

// Phases of ClusterRequests and AccessRequests, in status.phase.
const (
	// RequestPending means that the request has been neither granted nor
	// denied yet.
	RequestPending = "Pending"
	// RequestGranted means that the request has been granted: a
	// ClusterRequest has status.cluster, an AccessRequest has
	// status.secretRef.
	RequestGranted = "Granted"
	// RequestDenied means that the request has been denied; the conditions
	// say why.
	RequestDenied = "Denied"
)

// Names of the well-known entries of Cluster.status.endpoints.
const (
	// EndpointAPIServerExternal is the API server URL reachable from
	// outside the cluster.
	EndpointAPIServerExternal = "apiserver-external"
	// EndpointAPIServerInternal is the API server URL reachable from inside
	// the cluster's network.
	EndpointAPIServerInternal = "apiserver-internal"
)

// Keys of the Secret an AccessRequest yields.
const (
	// SecretKeyKubeconfig holds the kubeconfig. It is always set.
	SecretKeyKubeconfig = "kubeconfig"
	// SecretKeyToken holds the bearer token of token-based access.
	SecretKeyToken = "token"
	// SecretKeyHost holds the URL of the cluster's API server.
	SecretKeyHost = "host"
	// SecretKeyCA holds the PEM CA bundle of the cluster's API server.
	SecretKeyCA = "ca.crt"
	// SecretKeyExpirationTimestamp holds the time (Unix seconds) at which
	// the credentials expire; absent for credentials that do not expire.
	SecretKeyExpirationTimestamp = "expirationTimestamp"
	// SecretKeyCreationTimestamp holds the time (Unix seconds) at which the
	// credentials were issued; absent for credentials that do not expire.
	SecretKeyCreationTimestamp = "creationTimestamp"
	// SecretKeyClientID holds the OAuth client ID of OIDC-based access.
	SecretKeyClientID = "clientID"
)

// Labels and annotations of the cluster API.
const (
	// K8sVersionLabel holds the actual Kubernetes version of a Cluster,
	// which spec.kubernetes.version may give only partly. The
	// ClusterProvider sets it.
	K8sVersionLabel = GroupName + "/k8sversion"
	// ProviderLabel names the ClusterProvider responsible for a Cluster or
	// an AccessRequest.
	ProviderLabel = GroupName + "/provider"
	// ProfileLabel names the ClusterProfile behind an AccessRequest.
	ProfileLabel = GroupName + "/profile"
	// ProviderInfoAnnotation holds free-form provider information about a
	// Cluster, shown by 'kubectl get clusters -o wide'.
	ProviderInfoAnnotation = GroupName + "/providerinfo"
	// DeleteWithoutRequestsLabel, set to "true" on a Cluster, lets the
	// scheduler delete the Cluster when its last ClusterRequest is gone.
	DeleteWithoutRequestsLabel = GroupName + "/delete-without-requests"
	// RandomizeClusterNameLabel, set to "true" on a ClusterRequest, gives
	// the resulting Cluster a random name, to resolve a name conflict.
	RandomizeClusterNameLabel = GroupName + "/randomize-cluster-name"
)

// Finalizers of the cluster API.
const (
	// ClusterRequestFinalizer is put on ClusterRequests by the scheduler.
	ClusterRequestFinalizer = GroupName + "/request"
	// RequestFinalizerOnClusterPrefix, followed by a ClusterRequest's UID,
	// is the finalizer a Cluster carries for each request it serves. The
	// finalizers count the Cluster's tenants and let a lost
	// ClusterRequest.status.cluster be recovered.
	RequestFinalizerOnClusterPrefix = "request." + GroupName + "/"
)
