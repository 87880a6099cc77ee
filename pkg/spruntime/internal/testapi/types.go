package testapi

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// GroupVersion is the group and version of the test API.
var GroupVersion = schema.GroupVersion{Group: "test.services.openmcp.cloud", Version: "v1alpha1"}

// AddToScheme registers the test API types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &TestService{}, &TestServiceList{}, &ProviderConfig{}, &ProviderConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// TestServiceSpec is what a tenant asks for.
type TestServiceSpec struct {
	// Value is copied into the managed ConfigMap. The value "invalid" is
	// rejected as invalid user input.
	// +optional
	Value string `json:"value,omitempty"`
}

// TestServiceStatus holds the common status fields of a ServiceProviderAPI.
type TestServiceStatus struct {
	// Conditions of the object.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the state.
	// +optional
	Phase string `json:"phase,omitempty"`
}

// TestService is the ServiceProviderAPI of the test provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
type TestService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TestServiceSpec   `json:"spec,omitempty"`
	Status TestServiceStatus `json:"status,omitempty"`
}

// TestServiceList is a list of TestService.
//
// +kubebuilder:object:root=true
type TestServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TestService `json:"items"`
}

var _ spruntime.API = &TestService{}

// GetConditions implements spruntime.API.
func (s *TestService) GetConditions() *[]metav1.Condition { return &s.Status.Conditions }

// GetPhase implements spruntime.API.
func (s *TestService) GetPhase() spruntime.Phase { return spruntime.Phase(s.Status.Phase) }

// SetPhase implements spruntime.API.
func (s *TestService) SetPhase(p spruntime.Phase) { s.Status.Phase = string(p) }

// SetObservedGeneration implements spruntime.API.
func (s *TestService) SetObservedGeneration(g int64) { s.Status.ObservedGeneration = g }

// ProviderConfigSpec configures the test provider.
type ProviderConfigSpec struct {
	// PollInterval is how often objects are reconciled; unset means the
	// runtime's default.
	// +optional
	PollInterval *common.Duration `json:"pollInterval,omitempty"`
	// Greeting is copied into every managed ConfigMap.
	// +optional
	Greeting string `json:"greeting,omitempty"`
	// SecretName names a Secret in the provider's namespace on the
	// platform cluster; the names of its keys (never the values) are
	// copied into every managed ConfigMap.
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// ProviderConfig configures the test provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
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

var _ spruntime.Config = &ProviderConfig{}

// PollInterval implements spruntime.Config. It is safe on a nil receiver and
// an unset field, which openMCP's template was not; an invalid value is zero
// (Validate reports it).
func (c *ProviderConfig) PollInterval() time.Duration {
	if c == nil {
		return 0
	}
	d, _ := c.Spec.PollInterval.Parse()
	return d
}

var _ spruntime.ConfigValidator = &ProviderConfig{}

// Validate implements spruntime.ConfigValidator: a pollInterval stored
// before the API server's rule existed must not be used.
func (c *ProviderConfig) Validate() error {
	if c == nil {
		return nil
	}
	return c.Spec.PollInterval.Validate("spec.pollInterval")
}
