package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// ProviderConfigSpec is what platform operators configure.
type ProviderConfigSpec struct {
	// PollInterval is how often every Sample is checked for drift when
	// nothing changes, e.g. "30s" or "5m". Unset means the runtime's
	// default of one minute.
	// +optional
	PollInterval *common.Duration `json:"pollInterval,omitempty"`
	// Versions are the versions of the domain service tenants may choose
	// (Sample spec.version); the first is the default.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Versions []string `json:"versions"`
	// Workload, when set, makes the provider run the domain service's
	// server as a Deployment in the shared workload cluster, one per
	// Sample, and report the Sample Ready only once that Deployment is
	// Available. Unset means no Deployment: the Sample is Ready once its
	// DomainServiceAPI is served.
	// +optional
	Workload *Workload `json:"workload,omitempty"`
	// ImagePullSecrets name Secrets in the provider's namespace on the
	// platform cluster (of type kubernetes.io/dockerconfigjson or
	// kubernetes.io/dockercfg) that the server's pods need to pull
	// spec.workload.image, e.g. from a private registry of an air-gapped
	// landscape. The provider copies them next to the servers in the
	// workload cluster, keeps the copies up to date when a Secret is
	// rotated, and deletes them with the Sample. openMCP's field.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// Workload is the domain service's server that runs in the shared workload
// cluster for each Sample, as a Deployment.
type Workload struct {
	// Image is the container image of the server, e.g.
	// "registry.example.com/sample-server:v1.2.3".
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// Replicas is how many pods of the server run for each Sample.
	// Unset means one. At most 10: every tenant's Sample gets this many
	// pods on the shared workload cluster, so the setting multiplies.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// ProviderConfig configures the sample provider. There is one per
// provider: cluster-scoped, on the platform cluster, named like the
// provider's ServiceProvider.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:printcolumn:name="Poll Interval",type=string,JSONPath=`.spec.pollInterval`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProviderConfigSpec `json:"spec"`
}

// ProviderConfigList is a list of ProviderConfig.
//
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// PollInterval implements spruntime.Config. Unset (or a nil config) is zero,
// which means the runtime's default; so is an invalid value, which Validate
// reports.
func (c *ProviderConfig) PollInterval() time.Duration {
	if c == nil {
		return 0
	}
	d, _ := c.Spec.PollInterval.Parse()
	return d
}

// Validate implements spruntime.ConfigValidator. The API server refuses a
// pollInterval that is not a duration, but one stored before that rule
// existed still decodes (common.Duration keeps it verbatim): the runtime
// then gives every object the reason InvalidProviderConfig instead of
// failing to read the ProviderConfig.
func (c *ProviderConfig) Validate() error {
	if c == nil {
		return nil
	}
	return c.Spec.PollInterval.Validate("spec.pollInterval")
}
