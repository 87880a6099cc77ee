package mcp

import (
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// TokenNameLabel names, on an AccessRequest on the platform cluster and on the
// kubeconfig Secret copied to the onboarding cluster, the entry of
// spec.iam.tokens the object was created for. With it the controller finds
// the objects of tokens that were removed from the spec.
const TokenNameLabel = corev2alpha1.GroupName + "/token-name"

// MaxNameLength is the longest ManagedControlPlane name the controller
// accepts. The name is stored in label values (MCPNameLabel), which
// Kubernetes limits to 63 characters.
const MaxNameLength = 63

// accessRequestName is the name of the AccessRequest for token of the
// ManagedControlPlane mcp, in the MCP's platform namespace. Token names
// cannot contain dots, so the name is unambiguous even for MCP names that do.
func accessRequestName(mcp, token string) string { return mcp + "." + token }

// kubeconfigSecretName is the name of the Secret, in the ManagedControlPlane's
// namespace on the onboarding cluster, that holds the kubeconfig of token.
func kubeconfigSecretName(mcp, token string) string { return mcp + "." + token + ".kubeconfig" }

// mcpLabels are the labels that tie an object to the ManagedControlPlane
// namespace/name.
func mcpLabels(namespace, name string) map[string]string {
	return map[string]string{
		corev2alpha1.MCPNameLabel:      name,
		corev2alpha1.MCPNamespaceLabel: namespace,
	}
}

// tokenLabels are mcpLabels plus the token the object was created for.
func tokenLabels(namespace, name, token string) map[string]string {
	l := mcpLabels(namespace, name)
	l[TokenNameLabel] = token
	return l
}
