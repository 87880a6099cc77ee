package v2alpha1

// Defaults of the ManagedControlPlane controller.
const (
	// DefaultOIDCProviderName is the status.access key of the platform's
	// standard OIDC provider. It is also the key used when the
	// ClusterProvider offers token access only. Extra providers cannot use
	// this name.
	DefaultOIDCProviderName = "default"
	// DefaultMCPClusterPurpose is the purpose of the ClusterRequest a
	// ManagedControlPlane creates unless configured otherwise.
	DefaultMCPClusterPurpose = "mcp"
)

// Labels and finalizers of ManagedControlPlanes and the objects created for
// them.
const (
	// MCPNameLabel holds the name of the ManagedControlPlane an object was
	// created for.
	MCPNameLabel = GroupName + "/mcp-name"
	// MCPNamespaceLabel holds the namespace of the ManagedControlPlane an
	// object was created for.
	MCPNamespaceLabel = GroupName + "/mcp-namespace"
	// OIDCProviderLabel holds the OIDC provider an AccessRequest was created
	// for.
	OIDCProviderLabel = GroupName + "/oidc-provider"
	// MCPPurposeOverrideLabel, set when a ManagedControlPlane is created,
	// replaces the purpose of its ClusterRequest. It cannot be added,
	// removed or changed later.
	MCPPurposeOverrideLabel = GroupName + "/purpose-override"
	// MCPPurposeLabel is openMCP's purpose label (openMCP calls it
	// MCPPurposeOverrideLabel). It is accepted as well as
	// MCPPurposeOverrideLabel, with the same rules; when both are set,
	// MCPPurposeOverrideLabel wins.
	MCPPurposeLabel = GroupName + "/purpose"
	// MCPKindLabel, on a platform namespace of a control plane, names the
	// kind that holds it: ManagedControlPlane or ControlPlane. The two kinds
	// map the same namespace/name to the same platform namespace, so only
	// one of them can have it. A platform namespace with the MCPNameLabel but
	// without this label was created by an earlier version for a
	// ManagedControlPlane.
	MCPKindLabel = GroupName + "/mcp-kind"
	// PlatformNamespaceAnnotation, on a ManagedControlPlane or ControlPlane,
	// records the platform namespace that holds its requests. The controller
	// sets it; PlatformNamespace reads it. Control planes created before
	// Marketplane adopted openMCP's namespace algorithm keep their legacy
	// namespace through it (LegacyMCPNamespace); new ones get
	// StableMCPNamespace. Only those two values are honoured.
	PlatformNamespaceAnnotation = GroupName + "/platform-namespace"

	// MCPFinalizer is the controller's own finalizer on a
	// ManagedControlPlane.
	MCPFinalizer = GroupName + "/mcp"
	// ServiceDependencyFinalizerPrefix starts the finalizers that services
	// put on a ManagedControlPlane while they still have objects for it.
	ServiceDependencyFinalizerPrefix = "services.openmcp.cloud/"
	// ClusterRequestFinalizerPrefix starts the finalizers a
	// ManagedControlPlane carries for its ClusterRequests.
	ClusterRequestFinalizerPrefix = "request.clusters.openmcp.cloud/"
)

// Condition types of a ManagedControlPlane, next to common.ConditionTypeReady.
const (
	// ConditionClusterRequestReady reports whether the ClusterRequest for
	// the MCP cluster has been granted.
	ConditionClusterRequestReady = "ClusterRequestReady"
	// ConditionPrefixCluster, followed by a condition type of the MCP's
	// Cluster, mirrors that condition.
	ConditionPrefixCluster = "Cluster."
	// ConditionPrefixAccessReady, followed by an OIDC provider or token
	// name, reports whether that access has been issued.
	ConditionPrefixAccessReady = "AccessReady."
	// ConditionAllAccessReady reports whether every requested access has
	// been issued.
	ConditionAllAccessReady = "AllAccessReady"
	// ConditionAllServicesDeleted reports, during deletion, whether every
	// service object of the ManagedControlPlane is gone.
	ConditionAllServicesDeleted = "AllServicesDeleted"
	// ConditionAllClusterRequestsDeleted reports, during deletion, whether
	// every ClusterRequest of the ManagedControlPlane is gone.
	ConditionAllClusterRequestsDeleted = "AllClusterRequestsDeleted"
)
