package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
)

// explainRequest is what `marketplane offerings explain` was asked for.
type explainRequest struct {
	// kind selects the offered kind of a ServiceProvider offering, plan the
	// plan of an SFService offering, when there are several.
	kind, plan string
	// schema is which of a plan's schemas: create, update or bind.
	schema string
	// field is a dotted path below the kind's spec or the plan's
	// parameters, e.g. "version" or "spec.version".
	field string
	// recursive lists every field below, not only the direct ones.
	recursive bool
}

// schemaNode is a JSON Schema or an OpenAPI v3 schema, as far as explain
// reads it.
type schemaNode struct {
	Type        any                    `json:"type"`
	Description string                 `json:"description"`
	Properties  map[string]*schemaNode `json:"properties"`
	Items       *schemaNode            `json:"items"`
	Required    []string               `json:"required"`
	Enum        []any                  `json:"enum"`
	Default     any                    `json:"default"`
	Minimum     *float64               `json:"minimum"`
	Maximum     *float64               `json:"maximum"`
	MinLength   *int64                 `json:"minLength"`
	MaxLength   *int64                 `json:"maxLength"`
	Pattern     string                 `json:"pattern"`
	Format      string                 `json:"format"`
	// AdditionalProperties is a schema or a boolean; only a schema's type
	// is shown (a map's values).
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
	IntOrString          bool            `json:"x-kubernetes-int-or-string"`
	PreserveUnknown      bool            `json:"x-kubernetes-preserve-unknown-fields"`
}

// explainOffering writes what `kubectl explain` would say about the part of
// an Offering req names: its header (offering, kind or plan), the field's
// type and description, and its fields with their types, constraints and
// descriptions. It fails with a message naming the choices when the
// request is ambiguous or names something the offering lacks.
func explainOffering(o *marketplacev1alpha1.Offering, req explainRequest) (string, error) {
	var b strings.Builder
	status := "not ready"
	if o.Spec.Ready {
		status = "ready"
	}
	var root *schemaNode
	var rootName string
	switch o.Spec.Source.Kind {
	case marketplacev1alpha1.SourceServiceProvider:
		k, err := pickKind(o, req.kind)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "OFFERING:  %s (ServiceProvider %s, version %s, %s)\n", o.Name, o.Spec.Source.Name, orDash(o.Spec.Version), status)
		fmt.Fprintf(&b, "KIND:      %s\n", k.Kind)
		fmt.Fprintf(&b, "GROUP:     %s/%s (%s, %s)\n", k.Group, k.Version, orDash(k.Plural), orDash(k.Scope))
		if k.Schema == nil {
			return "", fmt.Errorf("offering %s: kind %s has no schema (its CRD is not on the onboarding cluster, or declares no spec)", o.Name, k.Kind)
		}
		if err := json.Unmarshal(k.Schema.Raw, &root); err != nil {
			return "", fmt.Errorf("offering %s: schema of %s: %w", o.Name, k.Kind, err)
		}
		rootName = "spec"
	case marketplacev1alpha1.SourceSFService:
		p, err := pickPlan(o, req.plan)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "OFFERING:  %s (SFService %s/%s, service id %s, %s)\n", o.Name, o.Spec.Source.Namespace, o.Spec.Source.Name, o.Spec.ServiceID, status)
		fmt.Fprintf(&b, "PLAN:      %s (id %s%s)\n", p.Name, p.ID, planTraits(p))
		raw, what, err := planSchema(p, req.schema)
		if err != nil {
			return "", fmt.Errorf("offering %s: %w", o.Name, err)
		}
		fmt.Fprintf(&b, "SCHEMA:    %s\n", what)
		if raw == nil {
			b.WriteString("\nThe plan declares no parameters for this operation.\n")
			return b.String(), nil
		}
		if err := json.Unmarshal(raw, &root); err != nil {
			return "", fmt.Errorf("offering %s: %s schema of plan %s: %w", o.Name, what, p.Name, err)
		}
		rootName = "parameters"
	default:
		return "", fmt.Errorf("offering %s: unknown source kind %q", o.Name, o.Spec.Source.Kind)
	}
	node, path, err := walk(root, rootName, req.field)
	if err != nil {
		return "", fmt.Errorf("offering %s: %w", o.Name, err)
	}
	fmt.Fprintf(&b, "FIELD:     %s <%s>\n", path, typeOf(node))
	if c := constraints(node); c != "" {
		fmt.Fprintf(&b, "           %s\n", c)
	}
	if node.Description != "" {
		b.WriteString("\nDESCRIPTION:\n")
		writeIndented(&b, node.Description, "    ")
	}
	fields := fieldsOf(node)
	if len(fields) > 0 {
		b.WriteString("\nFIELDS:\n")
		writeFields(&b, fields, req.recursive, "  ")
	}
	return b.String(), nil
}

// pickKind returns the offered kind named kind, or the only one.
func pickKind(o *marketplacev1alpha1.Offering, kind string) (*marketplacev1alpha1.OfferedKind, error) {
	var names []string
	for i := range o.Spec.Kinds {
		k := &o.Spec.Kinds[i]
		if strings.EqualFold(k.Kind, kind) || strings.EqualFold(k.Plural, kind) {
			return k, nil
		}
		names = append(names, k.Kind)
	}
	switch {
	case len(names) == 0:
		return nil, fmt.Errorf("offering %s offers no kinds (its provider registered none)", o.Name)
	case kind == "" && len(names) == 1:
		return &o.Spec.Kinds[0], nil
	case kind == "":
		return nil, fmt.Errorf("offering %s offers several kinds; choose one with --kind: %s", o.Name, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("offering %s offers no kind %q; it offers: %s", o.Name, kind, strings.Join(names, ", "))
}

// pickPlan returns the plan named (or with the id) plan, or the only one.
func pickPlan(o *marketplacev1alpha1.Offering, plan string) (*marketplacev1alpha1.Plan, error) {
	var names []string
	for i := range o.Spec.Plans {
		p := &o.Spec.Plans[i]
		if p.Name == plan || p.ID == plan {
			return p, nil
		}
		names = append(names, p.Name)
	}
	switch {
	case len(names) == 0:
		return nil, fmt.Errorf("offering %s has no plans", o.Name)
	case plan == "" && len(names) == 1:
		return &o.Spec.Plans[0], nil
	case plan == "":
		return nil, fmt.Errorf("offering %s has several plans; choose one with --plan: %s", o.Name, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("offering %s has no plan %q; its plans: %s", o.Name, plan, strings.Join(names, ", "))
}

// planSchema returns the raw schema of the operation which names (create,
// update or bind; empty is create) and how to call it.
func planSchema(p *marketplacev1alpha1.Plan, which string) ([]byte, string, error) {
	var s *marketplacev1alpha1.PlanSchemas
	if p.Schemas != nil {
		s = p.Schemas
	} else {
		s = &marketplacev1alpha1.PlanSchemas{}
	}
	switch which {
	case "", "create":
		return rawOf(s.InstanceCreate), "instance create (parameters of a provision)", nil
	case "update":
		return rawOf(s.InstanceUpdate), "instance update (parameters of an update)", nil
	case "bind":
		return rawOf(s.BindingCreate), "binding create (parameters of a bind)", nil
	}
	return nil, "", fmt.Errorf("--schema %q: want create, update or bind", which)
}

// rawOf returns a schema's JSON, nil when there is none.
func rawOf(j *apiextensionsv1.JSON) []byte {
	if j == nil || len(j.Raw) == 0 || string(j.Raw) == "null" {
		return nil
	}
	return j.Raw
}

// planTraits lists what a plan is: free, bindable, updatable.
func planTraits(p *marketplacev1alpha1.Plan) string {
	var t []string
	if p.Free {
		t = append(t, "free")
	}
	if p.Bindable {
		t = append(t, "bindable")
	}
	if p.PlanUpdatable {
		t = append(t, "plan updatable")
	}
	if len(t) == 0 {
		return ""
	}
	return ", " + strings.Join(t, ", ")
}

// walk follows field (dotted, optionally starting with rootName) from root
// and returns the node with its full path.
func walk(root *schemaNode, rootName, field string) (*schemaNode, string, error) {
	if root == nil {
		return nil, "", fmt.Errorf("%s has no schema", rootName)
	}
	field = strings.TrimPrefix(strings.TrimPrefix(field, rootName), ".")
	node, path := root, rootName
	if field == "" {
		return node, path, nil
	}
	for _, part := range strings.Split(field, ".") {
		next := node
		if next.Items != nil && len(next.Properties) == 0 {
			next = next.Items
		}
		child, ok := next.Properties[part]
		if !ok || child == nil {
			names := sortedKeys(next.Properties)
			if len(names) == 0 {
				return nil, "", fmt.Errorf("field %q does not exist: %s has no fields", field, path)
			}
			return nil, "", fmt.Errorf("field %q does not exist: %s has %s", field, path, strings.Join(names, ", "))
		}
		node, path = child, path+"."+part
	}
	return node, path, nil
}

// field is one entry of FIELDS.
type field struct {
	name     string
	required bool
	node     *schemaNode
}

// fieldsOf returns a node's fields (an array's item fields), sorted by name.
func fieldsOf(n *schemaNode) []field {
	if n.Items != nil && len(n.Properties) == 0 {
		n = n.Items
	}
	out := make([]field, 0, len(n.Properties))
	for _, name := range sortedKeys(n.Properties) {
		out = append(out, field{name: name, required: slices.Contains(n.Required, name), node: n.Properties[name]})
	}
	return out
}

func writeFields(b *strings.Builder, fields []field, recursive bool, indent string) {
	for _, f := range fields {
		req := ""
		if f.required {
			req = " -required-"
		}
		fmt.Fprintf(b, "%s%s\t<%s>%s\n", indent, f.name, typeOf(f.node), req)
		if c := constraints(f.node); c != "" {
			fmt.Fprintf(b, "%s  %s\n", indent, c)
		}
		if f.node.Description != "" && !recursive {
			writeIndented(b, f.node.Description, indent+"  ")
			b.WriteString("\n")
		}
		if recursive {
			writeFields(b, fieldsOf(f.node), true, indent+"  ")
		}
	}
}

// typeOf names a node's type as kubectl explain does: string, integer,
// Object, []string, map[string]string, int-or-string.
func typeOf(n *schemaNode) string {
	if n.IntOrString {
		return "int-or-string"
	}
	t := ""
	switch v := n.Type.(type) {
	case string:
		t = v
	case []any:
		var parts []string
		for _, p := range v {
			if s, ok := p.(string); ok && s != "null" {
				parts = append(parts, s)
			}
		}
		t = strings.Join(parts, "|")
	}
	switch {
	case t == "array" && n.Items != nil:
		return "[]" + typeOf(n.Items)
	case t == "object" && len(n.Properties) == 0 && len(n.AdditionalProperties) > 0 && n.AdditionalProperties[0] == '{':
		var v schemaNode
		if json.Unmarshal(n.AdditionalProperties, &v) == nil {
			return "map[string]" + typeOf(&v)
		}
	case t == "" && len(n.Properties) > 0:
		return "object"
	case t == "":
		return "any"
	}
	return t
}

// constraints summarises what a value must be: enum, default, bounds,
// pattern, format.
func constraints(n *schemaNode) string {
	var c []string
	if len(n.Enum) > 0 {
		vals := make([]string, 0, len(n.Enum))
		for _, e := range n.Enum {
			vals = append(vals, jsonValue(e))
		}
		c = append(c, "one of: "+strings.Join(vals, ", "))
	}
	if n.Default != nil {
		c = append(c, "default: "+jsonValue(n.Default))
	}
	if n.Minimum != nil {
		c = append(c, fmt.Sprintf("minimum: %v", *n.Minimum))
	}
	if n.Maximum != nil {
		c = append(c, fmt.Sprintf("maximum: %v", *n.Maximum))
	}
	if n.MinLength != nil {
		c = append(c, fmt.Sprintf("min length: %d", *n.MinLength))
	}
	if n.MaxLength != nil {
		c = append(c, fmt.Sprintf("max length: %d", *n.MaxLength))
	}
	if n.Pattern != "" {
		c = append(c, "pattern: "+n.Pattern)
	}
	if n.Format != "" {
		c = append(c, "format: "+n.Format)
	}
	if len(c) == 0 {
		return ""
	}
	return "(" + strings.Join(c, "; ") + ")"
}

func jsonValue(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

func writeIndented(b *strings.Builder, text, indent string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString(indent + line + "\n")
	}
}

func sortedKeys(m map[string]*schemaNode) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
