package sf

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
)

// rawExtension wraps JSON for a spec field; nil stays nil.
func rawExtension(raw json.RawMessage) *runtime.RawExtension {
	if raw == nil {
		return nil
	}
	return &runtime.RawExtension{Raw: append([]byte(nil), raw...)}
}

// rawBytes returns the JSON of a spec field, nil when unset.
func rawBytes(r *runtime.RawExtension) json.RawMessage {
	if r == nil || len(r.Raw) == 0 {
		return nil
	}
	return r.Raw
}
