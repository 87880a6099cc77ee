// Package plain copies the plain values templates work on: maps of
// strings to values and slices of values, as JSON and YAML decode them.
// The renderer and its Helm workers both hand templates copies, so that a
// template that edits a value (set, unset) changes nothing of the caller's.
package plain

// Copy deep-copies the maps and slices of v; other values are returned as
// they are.
func Copy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = Copy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = Copy(e)
		}
		return s
	}
	return v
}
