package marketplace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/marketplace"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// waitOffering waits until the Offering called name satisfies ok (which
// says what it still misses), and returns it.
func waitOffering(t *testing.T, name, what string, ok func(o *marketplacev1alpha1.Offering) string) *marketplacev1alpha1.Offering {
	t.Helper()
	o := &marketplacev1alpha1.Offering{}
	last := "the Offering does not exist"
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
			if apierrors.IsNotFound(err) {
				last = "the Offering does not exist"
				return false, nil
			}
			return false, err
		}
		last = ok(o)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("Offering %s: waiting for %s: %v; last: %s", name, what, err, last)
	}
	return o
}

// waitGone waits until the Offering called name no longer exists.
func waitGone(t *testing.T, name, why string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, &marketplacev1alpha1.Offering{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("Offering %s was not deleted (%s): %v", name, why, err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// widgetCRD is an onboarding-cluster CRD of a provider's kind whose spec
// has the property marker.
func widgetCRD(group, marker string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:        "object",
					Description: "Widget is a test service.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{marker}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							marker: {Type: "string", Description: "the size of the widget", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"small"`)}, {Raw: []byte(`"large"`)}}},
						}},
						"status": {Type: "object", XPreserveUnknownFields: ptr(true)},
					},
				}},
			}},
		},
	}
}

// runs counts the calls of unique.
var runs atomic.Int64

// unique returns base with a suffix no other call in this process returns,
// so that a test run again against the same API server (go test -count=N)
// does not meet the objects of its earlier runs, which are still being
// deleted (no namespace controller runs here).
func unique(base string) string {
	return fmt.Sprintf("%s-%d", base, runs.Add(1))
}

func ptr[T any](v T) *T { return &v }

// setProviderStatus writes the ServiceProvider's served kinds and Ready
// condition, as the provider's init and the operator would.
func setProviderStatus(t *testing.T, name string, gvk metav1.GroupVersionKind, ready metav1.ConditionStatus, reason string) {
	t.Helper()
	setProviderKinds(t, name, []metav1.GroupVersionKind{gvk}, ready, reason)
}

// setProviderKinds is setProviderStatus for several kinds.
func setProviderKinds(t *testing.T, name string, gvks []metav1.GroupVersionKind, ready metav1.ConditionStatus, reason string) {
	t.Helper()
	ctx := context.Background()
	sp := &providerv1alpha1.ServiceProvider{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil {
		t.Fatal(err)
	}
	sp.Status.Resources = gvks
	apimeta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{Type: string(providerv1alpha1.ConditionReady),
		Status: ready, Reason: reason, Message: "test says " + reason, ObservedGeneration: sp.Generation})
	if err := k8s.Status().Update(ctx, sp); err != nil {
		t.Fatalf("update status of ServiceProvider %s: %v", name, err)
	}
}

// specProperty returns the schema of property name in a kind's spec
// schema, or nil.
func specProperty(k marketplacev1alpha1.OfferedKind, name string) map[string]any {
	if k.Schema == nil {
		return nil
	}
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(k.Schema.Raw, &s); err != nil {
		return nil
	}
	return s.Properties[name]
}

// TestServiceProviderOffering: a ServiceProvider whose status.resources
// names a CRD of the onboarding cluster appears as an Offering with that
// kind's spec schema, its image tag as version and its health; the
// Offering follows the provider's Ready condition, is put back when
// deleted, and goes away with the provider.
func TestServiceProviderOffering(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	spName, group := unique("widgets"), unique("widgets")+".sample.example.invalid"
	crd := widgetCRD(group, "widgetSize")
	create(t, crd)
	sp := &providerv1alpha1.ServiceProvider{
		ObjectMeta: metav1.ObjectMeta{Name: spName, Annotations: map[string]string{
			marketplacev1alpha1.AnnotationDisplayName: "Widgets",
		}},
		Spec: providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{
			Image: "registry.example.com:5000/providers/widgets:v1.2.3"}},
	}
	create(t, sp)
	gvk := metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Widget"}
	setProviderStatus(t, sp.Name, gvk, metav1.ConditionTrue, "Available")

	start := time.Now()
	o := waitOffering(t, "sp-"+spName, "the kind with its schema, Ready", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Kinds) != 1 {
			return fmt.Sprintf("kinds = %+v", o.Spec.Kinds)
		}
		if p := specProperty(o.Spec.Kinds[0], "widgetSize"); p == nil || p["description"] != "the size of the widget" {
			return fmt.Sprintf("kinds[0].schema = %s, want the CRD's spec with widgetSize", o.Spec.Kinds[0].Schema)
		}
		if !o.Spec.Ready {
			return "spec.ready is false"
		}
		return ""
	})
	t.Logf("the Offering appeared with its schema after %v", time.Since(start).Round(time.Millisecond))
	k := o.Spec.Kinds[0]
	if k.Group != group || k.Version != "v1alpha1" || k.Kind != "Widget" || k.Plural != "widgets" || k.Scope != "Namespaced" {
		t.Errorf("kinds[0] = %s/%s %s %s %s, want %s/v1alpha1 Widget widgets Namespaced", k.Group, k.Version, k.Kind, k.Plural, k.Scope, group)
	}
	var schema map[string]any
	if err := json.Unmarshal(k.Schema.Raw, &schema); err != nil {
		t.Fatal(err)
	}
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "widgetSize" {
		t.Errorf("schema.required = %v, want [widgetSize]", schema["required"])
	}
	if enum, _ := specProperty(k, "widgetSize")["enum"].([]any); len(enum) != 2 || enum[0] != "small" || enum[1] != "large" {
		t.Errorf("schema of widgetSize has enum %v, want [small large]", enum)
	}
	if o.Spec.Source != (marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceServiceProvider, Name: spName}) {
		t.Errorf("source = %+v", o.Spec.Source)
	}
	if o.Spec.Version != "v1.2.3" || o.Spec.DisplayName != "Widgets" || o.Spec.Description != "Widget is a test service." {
		t.Errorf("version, displayName, description = %q, %q, %q; want v1.2.3, Widgets and the CRD's description", o.Spec.Version, o.Spec.DisplayName, o.Spec.Description)
	}
	if o.Labels[marketplacev1alpha1.LabelSourceKind] != "ServiceProvider" || o.Labels[marketplacev1alpha1.LabelSourceName] != spName {
		t.Errorf("labels = %v", o.Labels)
	}
	waitOffering(t, "sp-"+spName, "status Ready=True mirrored", func(o *marketplacev1alpha1.Offering) string {
		c := apimeta.FindStatusCondition(o.Status.Conditions, marketplacev1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Available" || o.Status.ObservedGeneration != o.Generation {
			return fmt.Sprintf("status = %+v, generation %d", o.Status, o.Generation)
		}
		return ""
	})

	setProviderStatus(t, sp.Name, gvk, metav1.ConditionFalse, "DeploymentUnavailable")
	waitOffering(t, "sp-"+spName, "Ready=False mirrored", func(o *marketplacev1alpha1.Offering) string {
		c := apimeta.FindStatusCondition(o.Status.Conditions, marketplacev1alpha1.ConditionReady)
		if o.Spec.Ready || c == nil || c.Status != metav1.ConditionFalse || c.Reason != "DeploymentUnavailable" {
			return fmt.Sprintf("ready = %v, conditions = %+v", o.Spec.Ready, o.Status.Conditions)
		}
		return ""
	})

	// A changed schema in the CRD reaches the Offering.
	cur := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), cur); err != nil {
		t.Fatal(err)
	}
	props := cur.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	props.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	cur.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = props
	if err := k8s.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitOffering(t, "sp-"+spName, "the CRD's new property", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Kinds) != 1 || specProperty(o.Spec.Kinds[0], "color") == nil {
			return "no property color in the schema"
		}
		// The status is written too, so no write of this change is
		// pending when the Offering is deleted below: only the watch of
		// Offerings can put it back.
		if o.Status.ObservedGeneration != o.Generation {
			return fmt.Sprintf("status.observedGeneration %d, generation %d", o.Status.ObservedGeneration, o.Generation)
		}
		return ""
	})

	// An Offering someone deleted is put back.
	if err := k8s.Delete(ctx, o); err != nil {
		t.Fatal(err)
	}
	waitOffering(t, "sp-"+spName, "to be put back", func(n *marketplacev1alpha1.Offering) string {
		if n.UID == o.UID {
			return "still the deleted Offering"
		}
		return ""
	})

	if err := k8s.Delete(ctx, sp); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "sp-"+spName, "its ServiceProvider was deleted")
}

// schemaJSON is a plan parameter schema with one property.
func schemaJSON(property string, withSchema bool) *runtime.RawExtension {
	s := map[string]any{"type": "object", "properties": map[string]any{property: map[string]any{"type": "string"}}}
	if withSchema {
		s["$schema"] = "http://json-schema.org/draft-06/schema#"
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return &runtime.RawExtension{Raw: raw}
}

func sfService(namespace, name, id string) *osbv1alpha1.SFService {
	return &osbv1alpha1.SFService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: osbv1alpha1.SFServiceSpec{Name: name, ID: id, Description: "The " + name + " service", Bindable: true,
			PlanUpdatable: true, Tags: []string{"test", name}, Metadata: &runtime.RawExtension{Raw: []byte(`{"displayName":"` + strings.ToUpper(name) + `"}`)}},
	}
}

func sfPlan(namespace, name, id, serviceID string, params *runtime.RawExtension) *osbv1alpha1.SFPlan {
	return &osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: osbv1alpha1.SFPlanSpec{Name: name, ID: id, ServiceID: serviceID, Description: "Plan " + name,
			Free: true, Bindable: true,
			Schemas: &osbv1alpha1.ServiceSchemas{
				Instance: &osbv1alpha1.ServiceInstanceSchema{Create: &osbv1alpha1.Schema{Parameters: params}, Update: &osbv1alpha1.Schema{Parameters: schemaJSON("update", true)}},
				Binding:  &osbv1alpha1.ServiceBindingSchema{Create: &osbv1alpha1.Schema{Parameters: schemaJSON("bind", true)}},
			},
			Templates: []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: "{{ .instance.metadata.name }}"}},
		},
	}
}

func namespace(t *testing.T, name string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// planNames lists the names of an Offering's plans.
func planNames(o *marketplacev1alpha1.Offering) []string {
	var out []string
	for _, p := range o.Spec.Plans {
		out = append(out, p.Name)
	}
	return out
}

// hasProperty reports whether a plan schema has the property.
func hasProperty(j *apiextensionsv1.JSON, property string) bool {
	if j == nil {
		return false
	}
	var s struct {
		Schema     string                    `json:"$schema"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(j.Raw, &s); err != nil {
		return false
	}
	_, ok := s.Properties[property]
	return ok && s.Schema != ""
}

// TestSFServiceOffering: an SFService with a valid SFPlan appears with the
// plan and its schemas; a plan the catalog finds invalid (a schema without
// $schema) never appears while the valid plan of the same service does;
// changing a plan updates the Offering; fixing the invalid plan adds it;
// deleting the service removes the Offering.
func TestSFServiceOffering(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	ns := unique("catalog-a")
	namespace(t, ns)
	// The invalid plan exists before anything else, so every Offering the
	// controller ever writes for the service was computed with it present.
	bad := sfPlan(ns, "broken", "plan-broken", "svc-db", schemaJSON("size", false))
	create(t, bad)
	create(t, sfService(ns, "db", "svc-db"))
	create(t, sfPlan(ns, "small", "plan-small", "svc-db", schemaJSON("size", true)))
	name := "sf-" + ns + "-db"

	sawInvalid := false
	o := waitOffering(t, name, "the valid plan", func(o *marketplacev1alpha1.Offering) string {
		for _, p := range o.Spec.Plans {
			if p.ID == "plan-broken" {
				sawInvalid = true
			}
		}
		if got := planNames(o); len(got) != 1 || got[0] != "small" {
			return fmt.Sprintf("plans %v", got)
		}
		return ""
	})
	if sawInvalid {
		t.Error("the invalid plan broken appeared in the Offering")
	}
	p := o.Spec.Plans[0]
	if p.ID != "plan-small" || p.Description != "Plan small" || !p.Free || !p.Bindable || p.PlanUpdatable {
		t.Errorf("plan = %+v, want id plan-small, free and bindable, not plan-updatable", p)
	}
	if p.Schemas == nil || !hasProperty(p.Schemas.InstanceCreate, "size") || !hasProperty(p.Schemas.InstanceUpdate, "update") || !hasProperty(p.Schemas.BindingCreate, "bind") {
		t.Errorf("plan schemas = %+v, want the SFPlan's create, update and bind schemas", p.Schemas)
	}
	if o.Spec.ServiceID != "svc-db" || o.Spec.DisplayName != "db" || o.Spec.Description != "The db service" || !o.Spec.Bindable ||
		!o.Spec.PlanUpdatable || !o.Spec.Ready || len(o.Spec.Tags) != 2 || o.Spec.Metadata == nil || !strings.Contains(string(o.Spec.Metadata.Raw), `"DB"`) {
		t.Errorf("spec = %+v, want the SFService's fields", o.Spec)
	}
	if o.Spec.Source != (marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceSFService, Name: "db", Namespace: ns}) {
		t.Errorf("source = %+v", o.Spec.Source)
	}

	// A changed plan reaches the Offering.
	small := &osbv1alpha1.SFPlan{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "small"}, small); err != nil {
		t.Fatal(err)
	}
	small.Spec.Description = "Plan small, now bigger"
	small.Spec.Schemas.Instance.Create.Parameters = schemaJSON("cpu", true)
	if err := k8s.Update(ctx, small); err != nil {
		t.Fatal(err)
	}
	waitOffering(t, name, "the changed plan", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Plans) != 1 || o.Spec.Plans[0].Description != "Plan small, now bigger" || !hasProperty(o.Spec.Plans[0].Schemas.InstanceCreate, "cpu") {
			return fmt.Sprintf("plans = %+v", o.Spec.Plans)
		}
		return ""
	})

	// Fixed, the plan appears: it was left out for being invalid.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
		t.Fatal(err)
	}
	bad.Spec.Schemas.Instance.Create.Parameters = schemaJSON("size", true)
	if err := k8s.Update(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitOffering(t, name, "the fixed plan", func(o *marketplacev1alpha1.Offering) string {
		if got := planNames(o); len(got) != 2 || got[0] != "broken" || got[1] != "small" {
			return fmt.Sprintf("plans %v", got)
		}
		return ""
	})

	if err := k8s.Delete(ctx, &osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, name, "its SFService was deleted")
}

// TestBadSourcesDoNotStopOthers: invalid catalog entries (a plan with a
// template that does not parse, a service whose id another one has, a
// service without a valid plan) and a ServiceProvider naming a CRD that
// does not exist never stop the controller: a valid service created after
// them appears, and none of the invalid ones does.
func TestBadSourcesDoNotStopOthers(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	ns, ghostName := unique("catalog-b"), unique("ghost")
	namespace(t, ns)
	lonely := sfService(ns, "lonely", "svc-lonely")
	create(t, lonely)
	badTemplate := sfPlan(ns, "bad-template", "plan-bad-template", "svc-lonely", schemaJSON("size", true))
	badTemplate.Spec.Templates[0].Content = "{{ .instance.metadata.name "
	create(t, badTemplate)
	create(t, sfService(ns, "first", "svc-dup"))
	create(t, sfPlan(ns, "first-plan", "plan-first", "svc-dup", schemaJSON("size", true)))
	create(t, &providerv1alpha1.ServiceProvider{
		ObjectMeta: metav1.ObjectMeta{Name: ghostName},
		Spec:       providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "registry.example.com/ghost@sha256:0123"}},
	})
	setProviderStatus(t, ghostName, metav1.GroupVersionKind{Group: "ghosts.example.invalid", Version: "v1", Kind: "Ghost"}, metav1.ConditionTrue, "Available")

	// The catalog refuses both services of a duplicated id.
	create(t, sfService(ns, "second", "svc-dup"))
	create(t, sfService(ns, "good", "svc-good"))
	create(t, sfPlan(ns, "good-plan", "plan-good", "svc-good", schemaJSON("size", true)))

	waitOffering(t, "sf-"+ns+"-good", "the valid service", func(o *marketplacev1alpha1.Offering) string {
		if got := planNames(o); len(got) != 1 || got[0] != "good-plan" {
			return fmt.Sprintf("plans %v", got)
		}
		return ""
	})
	ghost := waitOffering(t, "sp-"+ghostName, "the provider without CRD", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Kinds) != 1 {
			return fmt.Sprintf("kinds %+v", o.Spec.Kinds)
		}
		return ""
	})
	if k := ghost.Spec.Kinds[0]; k.Kind != "Ghost" || k.Schema != nil || k.Plural != "" || ghost.Spec.Version != "sha256:0123" {
		t.Errorf("ghost = %+v, version %q; want the kind without schema and the digest as version", k, ghost.Spec.Version)
	}
	// "first" was valid until "second" took its id, so a reconcile between
	// the two may have listed it: it must be gone now. "lonely" and
	// "second" were never valid, so they never appear.
	waitGone(t, "sf-"+ns+"-first", "another service took its id")
	for _, name := range []string{"sf-" + ns + "-lonely", "sf-" + ns + "-second"} {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &marketplacev1alpha1.Offering{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Offering %s of an invalid service: got %v, want NotFound", name, err)
		}
	}
}

// TestOfferingsReadOnlyForTenants: any authenticated user (here a
// ServiceAccount without any binding of its own) may read Offerings and
// may not write them.
func TestOfferingsReadOnlyForTenants(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	tenant := env.ActAs(t, "tenant-a", "someone")
	if err := tenant.List(ctx, &marketplacev1alpha1.OfferingList{}); err != nil {
		t.Errorf("a tenant lists Offerings: %v, want allowed", err)
	}
	o := &marketplacev1alpha1.Offering{ObjectMeta: metav1.ObjectMeta{Name: "fake"},
		Spec: marketplacev1alpha1.OfferingSpec{Source: marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceSFService, Name: "fake"}}}
	if err := tenant.Create(ctx, o); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant creates an Offering: %v, want Forbidden", err)
	}
	if err := tenant.DeleteAllOf(ctx, &marketplacev1alpha1.Offering{}); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant deletes Offerings: %v, want Forbidden", err)
	}
	role := marketplace.ViewerRole()
	if role.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
		t.Errorf("ClusterRole %s labels = %v, want aggregate-to-view", role.Name, role.Labels)
	}
}

// TestKubectlGetOfferings: kubectl lists Offerings by their plural, short
// name and category, with the printer columns.
func TestKubectlGetOfferings(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	printed := unique("printed")
	create(t, &providerv1alpha1.ServiceProvider{
		ObjectMeta: metav1.ObjectMeta{Name: printed, Annotations: map[string]string{marketplacev1alpha1.AnnotationDisplayName: "Printed"}},
		Spec:       providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "registry.example.com/printed:v9.8.7"}},
	})
	setProviderStatus(t, printed, metav1.GroupVersionKind{Group: "printed.example.com", Version: "v1", Kind: "Printed"}, metav1.ConditionFalse, "Starting")
	waitOffering(t, "sp-"+printed, "to exist", func(*marketplacev1alpha1.Offering) string { return "" })
	bin, err := testenv.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	for _, resource := range []string{"offerings", "off", "marketplane"} {
		out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "get", resource).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", resource, err, out)
		}
		lines := strings.Split(string(out), "\n")
		if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "TYPE", "DISPLAY", "NAME", "VERSION", "READY", "AGE"}) {
			t.Errorf("kubectl get %s: header %q, want NAME TYPE DISPLAY NAME VERSION READY AGE", resource, lines[0])
		}
		found := false
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) >= 5 && f[0] == "sp-"+printed {
				found = true
				if f[1] != "ServiceProvider" || f[2] != "Printed" || f[3] != "v9.8.7" || f[4] != "false" {
					t.Errorf("kubectl get %s: row %q, want sp-printed ServiceProvider Printed v9.8.7 false", resource, l)
				}
			}
		}
		if !found {
			t.Errorf("kubectl get %s: no row sp-printed in\n%s", resource, out)
		}
	}
}

// TestProviderWithoutKindsIsNoOffering: a ServiceProvider that registered
// no kinds (the inter-operator, or any provider before its init) offers
// nothing to order, so it has no Offering; once it registers a kind, it has.
func TestProviderWithoutKindsIsNoOffering(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	bare, other := unique("bare"), unique("other")
	for _, name := range []string{bare, other} {
		create(t, &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "registry.example.com/" + name + ":v1"}}})
	}
	// One reconcile computes every Offering: once the other provider's
	// appears, the bare one's would have too.
	setProviderStatus(t, other, metav1.GroupVersionKind{Group: "other.example.com", Version: "v1", Kind: "Other"}, metav1.ConditionTrue, "Ready")
	waitOffering(t, "sp-"+other, "to exist", func(*marketplacev1alpha1.Offering) string { return "" })
	o := &marketplacev1alpha1.Offering{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "sp-" + bare}, o); !apierrors.IsNotFound(err) {
		t.Fatalf("Offering sp-%s of a provider without kinds: get = %v, want NotFound", bare, err)
	}
	setProviderStatus(t, bare, metav1.GroupVersionKind{Group: "bare.example.com", Version: "v1", Kind: "Bare"}, metav1.ConditionTrue, "Ready")
	waitOffering(t, "sp-"+bare, "to exist once it registered a kind", func(o *marketplacev1alpha1.Offering) string {
		if len(o.Spec.Kinds) != 1 || o.Spec.Kinds[0].Kind != "Bare" {
			return fmt.Sprintf("kinds %+v", o.Spec.Kinds)
		}
		return ""
	})
}
