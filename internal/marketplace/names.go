package marketplace

import (
	"k8s.io/apimachinery/pkg/util/validation"

	shortnames "github.com/marketplane/marketplane/pkg/names"
)

// maxNameLength is the longest Offering name: names are kept to a DNS
// label's length so that they stay readable in kubectl's columns and fit a
// label value.
const maxNameLength = validation.DNS1123LabelMaxLength

// serviceProviderOfferingName is the name of the Offering of the
// ServiceProvider called name: sp-<name>.
func serviceProviderOfferingName(name string) string {
	return shortnames.Shorten("sp-"+name, maxNameLength)
}

// sfServiceOfferingName is the name of the Offering of the SFService
// namespace/name: sf-<namespace>-<name>.
func sfServiceOfferingName(namespace, name string) string {
	return shortnames.Shorten("sf-"+namespace+"-"+name, maxNameLength)
}

// labelValue is s as a label value, shortened with a hash when too long.
func labelValue(s string) string {
	return shortnames.Shorten(s, validation.LabelValueMaxLength)
}
