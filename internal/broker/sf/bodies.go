package sf

import (
	"github.com/marketplane/marketplane/internal/broker/osb"
)

// Bodies of OSB v2.17 that only the Service Fabrik backend reads or
// writes; the shared ones are in package osb.

// bindResource is the part of bind_resource the broker reads.
type bindResource struct {
	AppGUID string `json:"app_guid"`
	Route   string `json:"route"`
}

// bindingFields are the fields of a bind response (201/200 and fetch) that
// the broker passes on from the provisioner's response Secret. Anything else
// in the Secret is not sent.
var bindingFields = []string{"credentials", "syslog_drain_url", "route_service_url", "volume_mounts", "endpoints", "metadata"}

// bindingFieldSince names the bind response fields that later versions
// added: a caller of an older version does not get them. Clients decode
// them by what their version says, if at all (service-catalog's client
// decodes endpoints' ports as numbers, which 2.15 made strings).
var bindingFieldSince = map[string]osb.APIVersion{"endpoints": osb.Version2_15, "metadata": osb.Version2_16}
