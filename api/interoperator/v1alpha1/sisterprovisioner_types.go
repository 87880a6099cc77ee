/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

// DefaultSisterProvisionerNamespace is the namespace on a sister cluster
// that holds the provisioner the inter-operator installs there, when
// spec.sisterProvisioner names none.
const DefaultSisterProvisionerNamespace = "marketplane-sister"

// SisterProvisioner makes the inter-operator install, on every SFCluster of
// its catalog namespace in provisioning mode replicate (a sister), the
// inter-operator that provisions the replicas there: Service Fabrik's
// MultiClusterDeployer Provisioner Controller (docs/multicluster.md,
// "Provisioner on sisters"). Without it, sisters get no provisioner and
// one must be installed by hand.
type SisterProvisioner struct {
	// image is the inter-operator image the sisters run (its entrypoint is
	// the marketplane-interoperator binary).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// imagePullSecrets name Secrets in the catalog namespace of the
	// platform cluster that are copied to each sister and used to pull the
	// image there.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`

	// replicas of the sister's provisioner (default 1); with more than
	// one they elect a leader.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	Replicas *int32 `json:"replicas,omitempty"`

	// namespace on the sister that holds the provisioner, its
	// ServiceAccount and pull Secrets (default marketplane-sister).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// SisterNamespace returns spec.sisterProvisioner.namespace, or
// DefaultSisterProvisionerNamespace. It is safe on a nil receiver.
func (s *SisterProvisioner) SisterNamespace() string {
	if s == nil || s.Namespace == "" {
		return DefaultSisterProvisionerNamespace
	}
	return s.Namespace
}
