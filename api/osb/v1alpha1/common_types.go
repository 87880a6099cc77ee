/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

// Source identifies one Kubernetes object that the provisioner created for an
// instance or binding, or that a sources template names. Service Fabrik
// stores a list of them in status.resources and deletes exactly those objects
// on deprovision.
type Source struct {
	// apiVersion is the group and version of the object, for example
	// "kubedb.com/v1alpha1".
	APIVersion string `json:"apiVersion"`

	// kind is the kind of the object.
	Kind string `json:"kind"`

	// name is the name of the object.
	Name string `json:"name"`

	// namespace is the namespace of the object; it is empty for a
	// cluster-scoped object.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}
