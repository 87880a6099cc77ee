package common

import "k8s.io/apimachinery/pkg/types"

// ObjectReference names an object in any namespace.
type ObjectReference struct {
	// Name is the name of the referenced object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Namespace is the namespace of the referenced object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
}

// NamespacedName returns the reference as a key for client calls.
func (r ObjectReference) NamespacedName() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
}

// LocalObjectReference names an object in the namespace of the object that
// holds the reference, or a cluster-scoped object when the holder is
// cluster-scoped.
type LocalObjectReference struct {
	// Name is the name of the referenced object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// NamespacedName returns the reference as a key for client calls. The
// namespace is not part of a local reference, so the caller supplies the
// holder's namespace (empty for a cluster-scoped object).
func (r LocalObjectReference) NamespacedName(namespace string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: r.Name}
}
