package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// ConditionReady is the condition the inter-operator's catalog controller
// sets on SFServices and SFPlans. An object whose Ready condition is False
// for its current generation is left out of the catalog.
const ConditionReady = "Ready"

// Service is one service offering as the broker enforces it.
type Service struct {
	// ID is the OSB service_id.
	ID string
	// Name is the OSB name.
	Name string
	// Bindable is the offering's default for its plans.
	Bindable bool
	// InstancesRetrievable allows GET /v2/service_instances/:id.
	InstancesRetrievable bool
	// BindingsRetrievable allows GET .../service_bindings/:id.
	BindingsRetrievable bool
	// AllowContextUpdates allows updates that change only the context.
	AllowContextUpdates bool
	// PlanUpdatable allows plan changes for every plan of the offering.
	PlanUpdatable bool
	// Plans are the offering's plans, sorted by name.
	Plans []*Plan
}

// Plan is one service plan as the broker enforces it: the fields of the
// SFPlan that decide how requests are answered, with its parameter schemas
// compiled.
type Plan struct {
	// ID is the OSB plan_id.
	ID string
	// Name is the OSB name.
	Name string
	// ServiceID is the OSB service_id of the plan's offering.
	ServiceID string
	// Bindable is the effective bindable: the plan's own value.
	Bindable bool
	// PlanUpdatable is true when the plan or its offering allows plan
	// changes.
	PlanUpdatable bool
	// Async is manager.async: provision, update and deprovision finish
	// after the response, so the platform must accept asynchronous
	// operations.
	Async bool
	// AsyncBinding is manager.asyncBinding: the same for bind and unbind.
	AsyncBinding bool
	// RequiresApp is manager.requiresApp (a Marketplane addition): a bind
	// request must name an application (app_guid).
	RequiresApp bool
	// MaintenanceVersion is maintenance_info.version, empty when the plan
	// declares none.
	MaintenanceVersion string
	// MaintenanceDescription is maintenance_info.description.
	MaintenanceDescription string
	// UpdatePredecessors is manager.settings.update_predecessors: when not
	// empty, only instances of these plans may change to this plan.
	UpdatePredecessors []string
	// DashboardURLTemplate is the decoded
	// manager.settings.dashboard_url_template, empty when unset.
	DashboardURLTemplate string
	// CreateSchema validates provision parameters; nil accepts any.
	CreateSchema *Schema
	// UpdateSchema validates update parameters; nil accepts any.
	UpdateSchema *Schema
	// BindSchema validates bind parameters; nil accepts any.
	BindSchema *Schema
}

// Snapshot is the catalog at one moment. It is immutable.
type Snapshot struct {
	// JSON is the GET /v2/catalog response body.
	JSON []byte
	// ETag is the strong entity tag of JSON.
	ETag string
	// Problems describe SFServices and SFPlans that were left out, and why.
	Problems []string

	services map[string]*Service
	plans    map[string]*Plan
	// code are the code-based offerings Merge added; nil otherwise.
	code *CodeSnapshot
}

// Service returns the offering with the given OSB id, or nil.
func (s *Snapshot) Service(id string) *Service {
	if s == nil {
		return nil
	}
	return s.services[id]
}

// Plan returns the plan with the given OSB id, or nil.
func (s *Snapshot) Plan(id string) *Plan {
	if s == nil {
		return nil
	}
	return s.plans[id]
}

// Len returns the number of offerings and plans served.
func (s *Snapshot) Len() (services, plans int) {
	if s == nil {
		return 0, 0
	}
	return len(s.services), len(s.plans)
}

// Empty returns the snapshot of an empty catalog.
func Empty() *Snapshot {
	return Build(nil, nil)
}

// wire types of the catalog response (OSB v2.17 "Catalog Management").
type wireCatalog struct {
	Services []wireService `json:"services"`
}

type wireService struct {
	Name                 string               `json:"name"`
	ID                   string               `json:"id"`
	Description          string               `json:"description"`
	Tags                 []string             `json:"tags,omitempty"`
	Requires             []string             `json:"requires,omitempty"`
	Bindable             bool                 `json:"bindable"`
	InstancesRetrievable bool                 `json:"instances_retrievable"`
	BindingsRetrievable  bool                 `json:"bindings_retrievable"`
	AllowContextUpdates  bool                 `json:"allow_context_updates"`
	Metadata             json.RawMessage      `json:"metadata,omitempty"`
	DashboardClient      *wireDashboardClient `json:"dashboard_client,omitempty"`
	PlanUpdateable       bool                 `json:"plan_updateable"`
	Plans                []wirePlan           `json:"plans"`
}

type wireDashboardClient struct {
	ID          string `json:"id"`
	Secret      string `json:"secret,omitempty"`
	RedirectURI string `json:"redirect_uri,omitempty"`
}

type wirePlan struct {
	ID                     string                       `json:"id"`
	Name                   string                       `json:"name"`
	Description            string                       `json:"description"`
	Metadata               json.RawMessage              `json:"metadata,omitempty"`
	Free                   bool                         `json:"free"`
	Bindable               bool                         `json:"bindable"`
	PlanUpdateable         *bool                        `json:"plan_updateable,omitempty"`
	Schemas                *osbv1alpha1.ServiceSchemas  `json:"schemas,omitempty"`
	MaximumPollingDuration int32                        `json:"maximum_polling_duration,omitempty"`
	MaintenanceInfo        *osbv1alpha1.MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// manager is the part of SFPlan.spec.manager the broker reads. Booleans
// may be written as strings ("true"), as Service Fabrik's Helm values do.
type manager struct {
	Async        flexBool `json:"async"`
	AsyncBinding flexBool `json:"asyncBinding"`
	RequiresApp  flexBool `json:"requiresApp"`
	Settings     struct {
		DashboardURLTemplate string   `json:"dashboard_url_template"`
		UpdatePredecessors   []string `json:"update_predecessors"`
	} `json:"settings"`
}

// flexBool decodes a JSON boolean or a string holding one.
type flexBool bool

// UnmarshalJSON implements json.Unmarshaler.
func (b *flexBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch t := v.(type) {
	case nil:
		*b = false
	case bool:
		*b = flexBool(t)
	case string:
		p, err := strconv.ParseBool(t)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", t)
		}
		*b = flexBool(p)
	default:
		return fmt.Errorf("want true or false, got %s", data)
	}
	return nil
}

// Build makes the snapshot of the given SFServices and SFPlans. Objects that
// cannot be served are left out and described in Problems: an object whose
// Ready condition is False for its current generation, a plan whose service
// is missing, a duplicate id or name, a schema that does not compile, an
// unreadable manager, and an offering without plans. Among duplicates the
// first object by namespace/name wins. Offerings and plans are served
// sorted by name.
func Build(services []osbv1alpha1.SFService, plans []osbv1alpha1.SFPlan) *Snapshot {
	b := &builder{
		snap:      &Snapshot{services: map[string]*Service{}, plans: map[string]*Plan{}},
		wires:     map[string]*wireService{},
		names:     map[string]bool{},
		planNames: map[string]bool{},
	}
	svcs := sortedByKey(services)
	for i := range svcs {
		b.addService(&svcs[i])
	}
	pls := sortedByKey(plans)
	for i := range pls {
		b.addPlan(&pls[i])
	}
	b.sortPlans()
	b.encode(svcs)
	return b.snap
}

// builder collects a Snapshot and the wire form of its services while
// Build reads the objects.
type builder struct {
	snap  *Snapshot
	wires map[string]*wireService
	// names are the service names served; planNames the plan names per
	// service (service id, NUL, plan name).
	names, planNames map[string]bool
}

// problemf records why an object is left out.
func (b *builder) problemf(format string, args ...any) {
	b.snap.Problems = append(b.snap.Problems, fmt.Sprintf(format, args...))
}

// sortedByKey returns a copy of objs sorted by namespace/name, so that the
// first of duplicates is always the same.
func sortedByKey[T any, PT interface {
	*T
	metav1.Object
}](objs []T) []T {
	out := append([]T(nil), objs...)
	sort.Slice(out, func(i, j int) bool { return objectKey(PT(&out[i])) < objectKey(PT(&out[j])) })
	return out
}

// addService adds an SFService without plans, or records why it cannot be
// served.
func (b *builder) addService(s *osbv1alpha1.SFService) {
	key := objectKey(s)
	if reason := b.serviceProblem(s); reason != "" {
		b.problemf("SFService %s: %s", key, reason)
		return
	}
	meta, err := objectJSON(s.Spec.Metadata)
	if err != nil {
		b.problemf("SFService %s: metadata: %v; not served", key, err)
		return
	}
	b.names[s.Spec.Name] = true
	b.snap.services[s.Spec.ID] = &Service{
		ID:                   s.Spec.ID,
		Name:                 s.Spec.Name,
		Bindable:             s.Spec.Bindable,
		InstancesRetrievable: s.Spec.InstancesRetrievableOrAlias(),
		BindingsRetrievable:  s.Spec.BindingsRetrievableOrAlias(),
		AllowContextUpdates:  s.Spec.AllowContextUpdates,
		PlanUpdatable:        s.Spec.PlanUpdatable,
	}
	b.wires[s.Spec.ID] = wireServiceOf(s, meta)
}

// serviceProblem says why an SFService cannot be served, or "".
func (b *builder) serviceProblem(s *osbv1alpha1.SFService) string {
	switch {
	case notReady(s, s.Status.Conditions):
		return "Ready is False; not served"
	case s.Spec.ID == "" || s.Spec.Name == "" || s.Spec.Description == "":
		return "id, name and description must not be empty"
	case b.snap.services[s.Spec.ID] != nil:
		return fmt.Sprintf("service id %q is already used by another SFService", s.Spec.ID)
	case b.names[s.Spec.Name]:
		return fmt.Sprintf("service name %q is already used by another SFService", s.Spec.Name)
	}
	return ""
}

// wireServiceOf is the catalog entry of an SFService, without plans yet.
func wireServiceOf(s *osbv1alpha1.SFService, meta json.RawMessage) *wireService {
	w := &wireService{
		Name:                 s.Spec.Name,
		ID:                   s.Spec.ID,
		Description:          s.Spec.Description,
		Tags:                 s.Spec.Tags,
		Requires:             s.Spec.Requires,
		Bindable:             s.Spec.Bindable,
		InstancesRetrievable: s.Spec.InstancesRetrievableOrAlias(),
		BindingsRetrievable:  s.Spec.BindingsRetrievableOrAlias(),
		AllowContextUpdates:  s.Spec.AllowContextUpdates,
		Metadata:             meta,
		PlanUpdateable:       s.Spec.PlanUpdatable,
		Plans:                []wirePlan{},
	}
	if dc := s.Spec.DashboardClient; dc != nil && dc.ID != "" {
		w.DashboardClient = &wireDashboardClient{ID: dc.ID, Secret: dc.Secret, RedirectURI: dc.RedirectURIOrAlias()}
	}
	return w
}

// addPlan adds an SFPlan to its service, or records why it cannot be
// served.
func (b *builder) addPlan(p *osbv1alpha1.SFPlan) {
	key := objectKey(p)
	svc := b.snap.services[p.Spec.ServiceID]
	if reason := b.planProblem(p, svc); reason != "" {
		b.problemf("SFPlan %s: %s", key, reason)
		return
	}
	plan, wire, err := buildPlan(p, svc)
	if err != nil {
		b.problemf("SFPlan %s: %v; not served", key, err)
		return
	}
	b.planNames[svc.ID+"\x00"+p.Spec.Name] = true
	b.snap.plans[plan.ID] = plan
	svc.Plans = append(svc.Plans, plan)
	b.wires[svc.ID].Plans = append(b.wires[svc.ID].Plans, wire)
}

// planProblem says why an SFPlan of svc (nil: not in the catalog) cannot
// be served, or "".
func (b *builder) planProblem(p *osbv1alpha1.SFPlan, svc *Service) string {
	switch {
	case notReady(p, p.Status.Conditions):
		return "Ready is False; not served"
	case svc == nil:
		return fmt.Sprintf("service %q is not in the catalog; not served", p.Spec.ServiceID)
	case p.Spec.ID == "" || p.Spec.Name == "" || p.Spec.Description == "":
		return "id, name and description must not be empty"
	case b.snap.plans[p.Spec.ID] != nil:
		return fmt.Sprintf("plan id %q is already used by another SFPlan", p.Spec.ID)
	case b.planNames[svc.ID+"\x00"+p.Spec.Name]:
		return fmt.Sprintf("plan name %q is already used in service %q", p.Spec.Name, svc.Name)
	}
	return ""
}

// sortPlans sorts the plans of every service by name.
func (b *builder) sortPlans() {
	for _, svc := range b.snap.services {
		sort.Slice(svc.Plans, func(i, j int) bool { return svc.Plans[i].Name < svc.Plans[j].Name })
		w := b.wires[svc.ID]
		sort.Slice(w.Plans, func(i, j int) bool { return w.Plans[i].Name < w.Plans[j].Name })
	}
}

// encode drops the services without plans and writes the catalog body,
// sorted by service name, and its ETag. svcs are the SFServices in the
// order they were added.
func (b *builder) encode(svcs []osbv1alpha1.SFService) {
	out := wireCatalog{Services: []wireService{}}
	for i := range svcs {
		s := &svcs[i]
		w, ok := b.wires[s.Spec.ID]
		if !ok {
			continue
		}
		delete(b.wires, s.Spec.ID)
		if len(w.Plans) == 0 {
			b.problemf("SFService %s: no plan is served; an offering needs at least one", objectKey(s))
			delete(b.snap.services, s.Spec.ID)
			continue
		}
		out.Services = append(out.Services, *w)
	}
	sort.SliceStable(out.Services, func(i, j int) bool { return out.Services[i].Name < out.Services[j].Name })
	body, err := json.Marshal(out)
	if err != nil {
		// Every part was validated as JSON above; this cannot happen.
		panic(fmt.Sprintf("marshal catalog: %v", err))
	}
	sum := sha256.Sum256(body)
	b.snap.JSON = body
	b.snap.ETag = `"` + hex.EncodeToString(sum[:12]) + `"`
}

// buildPlan reads an SFPlan into the broker's view and the catalog wire
// form.
func buildPlan(p *osbv1alpha1.SFPlan, svc *Service) (*Plan, wirePlan, error) {
	var m manager
	if p.Spec.Manager != nil && len(p.Spec.Manager.Raw) > 0 {
		if err := json.Unmarshal(p.Spec.Manager.Raw, &m); err != nil {
			return nil, wirePlan{}, fmt.Errorf("manager: %w", err)
		}
	}
	plan := &Plan{
		ID:                 p.Spec.ID,
		Name:               p.Spec.Name,
		ServiceID:          p.Spec.ServiceID,
		Bindable:           p.Spec.Bindable,
		PlanUpdatable:      p.Spec.PlanUpdatable || svc.PlanUpdatable,
		Async:              bool(m.Async),
		AsyncBinding:       bool(m.AsyncBinding),
		RequiresApp:        bool(m.RequiresApp),
		UpdatePredecessors: m.Settings.UpdatePredecessors,
	}
	if t := m.Settings.DashboardURLTemplate; t != "" {
		decoded, err := base64.StdEncoding.DecodeString(t)
		if err != nil {
			return nil, wirePlan{}, fmt.Errorf("manager.settings.dashboard_url_template is not base64: %w", err)
		}
		plan.DashboardURLTemplate = string(decoded)
	}
	if mi := p.Spec.MaintenanceInfo; mi != nil {
		plan.MaintenanceVersion, plan.MaintenanceDescription = mi.Version, mi.Description
	}
	var err error
	if s := p.Spec.Schemas; s != nil {
		if s.Instance != nil {
			if plan.CreateSchema, err = compileParameters(s.Instance.Create); err != nil {
				return nil, wirePlan{}, fmt.Errorf("schemas.service_instance.create: %w", err)
			}
			if plan.UpdateSchema, err = compileParameters(s.Instance.Update); err != nil {
				return nil, wirePlan{}, fmt.Errorf("schemas.service_instance.update: %w", err)
			}
		}
		if s.Binding != nil {
			if plan.BindSchema, err = compileParameters(s.Binding.Create); err != nil {
				return nil, wirePlan{}, fmt.Errorf("schemas.service_binding.create: %w", err)
			}
		}
	}
	meta, err := objectJSON(p.Spec.Metadata)
	if err != nil {
		return nil, wirePlan{}, fmt.Errorf("metadata: %w", err)
	}
	wire := wirePlan{
		ID:                     p.Spec.ID,
		Name:                   p.Spec.Name,
		Description:            p.Spec.Description,
		Metadata:               meta,
		Free:                   p.Spec.Free,
		Bindable:               p.Spec.Bindable,
		Schemas:                p.Spec.Schemas,
		MaximumPollingDuration: p.Spec.MaximumPollingDuration,
		MaintenanceInfo:        p.Spec.MaintenanceInfo,
	}
	// SFPlan cannot tell "false" from "unset"; only an explicit true
	// overrides the offering, so that the offering's default applies
	// otherwise.
	if p.Spec.PlanUpdatable {
		wire.PlanUpdateable = &p.Spec.PlanUpdatable
	}
	return plan, wire, nil
}

func compileParameters(s *osbv1alpha1.Schema) (*Schema, error) {
	if s == nil || s.Parameters == nil || len(s.Parameters.Raw) == 0 {
		return nil, nil
	}
	return CompileSchema(s.Parameters.Raw)
}

// objectJSON returns raw as compact JSON when it is a JSON object, nil when
// it is empty, and an error otherwise.
func objectJSON(raw *runtime.RawExtension) (json.RawMessage, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	trimmed := bytes.TrimSpace(raw.Raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, fmt.Errorf("not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// notReady reports whether obj carries Ready=False for its current
// generation. An object the catalog controller has not judged yet is served:
// the broker validates what it needs itself.
func notReady(obj metav1.Object, conditions []metav1.Condition) bool {
	c := apimeta.FindStatusCondition(conditions, ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == obj.GetGeneration()
}

func objectKey(obj metav1.Object) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}
