package v2alpha1

import (
	"crypto/sha1" //nolint:gosec // RFC 4122 name-based UUIDs (version 5) are defined on SHA-1; no secrecy is involved.
	"crypto/sha3"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MCPNamespacePrefix starts the name of every platform namespace that holds the
// requests of a ManagedControlPlane.
const MCPNamespacePrefix = "mcp--"

// PlatformNamespace returns the platform namespace that holds the
// ClusterRequest and AccessRequests of the control plane obj (a
// ManagedControlPlane or a ControlPlane): the namespace recorded in its
// PlatformNamespaceAnnotation when the controller has set it, else
// StableMCPNamespace of its namespace and name.
//
// Every caller that needs an MCP's platform namespace uses this function, so
// that control planes created before openMCP's algorithm was adopted (which
// keep their legacy namespace, see LegacyMCPNamespace) are found where their
// requests are. Only a namespace name that starts with MCPNamespacePrefix is
// taken from the annotation: the annotation is writable by whoever can edit
// the object, and must not point a reader at an arbitrary namespace.
func PlatformNamespace(obj metav1.Object) string {
	if ns := obj.GetAnnotations()[PlatformNamespaceAnnotation]; IsPlatformNamespaceOf(ns, obj.GetNamespace(), obj.GetName()) {
		return ns
	}
	return StableMCPNamespace(obj.GetNamespace(), obj.GetName())
}

// IsPlatformNamespaceOf reports whether ns is one of the two platform
// namespaces the control plane name in namespace can use: the current one
// (StableMCPNamespace) or the one of earlier Marketplane versions
// (LegacyMCPNamespace).
func IsPlatformNamespaceOf(ns, namespace, name string) bool {
	return ns != "" && (ns == StableMCPNamespace(namespace, name) || ns == LegacyMCPNamespace(namespace, name))
}

// StableMCPNamespace returns the platform namespace that holds the
// ClusterRequest and AccessRequests of the control plane name in namespace,
// computed exactly as openMCP does (openmcp-operator/lib utils.StableMCPNamespace,
// which takes its arguments in the order name, namespace): "mcp--" followed by
// K8sNameUUID(namespace, name). Providers built on openMCP's libraries look
// for an MCP's ClusterRequest there. The same MCP always maps to the same
// namespace, and the result (41 characters, lower-case hex and dashes) is a
// valid namespace name whatever the input.
//
// Control planes created before this algorithm was adopted keep their
// namespace (LegacyMCPNamespace); use PlatformNamespace to find the namespace
// of an existing object.
func StableMCPNamespace(namespace, name string) string {
	return MCPNamespacePrefix + K8sNameUUID(namespace, name)
}

// K8sNameUUID is openMCP's name hash (controller-utils pkg/controller
// K8sNameUUID): the arguments joined with "/", hashed with SHAKE128 to 16
// bytes, with the version nibble set to 8 and the RFC 4122 variant bits set,
// in canonical lower-case UUID text form. openMCP returns an error when every
// argument is empty; here such input is hashed like any other, since
// Kubernetes object names are never empty.
func K8sNameUUID(names ...string) string {
	u := sha3.SumSHAKE128([]byte(strings.Join(names, "/")), 16)
	u[6] = (u[6] & 0x0f) | 0x80 // version 8
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return formatUUID(u)
}

// namespaceUUIDNamespace is the RFC 4122 name space from which the legacy
// platform namespace UUIDs were derived: the predefined URL name space
// (6ba7b811-9dad-11d1-80b4-00c04fd430c8). It is fixed forever, or legacy
// control planes would no longer be found.
var namespaceUUIDNamespace = [16]byte{
	0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1,
	0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
}

// LegacyMCPNamespace returns the platform namespace that Marketplane
// versions before openMCP's algorithm was adopted used for the control plane
// name in namespace: "mcp--" followed by the RFC 4122 version 5 (SHA-1,
// name-based) UUID of "<namespace>/<name>". Control planes whose
// ClusterRequest is already there keep using it (see
// PlatformNamespaceAnnotation).
func LegacyMCPNamespace(namespace, name string) string {
	return MCPNamespacePrefix + nameUUID(namespaceUUIDNamespace, namespace+"/"+name)
}

// nameUUID returns the version 5 UUID of name in the name space ns, in its
// canonical lower-case text form.
func nameUUID(ns [16]byte, name string) string {
	h := sha1.New() //nolint:gosec // see the import.
	h.Write(ns[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return formatUUID(u[:])
}

// formatUUID formats 16 bytes in the canonical 8-4-4-4-12 text form.
func formatUUID(u []byte) string {
	var b strings.Builder
	for i, part := range [][]byte{u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]} {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(hex.EncodeToString(part))
	}
	return b.String()
}

// HasMCPLabels reports whether labels tie an object to the control plane
// name in namespace (MCPNameLabel and MCPNamespaceLabel).
func HasMCPLabels(labels map[string]string, namespace, name string) bool {
	return labels[MCPNameLabel] == name && labels[MCPNamespaceLabel] == namespace
}

// MCPOfNamespace returns the ManagedControlPlane whose platform namespace ns
// is (its namespace and name on the onboarding cluster), and false when ns
// is none: the MCP controller labels the namespace with the MCP's name and
// namespace, and its name must be one of the names that MCP's namespace can
// have (IsPlatformNamespaceOf).
func MCPOfNamespace(ns *corev1.Namespace) (types.NamespacedName, bool) {
	mcp := types.NamespacedName{Namespace: ns.Labels[MCPNamespaceLabel], Name: ns.Labels[MCPNameLabel]}
	if mcp.Name == "" || mcp.Namespace == "" || !IsPlatformNamespaceOf(ns.Name, mcp.Namespace, mcp.Name) {
		return types.NamespacedName{}, false
	}
	return mcp, true
}
