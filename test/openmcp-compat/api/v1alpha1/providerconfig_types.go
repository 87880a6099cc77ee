package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderConfigSpec is the platform operator's configuration of the
// provider.
type ProviderConfigSpec struct {
	// PollInterval is how often every Echo is reconciled again to correct
	// drift (default one minute).
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
}

// ProviderConfig configures the provider; the one named like the provider
// applies.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProviderConfigSpec `json:"spec,omitempty"`
}

// ProviderConfigList is a list of ProviderConfig.
//
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// PollInterval implements the runtime's Config.
func (c *ProviderConfig) PollInterval() time.Duration {
	if c.Spec.PollInterval == nil || c.Spec.PollInterval.Duration <= 0 {
		return time.Minute
	}
	return c.Spec.PollInterval.Duration
}
