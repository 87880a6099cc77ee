package v1alpha1

// Labels and annotations that Marketplane shares with openMCP. They use the
// openmcp.cloud prefix so that tools written for openMCP recognise them.
const (
	// ClusterLabel is set on every CRD and names the cluster role it is
	// installed into: "platform" or "onboarding".
	ClusterLabel = GroupName + "/cluster"

	// OperationAnnotation asks a controller for a one-off behaviour on an
	// object. Its values are OperationIgnore and OperationReconcile.
	OperationAnnotation = GroupName + "/operation"
	// OperationIgnore makes controllers leave the object alone until the
	// annotation is removed.
	OperationIgnore = "ignore"
	// OperationReconcile forces one reconcile; the controller removes the
	// annotation afterwards.
	OperationReconcile = "reconcile"

	// Finalizer is the finalizer the provider operator puts on provider
	// objects, so that it can clean up before they disappear.
	Finalizer = GroupName + "/finalizer"

	// ProviderGenerationAnnotation is set on the init Job to the
	// metadata.generation of the provider object it initialises. A Job
	// whose value differs from the current generation is re-run.
	ProviderGenerationAnnotation = GroupName + "/provider-generation"

	// ManagedByLabel names the controller that created and owns an object.
	ManagedByLabel = GroupName + "/managed-by"
	// ManagedByOperator is the value of ManagedByLabel on everything the
	// provider operator creates.
	ManagedByOperator = "marketplane-operator"
	// ProviderNameLabel holds, on everything the provider operator creates
	// for a provider, the provider's name (shortened with a hash when it
	// does not fit a label value).
	ProviderNameLabel = GroupName + "/provider-name"
	// ManagedPurposeLabel tells apart objects one controller created for
	// different purposes.
	ManagedPurposeLabel = GroupName + "/managed-purpose"
	// EnvironmentLabel names the environment (the --environment flag) an
	// object belongs to.
	EnvironmentLabel = GroupName + "/environment"
	// OnboardingNameLabel holds the name of the onboarding-cluster object
	// that an object on another cluster was created for.
	OnboardingNameLabel = GroupName + "/onboarding-name"
	// OnboardingNamespaceLabel holds the namespace of the onboarding-cluster
	// object that an object on another cluster was created for.
	OnboardingNamespaceLabel = GroupName + "/onboarding-namespace"
)

// Names of the environment variables the operator sets in every provider
// container, part of the provider deployment contract.
const (
	// EnvPodName holds the name of the pod the provider runs in.
	EnvPodName = "POD_NAME"
	// EnvPodNamespace holds the namespace of the pod the provider runs in.
	EnvPodNamespace = "POD_NAMESPACE"
	// EnvPodIP holds the IP address of the pod the provider runs in.
	EnvPodIP = "POD_IP"
	// EnvPodServiceAccountName holds the service account the pod runs as.
	EnvPodServiceAccountName = "POD_SERVICE_ACCOUNT_NAME"
)

// Defaults of the metrics endpoint of a provider's run pods.
const (
	// MetricsPortName is the name of the container and Service port.
	MetricsPortName = "metrics-http"
	// MetricsPathDefault is the HTTP path used when none is configured.
	MetricsPathDefault = "/metrics"
	// MetricsPortDefault is the port used when none is configured.
	MetricsPortDefault int32 = 8080
)
