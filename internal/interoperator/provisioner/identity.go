package provisioner

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/render"
)

// VarInstanceID is the name of the template variable that holds the
// instance's id on target clusters (InstanceID). Plans name what they
// create after it: sf-{{ .instanceId }}.
const VarInstanceID = "instanceId"

// BrokerNamespacePrefix starts the onboarding namespace of every instance
// the broker creates: sf-<name> (internal/broker NamespacePrefix, as in
// Service Fabrik).
const BrokerNamespacePrefix = "sf-"

// Parts of the id of an instance the broker did not create.
const (
	// idNameLength bounds the part of the instance name in the id, so that
	// sf-<id> is a valid namespace name (63 characters).
	idNameLength = 43
	// idHashLength is how many hex digits of the SHA-256 of
	// "<namespace>/<name>" follow it: 64 bits, which nobody can match by
	// trying names.
	idHashLength = 16
)

// InstanceID returns the id of the instance namespace/name on target
// clusters, which plans name their namespaces and objects after
// (.instanceId). For an instance the broker created, in its namespace
// sf-<name>, it is the name: the OSB instance id (or its hash), unique
// across the platform, so Service Fabrik's convention sf-<instance id>
// names the same namespaces as before. Any other instance, created by a
// tenant in a namespace of its own, gets its name (at most 43 characters,
// dots made dashes) and 16 hex digits of the SHA-256 of "<namespace>/<name>":
// two tenants who both call an instance "db" get two ids. The id is a DNS
// label of at most 60 characters, so sf-<id> is a valid namespace name.
//
// Names are not what the render policy trusts: objects carry the
// instance's UID (apply.LabelInstanceUID), and an object labelled for
// another instance is never taken over, even where two ids collide.
func InstanceID(namespace, name string) string {
	if namespace == BrokerNamespacePrefix+name {
		return name
	}
	base := strings.ReplaceAll(name, ".", "-")
	if len(base) > idNameLength {
		base = base[:idNameLength]
	}
	base = strings.TrimRight(base, "-")
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return base + "-" + hex.EncodeToString(sum[:])[:idHashLength]
}

// idOf returns the id inst goes by on target clusters (.instanceId): the
// one its first provision recorded in status.instanceId; for an instance an
// earlier version provisioned (status.appliedSpec set, no id recorded) its
// name, after which that version's templates named what they created, so
// that an upgrade moves no instance to new namespaces; else InstanceID.
// Only the inter-operator writes status, so a tenant cannot choose it.
func idOf(inst *osbv1alpha1.SFServiceInstance) string {
	switch {
	case inst.Status.InstanceID != "":
		return inst.Status.InstanceID
	case inst.Status.AppliedSpec != nil:
		return inst.Name
	}
	return InstanceID(inst.Namespace, inst.Name)
}

// ownerOf returns the owner of the objects an operation renders with vals:
// the instance (.instance) and, for bind and unbind, the binding
// (.binding), as the variables were built, before any source could
// replace them.
func ownerOf(vals map[string]any) apply.Owner {
	var o apply.Owner
	if inst, ok := vals[render.VarInstance].(map[string]any); ok {
		ns, _, _ := unstructured.NestedString(inst, "metadata", "namespace")
		name, _, _ := unstructured.NestedString(inst, "metadata", "name")
		o.InstanceUID, _, _ = unstructured.NestedString(inst, "metadata", "uid")
		o.InstanceID = InstanceID(ns, name)
		if id, ok := vals[VarInstanceID].(string); ok && id != "" {
			o.InstanceID = id
		}
		o.LegacyInstanceID = labelValue(name)
		o.Recorded = append(o.Recorded, recorded(inst)...)
	}
	if b, ok := vals[render.VarBinding].(map[string]any); ok {
		name, _, _ := unstructured.NestedString(b, "metadata", "name")
		o.BindingUID, _, _ = unstructured.NestedString(b, "metadata", "uid")
		o.BindingID = labelValue(name)
		o.LegacyBindingID = o.BindingID
		o.Recorded = append(o.Recorded, recorded(b)...)
	}
	return o
}

// recorded returns the status.resources of an instance or binding
// variable.
func recorded(obj map[string]any) []osbv1alpha1.Source {
	list, _, _ := unstructured.NestedSlice(obj, "status", "resources")
	out := make([]osbv1alpha1.Source, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		var r osbv1alpha1.Source
		r.APIVersion, _, _ = unstructured.NestedString(m, "apiVersion")
		r.Kind, _, _ = unstructured.NestedString(m, "kind")
		r.Name, _, _ = unstructured.NestedString(m, "name")
		r.Namespace, _, _ = unstructured.NestedString(m, "namespace")
		out = append(out, r)
	}
	return out
}

// instanceOwner is the owner of what deprovision deletes: the instance, by
// UID.
func instanceOwner(inst *osbv1alpha1.SFServiceInstance) apply.Owner {
	return apply.Owner{InstanceUID: string(inst.UID)}
}

// bindingOwner is the owner of what unbind deletes: the binding, and its
// instance when it still exists.
func bindingOwner(b *osbv1alpha1.SFServiceBinding, inst *osbv1alpha1.SFServiceInstance) apply.Owner {
	o := apply.Owner{BindingUID: string(b.UID)}
	if inst != nil {
		o.InstanceUID = string(inst.UID)
	}
	return o
}
