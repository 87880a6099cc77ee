package clusteraccess

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Name parts of the requests a Manager creates. "--" separates the provider
// name from the rest, as in openMCP's cluster access library.
const (
	nameSeparator = "--"
	mcpPart       = "mcp-"
	workloadPart  = "workload"
	// maxProviderPart bounds the provider name in request names, so that
	// every name (and "<name>.kubeconfig", the Secret) stays valid.
	maxProviderPart = 63
)

// Values of the openmcp.cloud/managed-purpose label on the requests.
const (
	purposeMCP      = "mcp"
	purposeWorkload = "workload"
)

// MCPAccessRequestName returns the name of the AccessRequest, in the
// provider's namespace, through which provider reaches the MCP cluster of
// the service object namespace/name: "<provider>--mcp-" and 16 hex digits of
// the SHA-256 of "<namespace>/<name>". The same object always gets the same
// name and different objects different ones; the labels
// openmcp.cloud/onboarding-name and -namespace say which object it is for.
func MCPAccessRequestName(provider, namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return providerPart(provider) + nameSeparator + mcpPart + hex.EncodeToString(sum[:])[:16]
}

// WorkloadRequestName returns the name of the ClusterRequest and the
// AccessRequest of provider's shared workload cluster.
func WorkloadRequestName(provider string) string {
	return providerPart(provider) + nameSeparator + workloadPart
}

// RequestName returns the name of the ClusterRequest and AccessRequest that
// Manager.Request creates for name.
func RequestName(provider, name string) string {
	return providerPart(provider) + nameSeparator + name
}

// providerPart is the provider name, shortened with a hash when it is
// longer than maxProviderPart.
func providerPart(provider string) string {
	if len(provider) <= maxProviderPart {
		return provider
	}
	sum := sha256.Sum256([]byte(provider))
	h := hex.EncodeToString(sum[:])[:10]
	head := strings.TrimRight(provider[:maxProviderPart-len(h)-1], ".-")
	return head + "-" + h
}

// labelValue returns s if it is a valid label value, else a valid value
// derived from it (shortened with a hash).
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	head := s
	if len(head) > validation.LabelValueMaxLength-len(h)-1 {
		head = head[:validation.LabelValueMaxLength-len(h)-1]
	}
	head = strings.Trim(head, ".-_")
	if head == "" {
		return h
	}
	return head + "-" + h
}

// validateRequestName checks that name can be part of request names.
func validateRequestName(provider, name string) error {
	if name == "" {
		return fmt.Errorf("request name is empty")
	}
	full := RequestName(provider, name)
	if errs := validation.IsDNS1123Subdomain(full + ".kubeconfig"); len(errs) > 0 {
		return fmt.Errorf("request name %q gives the invalid object name %q: %s", name, full, strings.Join(errs, "; "))
	}
	return nil
}
