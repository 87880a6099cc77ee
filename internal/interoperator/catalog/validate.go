package catalog

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/render"
)

// Reason is the reason of a catalog entry's Ready condition.
type Reason string

// Reasons of the Ready condition of SFServices and SFPlans.
const (
	// ReasonValid: the entry is valid and served.
	ReasonValid Reason = "Valid"
	// ReasonServiceNotFound: no SFService of the namespace has the plan's
	// serviceId.
	ReasonServiceNotFound Reason = "ServiceNotFound"
	// ReasonDuplicateID: another entry of the same kind in the namespace
	// has the same id.
	ReasonDuplicateID Reason = "DuplicateID"
	// ReasonDuplicateName: another plan of the same service has the same
	// name.
	ReasonDuplicateName Reason = "DuplicateName"
	// ReasonInvalidSchema: a parameter schema is not valid JSON Schema.
	ReasonInvalidSchema Reason = "InvalidSchema"
	// ReasonInvalidTemplate: a template is missing or does not parse.
	ReasonInvalidTemplate Reason = "InvalidTemplate"
	// ReasonDeletionBlocked: the entry is being deleted, and its deletion
	// waits for the instances that still use it; it is no longer served.
	ReasonDeletionBlocked Reason = "DeletionBlocked"
)

// MaxSchemaBytes is the largest parameter schema OSB v2.17 allows.
const MaxSchemaBytes = 64 << 10

// Problem is why a catalog entry is not valid.
type Problem struct {
	// Reason is the condition reason.
	Reason Reason
	// Message says what is wrong and how to fix it.
	Message string
}

// ValidateService checks svc against the other services of its namespace.
func ValidateService(svc *osbv1alpha1.SFService, services []osbv1alpha1.SFService) *Problem {
	for i := range services {
		other := &services[i]
		if other.Name == svc.Name || other.DeletionTimestamp != nil {
			continue
		}
		if other.Spec.ID == svc.Spec.ID {
			return &Problem{ReasonDuplicateID, fmt.Sprintf("SFService %s has the same id %q; OSB service ids must be unique", other.Name, svc.Spec.ID)}
		}
	}
	return nil
}

// ValidatePlan checks plan against the services and the other plans of its
// namespace, and checks its schemas and templates.
func ValidatePlan(plan *osbv1alpha1.SFPlan, services []osbv1alpha1.SFService, plans []osbv1alpha1.SFPlan) *Problem {
	// A service being deleted still counts: it is deleted at once unless
	// instances use it, and those are updated and deprovisioned with
	// their plan as before.
	found := false
	for i := range services {
		if services[i].Spec.ID == plan.Spec.ServiceID {
			found = true
			break
		}
	}
	if !found {
		return &Problem{ReasonServiceNotFound, fmt.Sprintf("no SFService in namespace %s has the id %q that spec.serviceId names", plan.Namespace, plan.Spec.ServiceID)}
	}
	for i := range plans {
		other := &plans[i]
		if other.Name == plan.Name || other.DeletionTimestamp != nil {
			continue
		}
		if other.Spec.ID == plan.Spec.ID {
			return &Problem{ReasonDuplicateID, fmt.Sprintf("SFPlan %s has the same id %q; OSB plan ids must be unique", other.Name, plan.Spec.ID)}
		}
		if other.Spec.ServiceID == plan.Spec.ServiceID && other.Spec.Name == plan.Spec.Name {
			return &Problem{ReasonDuplicateName, fmt.Sprintf("SFPlan %s of the same service has the same name %q; plan names must be unique within a service", other.Name, plan.Spec.Name)}
		}
	}
	if p := validateSchemas(plan.Spec.Schemas); p != nil {
		return p
	}
	return validateTemplates(plan.Spec.Templates)
}

// validateSchemas compiles every parameter schema of a plan.
func validateSchemas(s *osbv1alpha1.ServiceSchemas) *Problem {
	if s == nil {
		return nil
	}
	check := func(path string, sch *osbv1alpha1.Schema) *Problem {
		if sch == nil || sch.Parameters == nil {
			return nil
		}
		if err := CompileSchema(sch.Parameters.Raw); err != nil {
			return &Problem{ReasonInvalidSchema, fmt.Sprintf("spec.schemas.%s.parameters: %v", path, err)}
		}
		return nil
	}
	if s.Instance != nil {
		if p := check("service_instance.create", s.Instance.Create); p != nil {
			return p
		}
		if p := check("service_instance.update", s.Instance.Update); p != nil {
			return p
		}
	}
	if s.Binding != nil {
		return check("service_binding.create", s.Binding.Create)
	}
	return nil
}

// schemaURL names the schema being compiled; it is never fetched.
const schemaURL = "mem://plan/parameters.json"

// refusingLoader refuses every external reference: OSB forbids them, and
// fetching them would let a plan make the inter-operator call out.
type refusingLoader struct{}

// Load implements jsonschema.URLLoader.
func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%q is outside the schema; OSB parameter schemas must not reference other documents", url)
}

// CompileSchema checks that raw is a JSON Schema as OSB v2.17 wants it: a
// JSON object with $schema, at most MaxSchemaBytes, without external
// references, that compiles.
func CompileSchema(raw []byte) error {
	if len(raw) > MaxSchemaBytes {
		return fmt.Errorf("the schema is %d bytes, more than the %d OSB allows", len(raw), MaxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("a schema must be a JSON object")
	}
	if _, ok := m["$schema"]; !ok {
		return fmt.Errorf("$schema is missing; OSB requires it (for example http://json-schema.org/draft-04/schema#)")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return err
	}
	if _, err := c.Compile(schemaURL); err != nil {
		return cleanSchemaError(err)
	}
	return nil
}

// cleanSchemaError words a compiler error for a condition message: without
// the internal schema URL, on one line.
func cleanSchemaError(err error) error {
	msg := strings.ReplaceAll(err.Error(), schemaURL, "the schema")
	msg = strings.Join(strings.Fields(msg), " ")
	return errors.New(msg)
}

// validateTemplates checks that a plan has a provision template and that
// its inline gotemplates parse as a render parses them: with the functions
// a gotemplate may call, and without loops over constants that repeat
// more than render.MaxConstantIterations times. Templates fetched by url are checked when
// they are rendered: fetching here would make validation depend on the
// network.
func validateTemplates(templates []osbv1alpha1.TemplateSpec) *Problem {
	hasProvision := false
	for i, t := range templates {
		if t.Action == osbv1alpha1.ActionProvision {
			hasProvision = true
		}
		text := t.Content
		if text == "" && t.ContentEncoded != "" {
			b, err := decodeBase64(t.ContentEncoded)
			if err != nil {
				return &Problem{ReasonInvalidTemplate, fmt.Sprintf("spec.templates[%d] (%s): contentEncoded is not valid base64", i, t.Action)}
			}
			text = string(b)
		}
		if t.Type != osbv1alpha1.TypeGoTemplate || text == "" {
			continue
		}
		if err := render.Check(string(t.Action), text); err != nil {
			return &Problem{ReasonInvalidTemplate, fmt.Sprintf("spec.templates[%d] (%s): %v", i, t.Action, err)}
		}
	}
	if !hasProvision {
		return &Problem{ReasonInvalidTemplate, "the plan has no provision template"}
	}
	return nil
}

// decodeBase64 decodes standard base64, padded or not, ignoring line
// breaks, as the renderer does.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', ' ', '\t':
			return -1
		}
		return r
	}, s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// older reports whether the entry created at a named an is older than the
// one created at b named bn; names break ties.
func older(a time.Time, an string, b time.Time, bn string) bool {
	if !a.Equal(b) {
		return a.Before(b)
	}
	return an < bn
}
