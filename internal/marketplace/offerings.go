package marketplace

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/operator/policy"
	shortnames "github.com/marketplane/marketplane/pkg/names"
)

// Reasons of an Offering's Ready condition that the controller chooses
// itself; a ServiceProvider's own reason is copied as it is.
const (
	// ReasonValid: the SFService and the listed plans pass the catalog's
	// validation.
	ReasonValid = "Valid"
	// ReasonNotReported: the ServiceProvider has no Ready condition yet.
	ReasonNotReported = "NotReported"
)

// wanted is one Offering the sources call for, with its Ready condition.
type wanted struct {
	offering *marketplacev1alpha1.Offering
	ready    metav1.Condition
}

// sources are the objects one reconcile reads.
type sources struct {
	providers []providerv1alpha1.ServiceProvider
	services  []osbv1alpha1.SFService
	plans     []osbv1alpha1.SFPlan
	crds      []apiextensionsv1.CustomResourceDefinition
	// owners is the API group ownership of all providers, as the
	// operator computes it (policy.LoadOwnership); nil owns nothing.
	owners *policy.Ownership
}

// wantedOfferings computes every Offering the sources call for, keyed by
// name. It never fails: what cannot be described (an invalid plan, a
// metadata value that is not an object) is left out, so one bad source
// never hides another.
func wantedOfferings(src sources) map[string]wanted {
	out := map[string]wanted{}
	addProviderOfferings(out, src)
	addServiceOfferings(out, src)
	return out
}

// addProviderOfferings adds the Offering of each ServiceProvider that
// registered kinds of its own groups to out.
func addProviderOfferings(out map[string]wanted, src sources) {
	crdByGK := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range src.crds {
		crd := &src.crds[i]
		crdByGK[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = crd
	}
	owners := src.owners
	if owners == nil {
		owners = policy.Compute(nil)
	}
	for i := range src.providers {
		sp := &src.providers[i]
		// A provider that registered no kinds of its own groups (yet;
		// init registers them) offers nothing a tenant can order: the
		// inter-operator, whose services are offered one by one from its
		// catalog, is one; so is a provider that registered only kinds of
		// groups it does not own.
		if sp.DeletionTimestamp != nil || len(owners.Kinds(policy.KindServiceProvider, sp.Name)) == 0 {
			continue
		}
		w := serviceProviderOffering(sp, crdByGK, owners)
		out[w.offering.Name] = w
	}
}

// addServiceOfferings adds the Offering of each valid SFService with at
// least one valid plan to out.
func addServiceOfferings(out map[string]wanted, src sources) {
	byNamespace := map[string][]osbv1alpha1.SFService{}
	for _, svc := range src.services {
		byNamespace[svc.Namespace] = append(byNamespace[svc.Namespace], svc)
	}
	plansByNamespace := map[string][]osbv1alpha1.SFPlan{}
	for _, plan := range src.plans {
		plansByNamespace[plan.Namespace] = append(plansByNamespace[plan.Namespace], plan)
	}
	// Namespaces and services in a fixed order, so that the rare clash of
	// two names (sf-a-b-c is both a-b/c and a/b-c) is always resolved the
	// same way: the later one gets a name with a hash of its namespace and
	// name.
	namespaces := make([]string, 0, len(byNamespace))
	for ns := range byNamespace {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		services, plans := byNamespace[ns], plansByNamespace[ns]
		sort.Slice(services, func(i, j int) bool { return services[i].Name < services[j].Name })
		for i := range services {
			svc := &services[i]
			if svc.DeletionTimestamp != nil || catalog.ValidateService(svc, services) != nil {
				continue
			}
			valid := validPlans(svc, services, plans)
			// OSB wants at least one plan per service: a service none of
			// whose plans is valid cannot be ordered, so it is no offering.
			if len(valid) == 0 {
				continue
			}
			w := sfServiceOffering(svc, valid)
			if _, taken := out[w.offering.Name]; taken {
				w.offering.Name = shortnames.WithHash("sf-"+svc.Namespace+"-"+svc.Name, svc.Namespace+"/"+svc.Name, maxNameLength)
			}
			out[w.offering.Name] = w
		}
	}
}

// validPlans returns the valid plans of svc that are not being deleted;
// services and plans are those of svc's namespace.
func validPlans(svc *osbv1alpha1.SFService, services []osbv1alpha1.SFService, plans []osbv1alpha1.SFPlan) []*osbv1alpha1.SFPlan {
	var valid []*osbv1alpha1.SFPlan
	for j := range plans {
		plan := &plans[j]
		if plan.DeletionTimestamp != nil || plan.Spec.ServiceID != svc.Spec.ID {
			continue
		}
		if catalog.ValidatePlan(plan, services, plans) != nil {
			continue
		}
		valid = append(valid, plan)
	}
	return valid
}

// newOffering returns an Offering named name with the labels of its source.
func newOffering(name string, source marketplacev1alpha1.Source) *marketplacev1alpha1.Offering {
	labels := map[string]string{
		marketplacev1alpha1.LabelSourceKind: string(source.Kind),
		marketplacev1alpha1.LabelSourceName: labelValue(source.Name),
	}
	if source.Namespace != "" {
		labels[marketplacev1alpha1.LabelSourceNamespace] = source.Namespace
	}
	return &marketplacev1alpha1.Offering{
		TypeMeta:   metav1.TypeMeta{APIVersion: marketplacev1alpha1.GroupVersion.String(), Kind: "Offering"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       marketplacev1alpha1.OfferingSpec{Source: source},
	}
}

// serviceProviderOffering describes sp: its kinds with the spec schemas of
// their CRDs (crdByGK, keyed by group/kind), its image tag and health. Only
// the entries of status.resources whose API group sp owns (owners, the
// operator's rules) are its kinds: the provider writes status.resources
// itself, and an entry of another provider's group would offer that
// provider's kind, with its schema, under sp's name. The entries left out
// are named in the Ready condition's message.
func serviceProviderOffering(sp *providerv1alpha1.ServiceProvider, crdByGK map[string]*apiextensionsv1.CustomResourceDefinition, owners *policy.Ownership) wanted {
	o := newOffering(serviceProviderOfferingName(sp.Name), marketplacev1alpha1.Source{
		Kind: marketplacev1alpha1.SourceServiceProvider, Name: sp.Name})
	o.Spec.DisplayName = sp.Name
	if v := sp.Annotations[marketplacev1alpha1.AnnotationDisplayName]; v != "" {
		o.Spec.DisplayName = v
	}
	o.Spec.Description = sp.Annotations[marketplacev1alpha1.AnnotationDescription]
	o.Spec.Version = imageVersion(sp.Spec.Image)
	o.Spec.OSB = osbSettings(sp.Annotations)
	for _, gvk := range owners.Kinds(policy.KindServiceProvider, sp.Name) {
		k := marketplacev1alpha1.OfferedKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		if crd := crdByGK[gvk.Group+"/"+gvk.Kind]; crd != nil {
			describeKind(&k, crd)
			if o.Spec.Description == "" {
				o.Spec.Description = rootDescription(crd, k.Version)
			}
		}
		o.Spec.Kinds = append(o.Spec.Kinds, k)
	}
	ready := metav1.Condition{Type: marketplacev1alpha1.ConditionReady, Status: metav1.ConditionUnknown,
		Reason: ReasonNotReported, Message: "The ServiceProvider reports no Ready condition yet"}
	if c := apimeta.FindStatusCondition(sp.Status.Conditions, string(providerv1alpha1.ConditionReady)); c != nil {
		ready.Status, ready.Reason, ready.Message = c.Status, c.Reason, c.Message
		if ready.Reason == "" {
			ready.Reason = ReasonNotReported
		}
	}
	o.Spec.Ready = ready.Status == metav1.ConditionTrue
	if left := leftOut(owners.Rejected(policy.KindServiceProvider, sp.Name)); left != "" {
		ready.Message = strings.TrimSuffix(strings.TrimSpace(ready.Message), ".")
		if ready.Message != "" {
			ready.Message += "; "
		}
		ready.Message += left
	}
	return wanted{offering: o, ready: ready}
}

// maxLeftOut bounds how many left-out kinds a Ready message names:
// status.resources is the provider's to write and may be long.
const maxLeftOut = 10

// leftOut describes the status.resources entries that are not offered
// (rejections of spec.accessPolicy.apiGroups, which name no kind, are the
// platform operator's concern and reported on the provider), or "".
func leftOut(rejected []policy.Rejection) string {
	var msgs []string
	n := 0
	for _, r := range rejected {
		if r.Resource == nil {
			continue
		}
		n++
		if len(msgs) < maxLeftOut {
			msgs = append(msgs, fmt.Sprintf("%s (%s)", r.Message, r.Reason))
		}
	}
	if n == 0 {
		return ""
	}
	if n > len(msgs) {
		msgs = append(msgs, fmt.Sprintf("and %d more", n-len(msgs)))
	}
	return "not offered, since the provider does not own their API groups: " + strings.Join(msgs, "; ")
}

// osbSettings reads a ServiceProvider's opt-in to the OSB broker and the
// rights of its bindings from its annotations (AnnotationOSB,
// AnnotationBindingRules). It returns nil for a provider that did not opt
// in. Binding rules that are not a JSON list of PolicyRules, or a rule
// without verbs, keep the offering out of OSB with a message: a binding
// with other rights than the platform operator meant is worse than none.
func osbSettings(annotations map[string]string) *marketplacev1alpha1.OSBSettings {
	if annotations[marketplacev1alpha1.AnnotationOSB] != "true" {
		return nil
	}
	s := &marketplacev1alpha1.OSBSettings{Enabled: true}
	raw := strings.TrimSpace(annotations[marketplacev1alpha1.AnnotationBindingRules])
	if raw == "" {
		return s
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var rules []rbacv1.PolicyRule
	if err := dec.Decode(&rules); err != nil {
		return &marketplacev1alpha1.OSBSettings{Message: fmt.Sprintf("annotation %s is not a JSON list of RBAC PolicyRules: %v",
			marketplacev1alpha1.AnnotationBindingRules, err)}
	}
	for i, r := range rules {
		if len(r.Verbs) == 0 || (len(r.Resources) == 0 && len(r.NonResourceURLs) == 0) {
			return &marketplacev1alpha1.OSBSettings{Message: fmt.Sprintf("annotation %s: rule %d names no verbs or no resources",
				marketplacev1alpha1.AnnotationBindingRules, i)}
		}
	}
	s.BindingRules = rules
	return s
}

// describeKind fills in k's plural, scope and spec schema from crd. The
// version named in status.resources is shown when the CRD serves it, else
// the CRD's storage version.
func describeKind(k *marketplacev1alpha1.OfferedKind, crd *apiextensionsv1.CustomResourceDefinition) {
	k.Plural, k.Scope = crd.Spec.Names.Plural, string(crd.Spec.Scope)
	version := crdVersion(crd, k.Version)
	if version == nil {
		return
	}
	k.Version = version.Name
	if version.Schema == nil || version.Schema.OpenAPIV3Schema == nil {
		return
	}
	spec, ok := version.Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		return
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return
	}
	k.Schema = &apiextensionsv1.JSON{Raw: raw}
}

// crdVersion returns the served version of crd called name, or the storage
// version when the CRD does not serve name.
func crdVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	var storage *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Name == name && v.Served {
			return v
		}
		if v.Storage {
			storage = v
		}
	}
	return storage
}

// rootDescription is the description of the kind's schema, which
// controller-gen takes from the Go type's comment.
func rootDescription(crd *apiextensionsv1.CustomResourceDefinition, version string) string {
	v := crdVersion(crd, version)
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return ""
	}
	return v.Schema.OpenAPIV3Schema.Description
}

// imageVersion is the tag of an image reference, or its digest when it has
// no tag, or "" when it has neither.
func imageVersion(image string) string {
	ref, digest, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return digest
}

// sfServiceOffering describes svc with its valid plans.
func sfServiceOffering(svc *osbv1alpha1.SFService, plans []*osbv1alpha1.SFPlan) wanted {
	o := newOffering(sfServiceOfferingName(svc.Namespace, svc.Name), marketplacev1alpha1.Source{
		Kind: marketplacev1alpha1.SourceSFService, Name: svc.Name, Namespace: svc.Namespace})
	o.Spec.DisplayName = svc.Spec.Name
	o.Spec.Description = svc.Spec.Description
	o.Spec.Ready = true
	o.Spec.ServiceID = svc.Spec.ID
	o.Spec.Bindable = svc.Spec.Bindable
	o.Spec.PlanUpdatable = svc.Spec.PlanUpdatable
	o.Spec.Tags = svc.Spec.Tags
	o.Spec.Metadata = objectJSON(svc.Spec.Metadata)
	sort.Slice(plans, func(i, j int) bool { return plans[i].Spec.Name < plans[j].Spec.Name })
	for _, plan := range plans {
		p := marketplacev1alpha1.Plan{
			ID: plan.Spec.ID, Name: plan.Spec.Name, Description: plan.Spec.Description,
			Free: plan.Spec.Free, Bindable: plan.Spec.Bindable, PlanUpdatable: plan.Spec.PlanUpdatable,
			Metadata: objectJSON(plan.Spec.Metadata),
		}
		if s := planSchemas(plan.Spec.Schemas); s != nil {
			p.Schemas = s
		}
		o.Spec.Plans = append(o.Spec.Plans, p)
	}
	ready := metav1.Condition{Type: marketplacev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: fmt.Sprintf("The SFService and %d of its plans pass the catalog's validation", len(plans))}
	return wanted{offering: o, ready: ready}
}

// planSchemas copies the parameter schemas of a plan, or returns nil when it
// has none.
func planSchemas(s *osbv1alpha1.ServiceSchemas) *marketplacev1alpha1.PlanSchemas {
	if s == nil {
		return nil
	}
	params := func(sch *osbv1alpha1.Schema) *apiextensionsv1.JSON {
		if sch == nil {
			return nil
		}
		return objectJSON(sch.Parameters)
	}
	out := &marketplacev1alpha1.PlanSchemas{}
	if s.Instance != nil {
		out.InstanceCreate, out.InstanceUpdate = params(s.Instance.Create), params(s.Instance.Update)
	}
	if s.Binding != nil {
		out.BindingCreate = params(s.Binding.Create)
	}
	if out.InstanceCreate == nil && out.InstanceUpdate == nil && out.BindingCreate == nil {
		return nil
	}
	return out
}

// objectJSON returns raw as canonical JSON when it is a JSON object, else
// nil: the Offering's free-form fields are objects, and a value of another
// type would make the API server refuse the whole Offering.
func objectJSON(raw *runtime.RawExtension) *apiextensionsv1.JSON {
	if raw == nil || len(raw.Raw) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw.Raw, &m); err != nil || m == nil {
		return nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: out}
}
