package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxSchemaBytes is the largest parameter schema OSB allows (64 kB).
const MaxSchemaBytes = 64 << 10

// schemaURL names a compiled schema; it is never fetched.
const schemaURL = "mem://plan/parameters.json"

// Schema is a compiled OSB parameter schema.
type Schema struct {
	compiled *jsonschema.Schema
}

// refuseLoads refuses every external reference: OSB forbids them, and
// following them would make the broker fetch URLs named by a catalog.
type refuseLoads struct{}

// Load implements jsonschema.URLLoader.
func (refuseLoads) Load(url string) (any, error) {
	return nil, fmt.Errorf("%q is outside the schema; OSB parameter schemas must not reference other documents", url)
}

// CompileSchema compiles an OSB parameter schema: a JSON object of at most
// MaxSchemaBytes without external references. The draft is the one $schema
// names; a schema without $schema (which OSB forbids) is read as draft-04,
// the draft every platform supports.
func CompileSchema(raw []byte) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("the schema is %d bytes, more than the %d OSB allows", len(raw), MaxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("a schema must be a JSON object")
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
	return &Schema{compiled: compiled}, nil
}

// Validate checks the JSON document raw (parameters, an object) against the
// schema. The error lists every violation with its location in raw, and
// never repeats the values themselves beyond what the schema library names.
func (s *Schema) Validate(raw []byte) error {
	if s == nil {
		return nil
	}
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	err = s.compiled.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	return errors.New(describe(verr))
}

// describe flattens a validation error into one line:
// "at '/size': got string, want integer; at ”: missing property 'name'".
func describe(verr *jsonschema.ValidationError) string {
	out := verr.BasicOutput()
	var parts []string
	for _, u := range out.Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		if msg == "" || strings.HasPrefix(msg, "validation failed") {
			continue
		}
		parts = append(parts, fmt.Sprintf("at '%s': %s", u.InstanceLocation, msg))
	}
	if len(parts) == 0 {
		return strings.ReplaceAll(verr.Error(), schemaURL, "the schema")
	}
	return strings.Join(parts, "; ")
}
