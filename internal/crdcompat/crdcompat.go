// Package crdcompat decides whether a CustomResourceDefinition can replace
// the one a previous release installed without losing or refusing what that
// release wrote. The API server keeps objects in the storage version they
// were written in and prunes, on every read and write, the fields the
// current schema does not know; so a release that stops serving a stored
// version, drops a field, changes a field's type, narrows an enum or starts
// requiring a field makes old objects unreadable, loses their data, or makes
// the next update of them fail. Compare lists each of these.
package crdcompat

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Compare returns the incompatibilities of next with prev, the same CRD of
// the previous release, one sentence each, sorted; none when next can
// replace prev in place.
func Compare(prev, next *apiextensionsv1.CustomResourceDefinition) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	compareNames(prev, next, add)
	compareStorage(prev, next, add)
	for i := range prev.Spec.Versions {
		if pv := &prev.Spec.Versions[i]; pv.Served {
			compareVersion(pv, version(next, pv.Name), &problems)
		}
	}
	sort.Strings(problems)
	return problems
}

// compareNames reports a changed name, scope, kind or plural.
func compareNames(prev, next *apiextensionsv1.CustomResourceDefinition, add func(string, ...any)) {
	if prev.Name != next.Name {
		add("name changed from %s to %s", prev.Name, next.Name)
	}
	if prev.Spec.Scope != next.Spec.Scope {
		add("scope changed from %s to %s", prev.Spec.Scope, next.Spec.Scope)
	}
	if prev.Spec.Names.Kind != next.Spec.Names.Kind || prev.Spec.Names.Plural != next.Spec.Names.Plural {
		add("names changed from %s/%s to %s/%s", prev.Spec.Names.Kind, prev.Spec.Names.Plural, next.Spec.Names.Kind, next.Spec.Names.Plural)
	}
}

// compareStorage reports a storage version that moved so that the objects
// prev stored can no longer be read.
func compareStorage(prev, next *apiextensionsv1.CustomResourceDefinition, add func(string, ...any)) {
	s := storageVersion(prev)
	if s == "" || storageVersion(next) == s {
		return
	}
	if v := version(next, s); v == nil || !v.Served {
		add("version %s stored objects of the previous release and is neither the storage version nor served", s)
	} else if next.Spec.Conversion == nil || next.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		add("the storage version moved from %s to %s without a conversion webhook", s, storageVersion(next))
	}
}

// compareVersion compares pv, a version prev serves, with the version of
// the same name in next (nil when next lacks it).
func compareVersion(pv, nv *apiextensionsv1.CustomResourceDefinitionVersion, problems *[]string) {
	add := func(format string, args ...any) { *problems = append(*problems, fmt.Sprintf(format, args...)) }
	if nv == nil || !nv.Served {
		add("version %s is no longer served", pv.Name)
		return
	}
	if pv.Schema == nil || pv.Schema.OpenAPIV3Schema == nil {
		return
	}
	if nv.Schema == nil || nv.Schema.OpenAPIV3Schema == nil {
		add("version %s lost its schema", pv.Name)
		return
	}
	compareSchema(pv.Name, "", pv.Schema.OpenAPIV3Schema, nv.Schema.OpenAPIV3Schema, problems)
	if hasStatus(pv) && !hasStatus(nv) {
		add("version %s lost its status subresource", pv.Name)
	}
}

// compareSchema walks prev's schema and reports where next would prune,
// refuse or reinterpret a value prev accepted.
func compareSchema(ver, path string, prev, next *apiextensionsv1.JSONSchemaProps, problems *[]string) {
	at := ver + " " + orRoot(path)
	add := func(format string, args ...any) { *problems = append(*problems, at+": "+fmt.Sprintf(format, args...)) }
	if prev.Type != next.Type && prev.Type != "" {
		add("type changed from %q to %q", prev.Type, next.Type)
		return
	}
	if !preserves(prev) && preserves(next) {
		return // next keeps whatever is there
	}
	if preserves(prev) && !preserves(next) {
		add("unknown fields were kept and would now be pruned")
	}
	compareEnum(prev, next, add)
	compareRequired(prev, next, add)
	for name, pp := range prev.Properties {
		np, ok := next.Properties[name]
		if !ok {
			if next.AdditionalProperties == nil || !next.AdditionalProperties.Allows {
				add("field %q was removed (its values would be pruned)", name)
			}
			continue
		}
		compareSchema(ver, path+"."+name, &pp, &np, problems)
	}
	if prev.Items != nil && prev.Items.Schema != nil {
		if next.Items == nil || next.Items.Schema == nil {
			add("the schema of its items was removed")
		} else {
			compareSchema(ver, path+"[]", prev.Items.Schema, next.Items.Schema, problems)
		}
	}
	if prev.AdditionalProperties != nil && prev.AdditionalProperties.Schema != nil {
		if next.AdditionalProperties == nil || next.AdditionalProperties.Schema == nil {
			add("the schema of its map values was removed")
		} else {
			compareSchema(ver, path+"{}", prev.AdditionalProperties.Schema, next.AdditionalProperties.Schema, problems)
		}
	}
}

// compareEnum reports an enum where there was none and enum values next
// dropped.
func compareEnum(prev, next *apiextensionsv1.JSONSchemaProps, add func(string, ...any)) {
	if len(next.Enum) == 0 {
		return
	}
	if len(prev.Enum) == 0 {
		add("now limited to an enum")
		return
	}
	for _, v := range prev.Enum {
		if !slices.ContainsFunc(next.Enum, func(n apiextensionsv1.JSON) bool { return bytes.Equal(n.Raw, v.Raw) }) {
			add("enum value %s was dropped", v.Raw)
		}
	}
}

// compareRequired reports fields next requires that prev did not and
// that have no default.
func compareRequired(prev, next *apiextensionsv1.JSONSchemaProps, add func(string, ...any)) {
	for _, r := range next.Required {
		if slices.Contains(prev.Required, r) {
			continue
		}
		if p, ok := next.Properties[r]; ok && p.Default != nil {
			continue
		}
		add("field %q is newly required", r)
	}
}

func preserves(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

func hasStatus(v *apiextensionsv1.CustomResourceDefinitionVersion) bool {
	return v.Subresources != nil && v.Subresources.Status != nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func version(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return strings.TrimPrefix(path, ".")
}

// CompareAll compares every CRD of prev with the CRD of the same name in
// next. A CRD of prev that next lacks is a problem: its objects would no
// longer be served. CRDs new in next are fine.
func CompareAll(prev, next []*apiextensionsv1.CustomResourceDefinition) []string {
	byName := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(next))
	for _, c := range next {
		byName[c.Name] = c
	}
	var problems []string
	for _, p := range prev {
		n, ok := byName[p.Name]
		if !ok {
			problems = append(problems, p.Name+": removed")
			continue
		}
		for _, problem := range Compare(p, n) {
			problems = append(problems, p.Name+": "+problem)
		}
	}
	return problems
}
