package testenv

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// FieldDiffs reports every field of want that is missing from got or has a
// different value, as "path: want X, got Y" lines in path order. Fields that
// got has in addition (defaults, server-set metadata, status) are not
// differences: the question it answers is "was anything the user wrote lost
// or changed?". Numbers compare by value, so an int64 and a float64 holding
// the same number are equal.
func FieldDiffs(want, got map[string]any) []string {
	var diffs []string
	fieldDiffs("", want, got, &diffs)
	sort.Strings(diffs)
	return diffs
}

func fieldDiffs(path string, want, got any, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: want an object, got %s", orRoot(path), describe(got)))
			return
		}
		for k, wv := range w {
			gv, present := g[k]
			p := joinPath(path, k)
			if !present {
				if wv == nil {
					// A null the user wrote is the same as leaving the field out.
					continue
				}
				*diffs = append(*diffs, fmt.Sprintf("%s: missing (want %s)", p, describe(wv)))
				continue
			}
			fieldDiffs(p, wv, gv, diffs)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %s, got %s", orRoot(path), describe(want), describe(got)))
			return
		}
		for i := range w {
			fieldDiffs(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], diffs)
		}
	default:
		if !scalarEqual(want, got) {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %s, got %s", orRoot(path), describe(want), describe(got)))
		}
	}
}

func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return fmt.Sprintf("a list of %d", len(v))
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprintf("%v", v)
	}
}

func joinPath(path, key string) string {
	if strings.ContainsAny(key, "./") {
		key = "[" + key + "]"
		return path + key
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}
