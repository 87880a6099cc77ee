package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// ControlPlaneParameter is the provision parameter that names an existing
// ManagedControlPlane ({"namespace": …, "name": …}) for a code-based
// offering instead of one the broker creates. It is not part of the kind's
// spec: the broker takes it out before it validates and writes the spec.
const ControlPlaneParameter = "x-marketplane-control-plane"

// idNamespace starts the text whose hash is a code-based offering's OSB id,
// so that the ids cannot be mistaken for those of anything else hashed.
const idNamespace = "marketplane.code-offering:"

// CodeService is a ServiceProvider's offering as the broker serves it
// through OSB: one plan per namespaced kind of the provider.
type CodeService struct {
	// ID is the OSB service_id (OfferingServiceID of Offering).
	ID string
	// Name is the OSB name: the Offering's name.
	Name string
	// Offering is the name of the Offering it comes from.
	Offering string
	// BindingRules are what a binding's credentials may do on the
	// instance's ManagedControlPlane; empty: not bindable.
	BindingRules []rbacv1.PolicyRule
	// Plans are one per offered kind, sorted by name.
	Plans []*CodePlan
}

// Bindable reports whether instances of the offering can be bound.
func (s *CodeService) Bindable() bool { return len(s.BindingRules) > 0 }

// CodePlan is one kind of a ServiceProvider as an OSB plan: provisioning
// it creates an object of the kind whose spec is the parameters.
type CodePlan struct {
	// ID is the OSB plan_id (OfferingPlanID).
	ID string
	// Name is the OSB name: the kind in lower case.
	Name string
	// ServiceID is the OSB service_id of its offering.
	ServiceID string
	// Group, Version, Kind and Plural name the kind on the onboarding
	// cluster.
	Group, Version, Kind, Plural string
	// CreateSchema validates provision parameters (the kind's spec, plus
	// ControlPlaneParameter).
	CreateSchema *Schema
}

// CodeSnapshot is the code-based part of the catalog at one moment. It is
// immutable.
type CodeSnapshot struct {
	// Problems describe Offerings and kinds that were left out, and why.
	Problems []string

	services map[string]*CodeService
	plans    map[string]*CodePlan
	wire     []wireService
}

// Service returns the offering with the given OSB id, or nil.
func (c *CodeSnapshot) Service(id string) *CodeService {
	if c == nil {
		return nil
	}
	return c.services[id]
}

// Plan returns the plan with the given OSB id, or nil.
func (c *CodeSnapshot) Plan(id string) *CodePlan {
	if c == nil {
		return nil
	}
	return c.plans[id]
}

// Code returns the code-based offerings the snapshot serves (nil for a
// snapshot of SFServices alone).
func (s *Snapshot) Code() *CodeSnapshot {
	if s == nil {
		return nil
	}
	return s.code
}

// OfferingServiceID is the OSB service_id of the Offering called name: a
// UUID (RFC 9562 version 8, "custom") made of the first 16 bytes of
// SHA-256("marketplane.code-offering:" + name). The same Offering has the
// same id on every broker and after every restart, which platforms need,
// and the id cannot be one a human chose for an SFService by accident.
func OfferingServiceID(name string) string {
	return hashUUID(idNamespace + name)
}

// OfferingPlanID is the OSB plan_id of kind (of group) in the Offering
// called offering: as OfferingServiceID, of "<offering>/<group>/<kind>".
func OfferingPlanID(offering, group, kind string) string {
	return hashUUID(idNamespace + offering + "/" + group + "/" + kind)
}

func hashUUID(text string) string {
	sum := sha256.Sum256([]byte(text))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// BuildCode makes the code-based part of the catalog from the Offerings of
// ServiceProviders that opted into OSB (spec.osb.enabled) and are Ready.
// Each namespaced kind with a spec schema becomes a plan; a kind without
// plural or schema (its CRD is missing), a cluster-scoped kind (the object
// must sit next to its ManagedControlPlane) and a schema that does not
// compile are left out and described in Problems, as is an offering that
// has no plan left.
func BuildCode(offerings []marketplacev1alpha1.Offering) *CodeSnapshot {
	c := &CodeSnapshot{services: map[string]*CodeService{}, plans: map[string]*CodePlan{}}
	problem := func(format string, args ...any) { c.Problems = append(c.Problems, fmt.Sprintf(format, args...)) }
	sorted := append([]marketplacev1alpha1.Offering(nil), offerings...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i := range sorted {
		o := &sorted[i]
		if o.Spec.Source.Kind != marketplacev1alpha1.SourceServiceProvider || o.Spec.OSB == nil {
			continue
		}
		if !o.Spec.OSB.Enabled {
			if o.Spec.OSB.Message != "" {
				problem("Offering %s: not served through OSB: %s", o.Name, o.Spec.OSB.Message)
			}
			continue
		}
		if !o.Spec.Ready {
			problem("Offering %s: its ServiceProvider is not Ready; not served", o.Name)
			continue
		}
		svc := &CodeService{ID: OfferingServiceID(o.Name), Name: o.Name, Offering: o.Name, BindingRules: o.Spec.OSB.BindingRules}
		description := o.Spec.Description
		if description == "" {
			description = o.Spec.DisplayName
		}
		// Instances and bindings can be fetched; plans cannot change, since
		// each plan is another kind (the broker refuses a plan change).
		w := wireService{
			Name:                 o.Name,
			ID:                   svc.ID,
			Description:          description,
			Bindable:             svc.Bindable(),
			InstancesRetrievable: true,
			BindingsRetrievable:  svc.Bindable(),
			PlanUpdateable:       false,
			Plans:                []wirePlan{},
		}
		if meta, err := json.Marshal(map[string]any{"displayName": o.Spec.DisplayName, "marketplaneOffering": o.Name, "version": o.Spec.Version}); err == nil {
			w.Metadata = meta
		}
		for _, k := range o.Spec.Kinds {
			plan, wp, err := codePlan(o, svc, k)
			if err != nil {
				problem("Offering %s: kind %s: %v; not served", o.Name, k.Kind, err)
				continue
			}
			if c.plans[plan.ID] != nil {
				problem("Offering %s: kind %s: plan id %s is taken; not served", o.Name, k.Kind, plan.ID)
				continue
			}
			svc.Plans = append(svc.Plans, plan)
			w.Plans = append(w.Plans, wp)
		}
		if len(svc.Plans) == 0 {
			problem("Offering %s: no kind can be served; an offering needs at least one plan", o.Name)
			continue
		}
		for _, p := range svc.Plans {
			c.plans[p.ID] = p
		}
		c.services[svc.ID] = svc
		c.wire = append(c.wire, w)
	}
	return c
}

// codePlan describes kind k of Offering o as a plan.
func codePlan(o *marketplacev1alpha1.Offering, svc *CodeService, k marketplacev1alpha1.OfferedKind) (*CodePlan, wirePlan, error) {
	switch {
	case k.Plural == "" || k.Schema == nil:
		return nil, wirePlan{}, fmt.Errorf("its CRD is not on the onboarding cluster")
	case k.Scope != "Namespaced":
		return nil, wirePlan{}, fmt.Errorf("it is %s-scoped, but its objects must sit next to their ManagedControlPlane", k.Scope)
	}
	schema, err := parametersSchema(k.Schema.Raw)
	if err != nil {
		return nil, wirePlan{}, err
	}
	compiled, err := CompileSchema(schema)
	if err != nil {
		return nil, wirePlan{}, fmt.Errorf("spec schema: %w", err)
	}
	plan := &CodePlan{
		ID: OfferingPlanID(o.Name, k.Group, k.Kind), Name: strings.ToLower(k.Kind), ServiceID: svc.ID,
		Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.Plural, CreateSchema: compiled,
	}
	wp := wirePlan{
		ID:          plan.ID,
		Name:        plan.Name,
		Description: fmt.Sprintf("A %s (%s) for a ManagedControlPlane: the broker's own, or the one named in %s", k.Kind, k.Group, ControlPlaneParameter),
		Free:        true,
		Bindable:    svc.Bindable(),
		Schemas: &osbv1alpha1.ServiceSchemas{Instance: &osbv1alpha1.ServiceInstanceSchema{
			Create: &osbv1alpha1.Schema{Parameters: &runtime.RawExtension{Raw: schema}},
		}},
	}
	return plan, wp, nil
}

// parametersSchema turns the OpenAPI schema of a kind's spec into the JSON
// Schema (draft-04, as OSB platforms read) of the provision parameters: the
// spec's properties plus ControlPlaneParameter. Unknown parameters are
// refused (additionalProperties false) unless the spec keeps unknown
// fields, since the API server would otherwise drop them without a word.
func parametersSchema(spec []byte) ([]byte, error) {
	var s map[string]any
	if err := json.Unmarshal(spec, &s); err != nil || s == nil {
		return nil, fmt.Errorf("spec schema is not a JSON object")
	}
	if t, ok := s["type"]; ok && t != "object" {
		return nil, fmt.Errorf("spec schema is of type %v, not object", t)
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	if _, taken := props[ControlPlaneParameter]; taken {
		return nil, fmt.Errorf("the spec has a field %s, which the broker reserves", ControlPlaneParameter)
	}
	props[ControlPlaneParameter] = map[string]any{
		"type":                 "object",
		"description":          "An existing ManagedControlPlane to serve, instead of one the broker creates. It must carry the annotation broker.marketplane.io/osb-instance-id with this instance's id.",
		"required":             []string{"namespace", "name"},
		"additionalProperties": false,
		"properties": map[string]any{
			"namespace": map[string]any{"type": "string", "minLength": 1},
			"name":      map[string]any{"type": "string", "minLength": 1},
		},
	}
	s["properties"] = props
	s["type"] = "object"
	s["$schema"] = "http://json-schema.org/draft-04/schema#"
	keepsUnknown, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
	if _, set := s["additionalProperties"]; !set && !keepsUnknown {
		s["additionalProperties"] = false
	}
	return json.Marshal(s)
}

// Merge returns the catalog of sf and the code-based offerings of code:
// the SFServices' part of the body exactly as sf serves it, followed by
// the code-based offerings. A code-based offering whose service id or name,
// or one of whose plan ids, an SFService or SFPlan already uses is left
// out and described in the result's Problems (the SFService keeps its id).
func Merge(sf *Snapshot, code *CodeSnapshot) *Snapshot {
	if sf == nil {
		sf = Empty()
	}
	out := &Snapshot{services: sf.services, plans: sf.plans, Problems: append([]string(nil), sf.Problems...)}
	kept := &CodeSnapshot{services: map[string]*CodeService{}, plans: map[string]*CodePlan{}}
	if code != nil {
		out.Problems = append(out.Problems, code.Problems...)
		names := map[string]bool{}
		for _, s := range sf.services {
			names[s.Name] = true
		}
	services:
		for _, w := range code.wire {
			svc := code.services[w.ID]
			if sf.services[svc.ID] != nil || sf.plans[svc.ID] != nil || names[svc.Name] {
				out.Problems = append(out.Problems, fmt.Sprintf("Offering %s: service id %s or name %q is an SFService's or SFPlan's; not served", svc.Offering, svc.ID, svc.Name))
				continue
			}
			for _, p := range svc.Plans {
				if sf.plans[p.ID] != nil || sf.services[p.ID] != nil {
					out.Problems = append(out.Problems, fmt.Sprintf("Offering %s: plan id %s is an SFPlan's or SFService's; not served", svc.Offering, p.ID))
					continue services
				}
			}
			kept.services[svc.ID] = svc
			for _, p := range svc.Plans {
				kept.plans[p.ID] = p
			}
			kept.wire = append(kept.wire, w)
		}
	}
	out.code = kept
	if len(kept.wire) == 0 {
		out.JSON, out.ETag = sf.JSON, sf.ETag
		return out
	}
	var body struct {
		Services []json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(sf.JSON, &body); err != nil {
		panic(fmt.Sprintf("catalog: the SF catalog body is not JSON: %v", err))
	}
	for _, w := range kept.wire {
		raw, err := json.Marshal(w)
		if err != nil {
			panic(fmt.Sprintf("marshal code-based offering: %v", err))
		}
		body.Services = append(body.Services, raw)
	}
	data, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("marshal catalog: %v", err))
	}
	sum := sha256.Sum256(data)
	out.JSON, out.ETag = data, `"`+hex.EncodeToString(sum[:12])+`"`
	return out
}
