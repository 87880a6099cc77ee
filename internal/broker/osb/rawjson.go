package osb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// maxJSONDepth bounds the nesting of free-form objects (parameters, context,
// bind_resource). Deeper documents are refused with 400 rather than stored.
const maxJSONDepth = 64

// ObjectField checks a free-form field of a request: absent or null gives
// nil; otherwise it must be a JSON object nested at most maxJSONDepth deep.
// The result is compact JSON.
func ObjectField(raw json.RawMessage, field string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	if trimmed[0] != '{' {
		return nil, BadRequest("%s must be a JSON object.", field)
	}
	if depth(trimmed) > maxJSONDepth {
		return nil, BadRequest("%s is nested more than %d levels deep.", field, maxJSONDepth)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, BadRequest("%s is not valid JSON.", field)
	}
	return buf.Bytes(), nil
}

// MaintenanceField checks the maintenance_info of a provision or update
// request. Absent, null and an empty object give nil: the OSB checker's
// generated Go client sends {} on every PUT and PATCH, and an object with
// nothing in it asks for nothing. Any other object must carry a version.
func MaintenanceField(raw json.RawMessage) (*MaintenanceInfo, error) {
	obj, err := ObjectField(raw, "maintenance_info")
	if err != nil || obj == nil || bytes.Equal(obj, []byte("{}")) {
		return nil, err
	}
	mi := &MaintenanceInfo{}
	if err := json.Unmarshal(obj, mi); err != nil {
		return nil, BadRequest("maintenance_info.version and maintenance_info.description must be strings.")
	}
	if mi.Version == "" {
		return nil, BadRequest("maintenance_info.version is required when maintenance_info is sent.")
	}
	return mi, nil
}

// depth returns the deepest nesting of objects and arrays in a JSON
// document, not counting brackets inside strings.
func depth(doc []byte) int {
	d, maxD, inString, escaped := 0, 0, false, false
	for _, c := range doc {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			if d > maxD {
				maxD = d
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return maxD
}

// SameObject reports whether two free-form objects are equal as JSON
// values. Absent, null and {} are the same: no parameters.
func SameObject(a, b []byte) bool {
	va, okA := decodeAny(a)
	vb, okB := decodeAny(b)
	if !okA || !okB {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return reflect.DeepEqual(va, vb)
}

func decodeAny(raw []byte) (any, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{}, true
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false
	}
	if v == nil {
		return map[string]any{}, true
	}
	return v, true
}

// DecodeNumbers decodes like decodeAny but keeps numbers as written, so
// that a merge does not round large integers.
func DecodeNumbers(raw []byte) (any, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{}, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if v == nil {
		return map[string]any{}, true
	}
	return v, true
}

// WithoutNulls returns the parameters of an update without the keys whose
// value is null: in a merge patch they remove a parameter and are not a
// value the schema could describe.
func WithoutNulls(raw []byte) []byte {
	v, ok := DecodeNumbers(raw)
	if !ok {
		return raw
	}
	out, err := json.Marshal(dropNulls(v))
	if err != nil {
		return raw
	}
	return out
}

func dropNulls(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		if x != nil {
			out[k] = dropNulls(x)
		}
	}
	return out
}

// MergePatch applies patch to base as a JSON merge patch (RFC 7386): keys
// of patch replace those of base, objects merge recursively, null removes
// a key. Both are JSON objects or empty.
func MergePatch(base, patch []byte) (json.RawMessage, error) {
	b, ok := DecodeNumbers(base)
	if !ok {
		return nil, fmt.Errorf("stored parameters are not JSON")
	}
	p, ok := DecodeNumbers(patch)
	if !ok {
		return nil, fmt.Errorf("parameters are not JSON")
	}
	out, err := json.Marshal(merge(b, p))
	if err != nil {
		return nil, fmt.Errorf("encode merged parameters: %w", err)
	}
	return out, nil
}

func merge(base, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	bm, ok := base.(map[string]any)
	if !ok {
		bm = map[string]any{}
	}
	out := make(map[string]any, len(bm)+len(pm))
	for k, v := range bm {
		out[k] = v
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = merge(out[k], v)
	}
	return out
}

// contextPlatform returns context.platform, or "" when it is absent or not
// a string.
func contextPlatform(ctx json.RawMessage) string {
	if len(ctx) == 0 {
		return ""
	}
	var c struct {
		Platform any `json:"platform"`
	}
	if err := json.Unmarshal(ctx, &c); err != nil {
		return ""
	}
	s, _ := c.Platform.(string)
	return s
}
