package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// Verbosity is the log level a provider runs with. The operator passes it as
// --verbosity to both subcommands. openMCP accepts the lower-case spellings
// too, so they are accepted here as well.
// +kubebuilder:validation:Enum=DEBUG;INFO;ERROR;debug;info;error
type Verbosity string

// The log levels a provider can run with.
const (
	// VerbosityDebug logs decisions and flow in addition to INFO.
	VerbosityDebug Verbosity = "DEBUG"
	// VerbosityInfo logs state changes and errors. It is the default.
	VerbosityInfo Verbosity = "INFO"
	// VerbosityError logs errors only.
	VerbosityError Verbosity = "ERROR"
)

// DeploymentSpec is how the provider operator runs a provider: the image,
// the init and run commands, and the settings of the Job and Deployment it
// creates. ServiceProvider, ClusterProvider and PlatformService embed it.
type DeploymentSpec struct {
	// Image is the provider's container image. Its entrypoint is the provider
	// binary, which understands the init and run subcommands.
	// +required
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// ImagePullSecrets name Secrets in the operator's namespace used to pull
	// the image from a private registry.
	// +optional
	ImagePullSecrets []common.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// InitCommand is the command of the init Job, run once per generation of
	// the provider object. The operator appends --environment, --verbosity
	// and --provider-name.
	// +optional
	// +kubebuilder:default={"init"}
	InitCommand []string `json:"initCommand,omitempty"`

	// RunCommand is the command of the run Deployment that hosts the
	// provider's controllers. The operator appends --environment,
	// --verbosity and --provider-name, and --leader-elect=true when
	// RunReplicas is greater than 1.
	// +optional
	// +kubebuilder:default={"run"}
	RunCommand []string `json:"runCommand,omitempty"`

	// Env adds environment variables to the init Job and the run
	// Deployment, next to POD_NAME, POD_NAMESPACE, POD_IP and
	// POD_SERVICE_ACCOUNT_NAME, which the operator always sets.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	Env []EnvVar `json:"env,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// Verbosity is the provider's log level.
	// +optional
	// +kubebuilder:default=INFO
	Verbosity Verbosity `json:"verbosity,omitempty"`

	// ExtraVolumes are added to the pods of the init Job and the run
	// Deployment. At most 64: a pod needs a few, and the bound keeps the CEL
	// rules of the quantities they hold within the CRD's cost budget
	// (docs/api.md, "Quantities").
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge,retainKeys
	ExtraVolumes []corev1.Volume `json:"extraVolumes,omitempty" patchStrategy:"merge,retainKeys" patchMergeKey:"name"`

	// ExtraVolumeMounts are added to the provider container; they usually
	// mount ExtraVolumes.
	// +optional
	// +listType=map
	// +listMapKey=mountPath
	// +patchMergeKey=mountPath
	// +patchStrategy=merge
	ExtraVolumeMounts []corev1.VolumeMount `json:"extraVolumeMounts,omitempty" patchStrategy:"merge" patchMergeKey:"mountPath"`

	// RunReplicas is the number of pods of the run Deployment. With more
	// than one, the provider must elect a leader. At most 100 (openMCP sets
	// no maximum): only the leader works, the others wait to take over, and
	// the bound caps the pods one provider object has the operator run.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	RunReplicas int32 `json:"runReplicas,omitempty"`

	// TopologySpreadConstraints spread the run pods across failure domains.
	// The operator fills in the label selector so that it matches the run
	// Deployment's pods.
	// +optional
	// +listType=map
	// +listMapKey=topologyKey
	// +patchMergeKey=topologyKey
	// +patchStrategy=merge
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty" patchStrategy:"merge" patchMergeKey:"topologyKey"`

	// Metrics configures the controller-runtime metrics endpoint of the run
	// pods. Metrics are served on :8080/metrics unless configured otherwise.
	// +optional
	Metrics *MetricsConfiguration `json:"metrics,omitempty"`

	// AccessPolicy widens what the provider may request from the operator
	// (Marketplane extension). Unset means the defaults of docs/security.md.
	// +optional
	AccessPolicy *AccessPolicy `json:"accessPolicy,omitempty"`
}

// EnvVar is an environment variable of the provider's containers.
type EnvVar struct {
	// Name is the variable's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Value is the variable's value.
	// +optional
	Value string `json:"value,omitempty"`
}

// MetricsConfiguration configures the metrics endpoint of a provider's run
// pods. When enabled, the operator adds a container port, Prometheus scrape
// annotations and a ClusterIP Service.
type MetricsConfiguration struct {
	// Disabled turns the metrics endpoint off.
	// +optional
	// +kubebuilder:default=false
	Disabled bool `json:"disabled"`

	// Path is the HTTP path of the endpoint; /metrics when unset.
	// +optional
	// +kubebuilder:validation:Pattern=`^/`
	Path *string `json:"path,omitempty"`

	// Port is the container port of the endpoint; 8080 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`
}

// IsEnabled reports whether the metrics endpoint is on. A nil configuration
// means the default, which is on.
func (m *MetricsConfiguration) IsEnabled() bool {
	return m == nil || !m.Disabled
}

// MetricsPath returns the configured path or MetricsPathDefault.
func (m *MetricsConfiguration) MetricsPath() string {
	if m == nil || m.Path == nil {
		return MetricsPathDefault
	}
	return *m.Path
}

// MetricsPort returns the configured port or MetricsPortDefault.
func (m *MetricsConfiguration) MetricsPort() int32 {
	if m == nil || m.Port == nil {
		return MetricsPortDefault
	}
	return *m.Port
}

// DeploymentStatus is the observed state of a provider's deployment.
type DeploymentStatus struct {
	// Conditions are Initialized, Ready and, while the provider is deleted,
	// Uninstalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the metadata.generation the operator last
	// reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`

	// Phase summarises the conditions: Progressing, Ready or Uninstalling.
	// +optional
	Phase DeploymentPhase `json:"phase,omitempty"`

	// Metrics points at the Service that exposes the metrics endpoint, when
	// metrics are enabled.
	// +optional
	Metrics *MetricsStatus `json:"metrics,omitempty"`
}

// MetricsStatus reports where a provider's metrics can be scraped.
type MetricsStatus struct {
	// Service is the ClusterIP Service in front of the metrics endpoint.
	// +required
	Service MetricsService `json:"serviceRef"`
}

// MetricsService names the Service of a provider's metrics endpoint.
type MetricsService struct {
	// Name is the Service's name.
	// +required
	Name string `json:"name"`

	// Namespace is the Service's namespace, the operator's namespace.
	// +required
	Namespace string `json:"namespace"`
}
