package providerrequests

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/marketplane/marketplane/pkg/names"
)

// Prefixes of the names the operator derives from a provider's name, by
// the provider's kind.
const (
	// PrefixServiceProvider is the prefix for a ServiceProvider.
	PrefixServiceProvider = "sp"
	// PrefixClusterProvider is the prefix for a ClusterProvider.
	PrefixClusterProvider = "cp"
	// PrefixPlatformService is the prefix for a PlatformService.
	PrefixPlatformService = "ps"
)

// prefixes maps the provider kinds to their prefixes.
var prefixes = map[string]string{
	"ServiceProvider": PrefixServiceProvider,
	"ClusterProvider": PrefixClusterProvider,
	"PlatformService": PrefixPlatformService,
}

// Namespace returns the namespace the operator creates for the provider of
// kind (ServiceProvider, ClusterProvider or PlatformService) called name,
// <prefix>-<name> as a DNS label; ok is false for another kind.
func Namespace(kind, name string) (namespace string, ok bool) {
	prefix, ok := prefixes[kind]
	if !ok {
		return "", false
	}
	return DNSLabel(prefix + "-" + name), true
}

// DNSLabel turns s into a DNS-1035 label (what Namespaces and Services
// need; Jobs and Deployments are kept as short, because their names end up
// in pod labels and host names). Provider names are DNS subdomains and may
// contain dots, which a label may not: they become dashes, and the name
// then gets a hash of s so that "a.b" and "a-b" stay apart.
func DNSLabel(s string) string {
	if len(validation.IsDNS1035Label(s)) == 0 {
		return s
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	return names.WithHash(clean, s, validation.DNS1035LabelMaxLength)
}
