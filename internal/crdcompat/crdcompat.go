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
	if prev.Name != next.Name {
		add("name changed from %s to %s", prev.Name, next.Name)
	}
	if prev.Spec.Scope != next.Spec.Scope {
		add("scope changed from %s to %s", prev.Spec.Scope, next.Spec.Scope)
	}
	if prev.Spec.Names.Kind != next.Spec.Names.Kind || prev.Spec.Names.Plural != next.Spec.Names.Plural {
		add("names changed from %s/%s to %s/%s", prev.Spec.Names.Kind, prev.Spec.Names.Plural, next.Spec.Names.Kind, next.Spec.Names.Plural)
	}
	if s := storageVersion(prev); s != "" && storageVersion(next) != s {
		if v := version(next, s); v == nil || !v.Served {
			add("version %s stored objects of the previous release and is neither the storage version nor served", s)
		} else if next.Spec.Conversion == nil || next.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			add("the storage version moved from %s to %s without a conversion webhook", s, storageVersion(next))
		}
	}
	for i := range prev.Spec.Versions {
		pv := &prev.Spec.Versions[i]
		if !pv.Served {
			continue
		}
		nv := version(next, pv.Name)
		if nv == nil || !nv.Served {
			add("version %s is no longer served", pv.Name)
			continue
		}
		if pv.Schema == nil || pv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if nv.Schema == nil || nv.Schema.OpenAPIV3Schema == nil {
			add("version %s lost its schema", pv.Name)
			continue
		}
		compareSchema(pv.Name, "", pv.Schema.OpenAPIV3Schema, nv.Schema.OpenAPIV3Schema, &problems)
		if hasStatus(pv) && !hasStatus(nv) {
			add("version %s lost its status subresource", pv.Name)
		}
	}
	sort.Strings(problems)
	return problems
}

// compareSchema walks prev's schema and reports where next would prune,
// refuse or reinterpret a value prev accepted.
func compareSchema(ver, path string, prev, next *apiextensionsv1.JSONSchemaProps, problems *[]string) {
	at := func() string { return ver + " " + orRoot(path) }
	if prev.Type != next.Type && prev.Type != "" {
		*problems = append(*problems, fmt.Sprintf("%s: type changed from %q to %q", at(), prev.Type, next.Type))
		return
	}
	if !preserves(prev) && preserves(next) {
		return // next keeps whatever is there
	}
	if preserves(prev) && !preserves(next) {
		*problems = append(*problems, fmt.Sprintf("%s: unknown fields were kept and would now be pruned", at()))
	}
	if len(next.Enum) > 0 {
		if len(prev.Enum) == 0 {
			*problems = append(*problems, fmt.Sprintf("%s: now limited to an enum", at()))
		} else {
			for _, v := range prev.Enum {
				if !slices.ContainsFunc(next.Enum, func(n apiextensionsv1.JSON) bool { return bytes.Equal(n.Raw, v.Raw) }) {
					*problems = append(*problems, fmt.Sprintf("%s: enum value %s was dropped", at(), v.Raw))
				}
			}
		}
	}
	for _, r := range next.Required {
		if slices.Contains(prev.Required, r) {
			continue
		}
		if p, ok := next.Properties[r]; ok && p.Default != nil {
			continue
		}
		*problems = append(*problems, fmt.Sprintf("%s: field %q is newly required", at(), r))
	}
	for name, pp := range prev.Properties {
		np, ok := next.Properties[name]
		if !ok {
			if next.AdditionalProperties == nil || !next.AdditionalProperties.Allows {
				*problems = append(*problems, fmt.Sprintf("%s: field %q was removed (its values would be pruned)", at(), name))
			}
			continue
		}
		compareSchema(ver, path+"."+name, &pp, &np, problems)
	}
	if prev.Items != nil && prev.Items.Schema != nil {
		if next.Items == nil || next.Items.Schema == nil {
			*problems = append(*problems, fmt.Sprintf("%s: the schema of its items was removed", at()))
		} else {
			compareSchema(ver, path+"[]", prev.Items.Schema, next.Items.Schema, problems)
		}
	}
	if prev.AdditionalProperties != nil && prev.AdditionalProperties.Schema != nil {
		if next.AdditionalProperties == nil || next.AdditionalProperties.Schema == nil {
			*problems = append(*problems, fmt.Sprintf("%s: the schema of its map values was removed", at()))
		} else {
			compareSchema(ver, path+"{}", prev.AdditionalProperties.Schema, next.AdditionalProperties.Schema, problems)
		}
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
