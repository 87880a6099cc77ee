package sf

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespacePrefix starts the name of every instance's namespace on the
// onboarding cluster, as in Service Fabrik: sf-<instance>.
const NamespacePrefix = "sf-"

// maxPlainNameLength keeps sf-<name> within the 63 characters of a
// namespace name.
const maxPlainNameLength = validation.DNS1123LabelMaxLength - len(NamespacePrefix)

// ObjectName returns the Kubernetes name for an OSB id: the id itself when
// it is a DNS-1123 label of at most 60 characters (a lowercase GUID is), and
// otherwise the hex SHA-224 of the id (56 characters), as Service Fabrik
// does. The full id is kept in the object's spec, so a name collision is
// detected rather than served.
func ObjectName(id string) string {
	if len(id) <= maxPlainNameLength && isDNSLabel(id) {
		return id
	}
	sum := sha256.Sum224([]byte(id))
	return hex.EncodeToString(sum[:])
}

// isDNSLabel reports whether s is a DNS-1123 label (lowercase letters,
// digits and inner dashes), like validation.IsDNS1123Label without a
// regular expression: it runs on every request.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > validation.DNS1123LabelMaxLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// InstanceNamespace returns the namespace that holds an instance and its
// bindings: one namespace per instance, so tenants never share one.
func InstanceNamespace(instanceID string) string {
	return NamespacePrefix + ObjectName(instanceID)
}

// InstanceKey returns where the SFServiceInstance of instanceID is stored.
func InstanceKey(instanceID string) client.ObjectKey {
	return client.ObjectKey{Namespace: InstanceNamespace(instanceID), Name: ObjectName(instanceID)}
}

// BindingKey returns where the SFServiceBinding of bindingID is stored.
func BindingKey(instanceID, bindingID string) client.ObjectKey {
	return client.ObjectKey{Namespace: InstanceNamespace(instanceID), Name: ObjectName(bindingID)}
}
