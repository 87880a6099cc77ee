package scaffold

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/mod/module"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MarketplaneModule is the module path of Marketplane, which every
// scaffolded provider requires.
const MarketplaneModule = "github.com/marketplane/marketplane"

// DefaultGroupSuffix is appended to a --group without a dot: "velero"
// becomes "velero.services.openmcp.cloud", the convention of openMCP's
// provider template for ServiceProviderAPI groups.
const DefaultGroupSuffix = ".services.openmcp.cloud"

// Options say what to scaffold and where.
type Options struct {
	// Module is the Go module path of the new project, e.g.
	// github.com/acme/service-provider-velero.
	Module string
	// Kind is the ServiceProviderAPI kind, UpperCamelCase, e.g. Velero.
	Kind string
	// Group is the API group: a single DNS label gets DefaultGroupSuffix,
	// anything with a dot is used as it is.
	Group string
	// Name is the provider's name: the binary, cmd/<name>, and the name of
	// the ServiceProvider and ProviderConfig in the README's examples.
	// Default: the last element of Module (without a major version
	// suffix), lower-cased.
	Name string
	// WorkloadCluster makes the provider ask for a shared workload cluster
	// and keep a namespace there per object.
	WorkloadCluster bool
	// Dir is where the project is written (default: WorkDir).
	Dir string
	// MarketplanePath is the directory of a Marketplane checkout, written
	// into go.mod's replace directive (Marketplane is not published).
	// Default: the nearest directory at or above WorkDir whose go.mod is
	// MarketplaneModule's; when there is none, go.mod gets no replace and
	// the Project says how to add one.
	MarketplanePath string
	// WorkDir is the directory relative paths are resolved against
	// (default: the current directory).
	WorkDir string
	// InModule writes the project into an existing module instead of
	// making it one: no go.mod. Dir must lie inside that module, and
	// Module must be Dir's import path in it (as for providers/sample in
	// the Marketplane repository).
	InModule bool
}

var (
	kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// majorSuffix is the /vN element of a module path for major
	// versions 2 and up.
	majorSuffix = regexp.MustCompile(`^v[0-9]+$`)
)

// maxKindLength keeps every name derived from the kind within the
// Kubernetes limits: the DomainServiceAPI's plural (kind + "objects")
// must be a DNS label of at most 63 characters.
const maxKindLength = 50

// reservedKinds are names the generated API package already uses.
var reservedKinds = map[string]bool{
	"ProviderConfig": true, "ProviderConfigSpec": true, "ProviderConfigList": true,
	"GroupVersion": true, "SchemeBuilder": true, "AddToScheme": true,
}

// yamlKeywords are the words YAML reads as a boolean or null: a kind (or its
// lower-case singular) spelled like one would be quoted in the CRD, unlike
// what controller-gen's output looks like elsewhere.
var yamlKeywords = map[string]bool{
	"y": true, "yes": true, "n": true, "no": true, "true": true, "false": true,
	"on": true, "off": true, "null": true,
}

// validateModule checks a Go module path.
func validateModule(m string) error {
	if m == "" {
		return errors.New("--module is required: the Go module path of the new provider, e.g. github.com/acme/service-provider-velero")
	}
	if err := module.CheckPath(m); err != nil {
		return fmt.Errorf("--module %q is not a valid Go module path: %w", m, err)
	}
	if m == MarketplaneModule {
		return fmt.Errorf("--module %q: that is Marketplane's own module; choose the new provider's", m)
	}
	return nil
}

// validateKind checks a kind name.
func validateKind(k string) error {
	switch {
	case k == "":
		return errors.New("--kind is required: the ServiceProviderAPI kind in UpperCamelCase, e.g. Velero")
	case !kindPattern.MatchString(k):
		return fmt.Errorf("--kind %q: want a Kubernetes kind, which is also an exported Go identifier: an upper-case letter, then letters and digits (UpperCamelCase, e.g. Velero or FooService)", k)
	case len(k) > maxKindLength:
		return fmt.Errorf("--kind %q: at most %d characters, so that the names derived from it stay within Kubernetes' limits", k, maxKindLength)
	case reservedKinds[k] || yamlKeywords[strings.ToLower(k)]:
		return fmt.Errorf("--kind %q: that name is taken (by a type of the generated API package, or as a YAML keyword); choose another kind", k)
	case strings.HasSuffix(k, "List"):
		return fmt.Errorf("--kind %q: a kind ending in List would be confused with the list type of another kind", k)
	}
	return nil
}

// resolveGroup turns --group into the full API group and checks it.
func resolveGroup(g string) (string, error) {
	if g == "" {
		return "", errors.New("--group is required: a name such as velero (becoming velero" + DefaultGroupSuffix + ") or a full API group")
	}
	full := g
	if !strings.Contains(g, ".") {
		full = g + DefaultGroupSuffix
	}
	if msgs := validation.IsDNS1123Subdomain(full); len(msgs) > 0 {
		return "", fmt.Errorf("--group %q: the API group %q is not a DNS subdomain (lower-case letters, digits, '-' and '.'): %s", g, full, strings.Join(msgs, "; "))
	}
	for _, label := range strings.Split(full, ".") {
		if msgs := validation.IsDNS1123Label(label); len(msgs) > 0 {
			return "", fmt.Errorf("--group %q: %q in the API group %q is not a DNS label: %s", g, label, full, strings.Join(msgs, "; "))
		}
	}
	if strings.HasSuffix(full, ".k8s.io") || strings.HasSuffix(full, ".kubernetes.io") || full == "openmcp.cloud" {
		return "", fmt.Errorf("--group %q: the API group %q is reserved; use your own, e.g. %s", g, full, "velero"+DefaultGroupSuffix)
	}
	return full, nil
}

// resolveName returns the provider's name: the given one, or one derived
// from the module path.
func resolveName(name, mod string) (string, error) {
	if name != "" {
		if !namePattern.MatchString(name) || len(name) > validation.DNS1123LabelMaxLength {
			return "", fmt.Errorf("--name %q: want a DNS label (lower-case letters, digits and '-', at most %d characters)", name, validation.DNS1123LabelMaxLength)
		}
		return name, nil
	}
	elems := strings.Split(mod, "/")
	base := elems[len(elems)-1]
	if majorSuffix.MatchString(base) && len(elems) > 1 {
		base = elems[len(elems)-2]
	}
	derived := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, base), "-")
	if !namePattern.MatchString(derived) || len(derived) > validation.DNS1123LabelMaxLength {
		return "", fmt.Errorf("cannot derive a provider name from --module %q; give one with --name", mod)
	}
	return derived, nil
}

// plural is a simple English plural of a lower-case kind. It is written
// into the types as the CRD's resource name, so the CRD does not depend on
// how controller-gen would pluralise.
func plural(lower string) string {
	switch {
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"),
		strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return lower + "es"
	case strings.HasSuffix(lower, "y") && len(lower) > 1 && !strings.ContainsRune("aeiou", rune(lower[len(lower)-2])):
		return lower[:len(lower)-1] + "ies"
	}
	return lower + "s"
}

// absPath makes p absolute against base.
func absPath(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// importPathIn returns the import path of dir inside the module rooted at
// root with module path modPath.
func importPathIn(modPath, root, dir string) (string, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return modPath, nil
	}
	return path.Join(modPath, filepath.ToSlash(rel)), nil
}
