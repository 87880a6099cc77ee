package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PlatformServiceSpec is the desired deployment of a platform service.
type PlatformServiceSpec struct {
	DeploymentSpec `json:",inline"`

	// Tracing configures OpenTelemetry auto-instrumentation of the platform
	// service's Go binary.
	// +optional
	Tracing *TracingConfiguration `json:"tracing,omitempty"`
}

// TracingConfiguration configures OpenTelemetry auto-instrumentation.
type TracingConfiguration struct {
	// Enabled turns the instrumentation on or off.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// ExecPath is the absolute path of the Go binary inside the image;
	// /platform-service-<name> when unset.
	// +optional
	// +kubebuilder:validation:Pattern=`^/`
	ExecPath string `json:"execPath,omitempty"`
}

// IsEnabled reports whether tracing is on. A nil configuration or an unset
// Enabled means on.
func (c *TracingConfiguration) IsEnabled() bool {
	return c == nil || c.Enabled == nil || *c.Enabled
}

// PlatformServiceStatus is the observed state of a platform service.
type PlatformServiceStatus struct {
	DeploymentStatus `json:",inline"`
}

// PlatformService deploys a controller that is part of the platform itself,
// such as the ManagedControlPlane controller, rather than a service offered
// to tenants.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ps,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=".spec.image"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.runReplicas",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type PlatformService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired deployment.
	// +required
	Spec PlatformServiceSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status PlatformServiceStatus `json:"status,omitempty"`
}

// PlatformServiceList is a list of PlatformServices.
//
// +kubebuilder:object:root=true
type PlatformServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the PlatformServices.
	Items []PlatformService `json:"items"`
}
