package v2alpha1

import (
	"crypto/sha1" //nolint:gosec // RFC 4122 name-based UUIDs (version 5) are defined on SHA-1; no secrecy is involved.
	"encoding/hex"
	"strings"
)

// MCPNamespacePrefix starts the name of every platform namespace that holds the
// requests of a ManagedControlPlane.
const MCPNamespacePrefix = "mcp--"

// namespaceUUIDNamespace is the RFC 4122 name space from which the platform
// namespace UUIDs are derived: the predefined URL name space
// (6ba7b811-9dad-11d1-80b4-00c04fd430c8). Changing it would move every
// existing ManagedControlPlane to a new namespace, so it is fixed forever.
var namespaceUUIDNamespace = [16]byte{
	0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1,
	0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
}

// StableMCPNamespace returns the platform namespace that holds the
// ClusterRequest and AccessRequests of the ManagedControlPlane name in
// namespace: "mcp--" followed by the RFC 4122 version 5 (SHA-1, name-based)
// UUID of "<namespace>/<name>". The same MCP always maps to the same
// namespace, different MCPs to different ones, and the result (41
// characters, lower-case hex and dashes) is a valid namespace name whatever
// the input.
func StableMCPNamespace(namespace, name string) string {
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
	var b strings.Builder
	for i, part := range [][]byte{u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]} {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(hex.EncodeToString(part))
	}
	return b.String()
}
