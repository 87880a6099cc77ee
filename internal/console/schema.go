package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// fieldPrefix prefixes the form inputs of schema properties, so that they
// never clash with the console's own fields (csrf, name, namespace).
const fieldPrefix = "p."

// schemaURL names a compiled schema; it is never fetched.
const schemaURL = "mem://offering/schema.json"

// Input kinds of a field.
const (
	inputText     = "text"
	inputNumber   = "number"
	inputCheckbox = "checkbox"
	inputSelect   = "select"
	inputJSON     = "json"
)

// field is one top-level property of a schema as a form input. Objects,
// arrays and properties of no single simple type are edited as JSON.
type field struct {
	Name        string
	Label       string
	Description string
	Type        string // JSON type: string, integer, number, boolean; "" for JSON input
	Input       string
	Enum        []string
	Required    bool
	Min         string
	Max         string
	Step        string
	MinLength   string
	MaxLength   string
	Pattern     string
	Value       string
	Checked     bool
	Error       string
}

// InputName is the name of the field's form input.
func (f field) InputName() string { return fieldPrefix + f.Name }

// form is a schema turned into fields, and what was filled in.
type form struct {
	Fields []field
	// Errors are errors that belong to no field (the schema's own, or
	// about the whole object).
	Errors []string
	// schema is the raw schema; nil means any object is accepted.
	schema map[string]any
}

// newForm builds the form of a JSON schema (an object schema's
// properties, required first, then by name). A schema that is absent or
// not an object schema gives a form without fields.
func newForm(raw []byte) (*form, error) {
	f := &form{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return f, nil
	}
	var sch map[string]any
	if err := json.Unmarshal(raw, &sch); err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	f.schema = sch
	props, _ := sch["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := sch["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		p, _ := props[n].(map[string]any)
		f.Fields = append(f.Fields, newField(n, p, required[n]))
	}
	return f, nil
}

// newField turns one property schema into a field with HTML5 constraints.
func newField(name string, p map[string]any, required bool) field {
	fd := field{Name: name, Label: name, Required: required, Input: inputJSON}
	if t, ok := p["title"].(string); ok && t != "" {
		fd.Label = t
	}
	fd.Description, _ = p["description"].(string)
	typ, _ := p["type"].(string)
	if enum, ok := p["enum"].([]any); ok && len(enum) > 0 && (typ == "" || typ == "string") {
		fd.setEnum(enum)
	}
	if fd.Input == inputJSON {
		fd.setInput(typ, p)
	}
	if d, ok := p["default"]; ok {
		fd.setDefault(d)
	}
	return fd
}

// setEnum makes the field a select of enum's values when they are all
// strings.
func (f *field) setEnum(enum []any) {
	values := make([]string, 0, len(enum))
	for _, e := range enum {
		s, ok := e.(string)
		if !ok {
			return
		}
		values = append(values, s)
	}
	f.Enum = values
	f.Type, f.Input = "string", inputSelect
}

// setInput picks the input for a property of type typ and its HTML5
// constraints from the schema p.
func (f *field) setInput(typ string, p map[string]any) {
	switch typ {
	case "string":
		f.Type, f.Input = typ, inputText
		f.MinLength = numberAttr(p["minLength"])
		f.MaxLength = numberAttr(p["maxLength"])
		// The HTML pattern is anchored, the schema's is not: only an
		// anchored schema pattern means the same in both.
		if pat, ok := p["pattern"].(string); ok && strings.HasPrefix(pat, "^") && strings.HasSuffix(pat, "$") {
			f.Pattern = pat
		}
	case "integer", "number":
		f.Type, f.Input = typ, inputNumber
		f.Min = numberAttr(p["minimum"])
		f.Max = numberAttr(p["maximum"])
		f.Step = "any"
		if typ == "integer" {
			f.Step = "1"
		}
		if m := numberAttr(p["multipleOf"]); m != "" {
			f.Step = m
		}
	case "boolean":
		f.Type, f.Input = typ, inputCheckbox
	}
}

// setDefault shows the schema's default d as the field's value.
func (f *field) setDefault(d any) {
	switch v := d.(type) {
	case bool:
		f.Checked = v
	case string:
		f.Value = v
	case float64:
		f.Value = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		if b, err := json.Marshal(v); err == nil {
			f.Value = string(b)
		}
	}
}

// numberAttr formats a schema number for an HTML attribute; "" when v is
// not a number.
func numberAttr(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return ""
}

// fill copies the submitted values into the fields and builds the JSON
// object they describe. A value that is not of the field's type is a field
// error, and stays out of the object.
func (f *form) fill(values url.Values) map[string]any {
	obj := map[string]any{}
	for i := range f.Fields {
		fd := &f.Fields[i]
		raw, present := values[fd.InputName()]
		v := ""
		if len(raw) > 0 {
			v = raw[len(raw)-1]
		}
		fd.Value = v
		switch fd.Input {
		case inputCheckbox:
			fd.Checked = present && v != ""
			obj[fd.Name] = fd.Checked
			continue
		}
		if strings.TrimSpace(v) == "" {
			continue
		}
		switch fd.Type {
		case "integer":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				fd.Error = "must be a whole number"
				continue
			}
			obj[fd.Name] = n
		case "number":
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				fd.Error = "must be a number"
				continue
			}
			obj[fd.Name] = n
		case "string":
			obj[fd.Name] = v
		default:
			var j any
			if err := json.Unmarshal([]byte(v), &j); err != nil {
				fd.Error = "must be JSON: " + err.Error()
				continue
			}
			obj[fd.Name] = j
		}
	}
	return obj
}

// validate checks obj against the schema and puts every violation next to
// its field (the first property of its location), or into Errors when it
// belongs to none. It reports whether the form is free of errors, the
// conversion errors of fill included.
func (f *form) validate(obj map[string]any) bool {
	ok := true
	for _, fd := range f.Fields {
		if fd.Error != "" {
			ok = false
		}
	}
	if f.schema == nil {
		return ok
	}
	compiled, err := compileSchema(f.schema)
	if err != nil {
		f.Errors = append(f.Errors, "The offering's schema cannot be used to check the form ("+err.Error()+"); the API server will check the values.")
		return ok
	}
	// Round-trip through JSON so that numbers are what the validator
	// expects (json.Number) and Go types never reach it.
	b, err := json.Marshal(obj)
	if err != nil {
		f.Errors = append(f.Errors, "The values cannot be encoded: "+err.Error())
		return false
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		f.Errors = append(f.Errors, "The values cannot be encoded: "+err.Error())
		return false
	}
	err = compiled.Validate(doc)
	if err == nil {
		return ok
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		f.Errors = append(f.Errors, err.Error())
		return false
	}
	for _, u := range verr.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		switch k := u.Error.Kind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf, *kind.AnyOf:
			continue // containers of the errors that follow
		case *kind.Required:
			if u.InstanceLocation == "" {
				for _, m := range k.Missing {
					f.addError(m, "is required")
				}
				continue
			}
		}
		prop, _, _ := strings.Cut(strings.TrimPrefix(u.InstanceLocation, "/"), "/")
		prop = strings.NewReplacer("~1", "/", "~0", "~").Replace(prop)
		msg := u.Error.String()
		if rest := strings.TrimPrefix(u.InstanceLocation, "/"+prop); rest != "" && rest != u.InstanceLocation {
			msg = "at " + rest + ": " + msg
		}
		f.addError(prop, msg)
	}
	return false
}

// addError puts msg next to the field prop, or among the form's errors.
func (f *form) addError(prop, msg string) {
	for i := range f.Fields {
		if f.Fields[i].Name == prop && prop != "" {
			if f.Fields[i].Error == "" {
				f.Fields[i].Error = msg
			} else if !strings.Contains(f.Fields[i].Error, msg) {
				f.Fields[i].Error += "; " + msg
			}
			return
		}
	}
	if prop != "" {
		msg = prop + ": " + msg
	}
	if !slices.Contains(f.Errors, msg) {
		f.Errors = append(f.Errors, msg)
	}
}

// refuseLoads refuses every external reference: a schema that names other
// documents would make the console fetch URLs an offering chose.
type refuseLoads struct{}

// Load implements jsonschema.URLLoader.
func (refuseLoads) Load(u string) (any, error) {
	return nil, fmt.Errorf("%q is outside the schema; external references are not followed", u)
}

// compileSchema compiles a JSON schema (the draft its $schema names; draft-04,
// the draft of OpenAPI v3 schemas and of OSB, without one).
func compileSchema(sch map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(sch)
	if err != nil {
		return nil, fmt.Errorf("encode the schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoads{})
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), schemaURL, "the schema"))
	}
	return compiled, nil
}
