package mcp

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// object is a control plane of either kind the controller serves: a
// core.openmcp.cloud ManagedControlPlane or a core.open-control-plane.io
// ControlPlane. Both have the same spec and status types, so the whole
// controller works on this one representation and the kinds differ only in
// how they are fetched, patched and owned.
type object interface {
	client.Object
	ControlPlaneSpec() *corev2alpha1.ManagedControlPlaneSpec
	ControlPlaneStatus() *corev2alpha1.ManagedControlPlaneStatus
}

var (
	_ object = &corev2alpha1.ManagedControlPlane{}
	_ object = &controlplanev2alpha1.ControlPlane{}
)

// Kind names of the control-plane kinds, as recorded in MCPKindLabel.
const (
	// KindManagedControlPlane is core.openmcp.cloud/v2alpha1
	// ManagedControlPlane.
	KindManagedControlPlane = "ManagedControlPlane"
	// KindControlPlane is core.open-control-plane.io/v2alpha1 ControlPlane.
	KindControlPlane = "ControlPlane"
)

// kind describes one control-plane kind.
type kind struct {
	// name is the kind's name (KindManagedControlPlane or KindControlPlane).
	name string
	// new returns an empty object of the kind.
	new func() object
}

// kinds are the control-plane kinds the controller serves, in the order
// their controllers are registered.
var kinds = []kind{
	{name: KindManagedControlPlane, new: func() object { return &corev2alpha1.ManagedControlPlane{} }},
	{name: KindControlPlane, new: func() object { return &controlplanev2alpha1.ControlPlane{} }},
}

// kindOf returns the kind name of m.
func kindOf(m object) string {
	if _, ok := m.(*controlplanev2alpha1.ControlPlane); ok {
		return KindControlPlane
	}
	return KindManagedControlPlane
}

// copyOf returns a deep copy of m.
func copyOf(m object) object {
	return m.DeepCopyObject().(object) //nolint:forcetypeassert // DeepCopyObject of an object is the same type.
}

// ref names m with its kind, namespace and name, for messages.
func ref(m object) string {
	return kindOf(m) + " " + m.GetNamespace() + "/" + m.GetName()
}
