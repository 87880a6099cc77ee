/*
Copyright 2026 The Marketplane Authors.
*/

package crds_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// sfTestdata holds the Service Fabrik fixtures: the seed-05 examples
// (seed-*.yaml), objects in the current Service Fabrik spelling
// (current-*.yaml) and objects as the broker and provisioner write them
// (broker-*.yaml).
const sfTestdata = "testdata/servicefabrik"

// TestServiceFabrikAPIs installs every CRD into one real API server and shows
// that Service Fabrik manifests apply unchanged, that the Go types read them,
// and that each validation rule rejects what it should with a message a user
// understands, and nothing more.
func TestServiceFabrikAPIs(t *testing.T) {
	c := apiServer(t)

	t.Run("CRDs", func(t *testing.T) { testSFCRDs(t, c) })
	t.Run("RoundTrip", func(t *testing.T) { testSFRoundTrip(t, c) })
	t.Run("DeprecatedSpellings", func(t *testing.T) { testSFDeprecatedSpellings(t, c) })
	t.Run("Validation", func(t *testing.T) { testSFValidation(t, c) })
	t.Run("PrinterColumns", func(t *testing.T) { testSFPrinterColumns(t, c) })
}

// testSFCRDs checks that each CRD is established under its short names (no
// clash with another resource), is namespaced, carries its status subresource
// and is labelled for the cluster it belongs to.
func testSFCRDs(t *testing.T, c *testenv.Cluster) {
	type crdFacts struct {
		Cluster           string
		Scope             apiextensionsv1.ResourceScope
		ShortNames        []string
		Categories        []string
		StatusSubresource bool
		Established       bool
		NamesAccepted     bool
	}
	facts := func(crd *apiextensionsv1.CustomResourceDefinition) crdFacts {
		f := crdFacts{
			Cluster:    crd.Labels[crds.ClusterLabel],
			Scope:      crd.Spec.Scope,
			ShortNames: crd.Spec.Names.ShortNames,
			Categories: crd.Spec.Names.Categories,
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1alpha1" && v.Subresources != nil && v.Subresources.Status != nil {
				f.StatusSubresource = true
			}
		}
		for _, cond := range crd.Status.Conditions {
			switch cond.Type {
			case apiextensionsv1.Established:
				f.Established = cond.Status == apiextensionsv1.ConditionTrue
			case apiextensionsv1.NamesAccepted:
				f.NamesAccepted = cond.Status == apiextensionsv1.ConditionTrue
			}
		}
		return f
	}
	installed := func(cluster, short string) crdFacts {
		return crdFacts{
			Cluster:           cluster,
			Scope:             apiextensionsv1.NamespaceScoped,
			ShortNames:        []string{short},
			Categories:        []string{"servicefabrik"},
			StatusSubresource: true,
			Established:       true,
			NamesAccepted:     true,
		}
	}

	tests := map[string]struct {
		reason string
		want   crdFacts
	}{
		"sfservices.osb.servicefabrik.io": {
			reason: "The service catalog lives on the platform cluster.",
			want:   installed(crds.ClusterPlatform, "sfsvc"),
		},
		"sfplans.osb.servicefabrik.io": {
			reason: "The plan catalog lives on the platform cluster.",
			want:   installed(crds.ClusterPlatform, "sfp"),
		},
		"sfserviceinstances.osb.servicefabrik.io": {
			reason: "Instances are the tenants' API and live on the onboarding cluster.",
			want:   installed(crds.ClusterOnboarding, "sfsi"),
		},
		"sfservicebindings.osb.servicefabrik.io": {
			reason: "Bindings are the tenants' API and live on the onboarding cluster.",
			want:   installed(crds.ClusterOnboarding, "sfsb"),
		},
		"sfclusters.resource.servicefabrik.io": {
			reason: "The cluster registry lives on the platform cluster.",
			want:   installed(crds.ClusterPlatform, "sfc"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Client.Get(t.Context(), client.ObjectKey{Name: name}, crd); err != nil {
				t.Fatalf("get CRD %s: %v", name, err)
			}
			if diff := cmp.Diff(tc.want, facts(crd)); diff != "" {
				t.Errorf("%s\nCRD %s: -want, +got:\n%s", tc.reason, name, diff)
			}
			embedded, err := crds.ForCluster(tc.want.Cluster)
			if err != nil {
				t.Fatalf("crds.ForCluster(%q): %v", tc.want.Cluster, err)
			}
			if !sfContainsCRD(embedded, name) {
				t.Errorf("%s\ncrds.ForCluster(%q) does not return %s", tc.reason, tc.want.Cluster, name)
			}
		})
	}
}

// testSFRoundTrip creates each fixture, writes its status through the status
// subresource as the inter-operator would, and reads it back: no field the
// manifest set may be lost or changed.
func testSFRoundTrip(t *testing.T, c *testenv.Cluster) {
	tests := map[string]struct {
		reason string
		file   string
	}{
		"SeedSFService": {
			reason: "The seed's SFService, with the older spellings instanceRetrievable, bindingRetrievable and dashboardClient.redirectURI, must apply unchanged.",
			file:   "seed-sfservice.yaml",
		},
		"SeedSFPlan": {
			reason: "The seed's SFPlan, with its inline gotemplate, parameter schema, manager and context, must apply unchanged.",
			file:   "seed-sfplan.yaml",
		},
		"SeedSFServiceInstance": {
			reason: "The seed's SFServiceInstance must apply unchanged.",
			file:   "seed-sfserviceinstance.yaml",
		},
		"SeedSFServiceBinding": {
			reason: "The seed's SFServiceBinding must apply unchanged.",
			file:   "seed-sfservicebinding.yaml",
		},
		"SeedSFClusterAndSecret": {
			reason: "The seed's SFCluster and its kubeconfig Secret must apply unchanged.",
			file:   "seed-sfcluster.yaml",
		},
		"CurrentSFService": {
			reason: "An SFService in the current Service Fabrik spelling must apply unchanged.",
			file:   "current-sfservice.yaml",
		},
		"CurrentSFPlan": {
			reason: "An SFPlan that uses every Service Fabrik field, template action and template type must apply unchanged.",
			file:   "current-sfplan.yaml",
		},
		"CurrentSFCluster": {
			reason: "An SFCluster with capacities, a scheduling limit, a cordon and a full status must apply unchanged.",
			file:   "current-sfcluster.yaml",
		},
		"BrokerSFServiceInstance": {
			reason: "An SFServiceInstance with every spec and status field must apply unchanged.",
			file:   "broker-sfserviceinstance.yaml",
		},
		"BrokerSFServiceBinding": {
			reason: "An SFServiceBinding with every spec and status field must apply unchanged.",
			file:   "broker-sfservicebinding.yaml",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, want := range sfDecodeFixture(t, tc.file) {
				got := sfCreateWithStatus(t, c, want)
				if diffs := testenv.FieldDiffs(want.Object, got.Object); len(diffs) > 0 {
					t.Errorf("%s\n%s %s lost or changed fields:\n%s", tc.reason, want.GetKind(), sfKey(want), strings.Join(diffs, "\n"))
				}
				// The Go types must know every field the manifest uses, or
				// a controller reading and writing the object would drop it.
				typed, err := c.Scheme.New(got.GroupVersionKind())
				if err != nil {
					t.Fatalf("no Go type for %s: %v", got.GroupVersionKind(), err)
				}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(got.Object, typed, true); err != nil {
					t.Errorf("%s\nthe Go type of %s does not hold %s: %v", tc.reason, want.GetKind(), sfKey(want), err)
				}
			}
		})
	}
}

// testSFDeprecatedSpellings reads SFServices written in either spelling with
// the Go types and checks the effective values the broker will serve.
func testSFDeprecatedSpellings(t *testing.T, c *testenv.Cluster) {
	type effective struct {
		InstancesRetrievable bool
		BindingsRetrievable  bool
		RedirectURI          string
	}
	tests := map[string]struct {
		reason string
		file   string
		edits  []sfEdit
		want   effective
	}{
		"OlderSpelling": {
			reason: "The seed's instanceRetrievable, bindingRetrievable and redirectURI must take effect although only the older spelling is set.",
			file:   "seed-sfservice.yaml",
			want:   effective{InstancesRetrievable: true, BindingsRetrievable: true, RedirectURI: "https://sap.com/"},
		},
		"CurrentSpelling": {
			reason: "The current spelling takes effect as it is.",
			file:   "current-sfservice.yaml",
			want:   effective{InstancesRetrievable: true, BindingsRetrievable: true, RedirectURI: "https://dashboard.example.com/redis"},
		},
		"OlderSpellingFalse": {
			reason: "An older spelling set to false is honoured when the current one is absent.",
			file:   "seed-sfservice.yaml",
			edits:  []sfEdit{sfSet(false, "spec", "instanceRetrievable"), sfRemove("spec", "bindingRetrievable")},
			want:   effective{InstancesRetrievable: false, BindingsRetrievable: false, RedirectURI: "https://sap.com/"},
		},
		"BothSpellingsAgreeing": {
			reason: "Both spellings may be set when they agree.",
			file:   "current-sfservice.yaml",
			edits: []sfEdit{
				sfSet(true, "spec", "instanceRetrievable"),
				sfSet(true, "spec", "bindingRetrievable"),
				sfSet("https://dashboard.example.com/redis", "spec", "dashboardClient", "redirectURI"),
			},
			want: effective{InstancesRetrievable: true, BindingsRetrievable: true, RedirectURI: "https://dashboard.example.com/redis"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := sfFixtureObject(t, tc.file, "spelling-"+strings.ToLower(name))
			for _, e := range tc.edits {
				e(t, obj)
			}
			sfCreateWithStatus(t, c, obj)

			svc := &osbv1alpha1.SFService{}
			if err := c.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), svc); err != nil {
				t.Fatalf("get SFService %s with the Go types: %v", sfKey(obj), err)
			}
			got := effective{
				InstancesRetrievable: svc.Spec.InstancesRetrievableOrAlias(),
				BindingsRetrievable:  svc.Spec.BindingsRetrievableOrAlias(),
				RedirectURI:          svc.Spec.DashboardClient.RedirectURIOrAlias(),
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\neffective values: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// testSFValidation applies edits to valid fixtures, on create or on a later
// update, and checks that the API server rejects exactly the invalid ones,
// naming the field and saying what is wrong. Cases without a wanted message
// show that the rules do not reject what Service Fabrik accepts.
func testSFValidation(t *testing.T, c *testenv.Cluster) {
	type args struct {
		// file is a fixture holding one valid object.
		file string
		// onCreate edits the object before it is created.
		onCreate []sfEdit
		// onUpdate edits the created object; when set, the create must
		// succeed and the update is what is judged.
		onUpdate []sfEdit
	}
	type want struct {
		// field is the path the API server must name; empty means the
		// request must succeed.
		field string
		// message is a part of the message the API server must give.
		message string
	}
	const (
		planFile        = "current-sfplan.yaml"
		serviceFile     = "current-sfservice.yaml"
		instanceFile    = "broker-sfserviceinstance.yaml"
		seedInstance    = "seed-sfserviceinstance.yaml"
		bindingFile     = "broker-sfservicebinding.yaml"
		seedBinding     = "seed-sfservicebinding.yaml"
		clusterFile     = "current-sfcluster.yaml"
		templateNeedsIt = "a template needs its text: set content (inline), contentEncoded (base64) or url"
	)
	// The fixture's templates, by index: 0 helm provision, 1 gotemplate bind
	// (contentEncoded), 2 unbind, 3 sources, 4 status, 5 clusterSelector.
	tests := map[string]struct {
		reason string
		args   args
		want   want
	}{
		// SFService.
		"SFServiceIDChanged": {
			reason: "Plans and instances refer to the service id.",
			args:   args{file: serviceFile, onUpdate: []sfEdit{sfSet("another-id", "spec", "id")}},
			want:   want{field: "spec.id", message: "id is immutable: it is the OSB service_id"},
		},
		"SFServiceNameChanged": {
			reason: "The name of a service may change; only its id is fixed.",
			args:   args{file: serviceFile, onUpdate: []sfEdit{sfSet("redis-cache", "spec", "name")}},
		},
		"SFServiceWithoutBindable": {
			reason: "Service Fabrik requires bindable.",
			args:   args{file: serviceFile, onCreate: []sfEdit{sfRemove("spec", "bindable")}},
			want:   want{field: "spec.bindable", message: "Required value"},
		},
		"SFServiceWithoutID": {
			reason: "Service Fabrik requires id.",
			args:   args{file: serviceFile, onCreate: []sfEdit{sfRemove("spec", "id")}},
			want:   want{field: "spec.id", message: "Required value"},
		},
		"SFServiceInstanceRetrievableSpellingsDisagree": {
			reason: "The two spellings of instancesRetrievable must not contradict each other.",
			args:   args{file: serviceFile, onCreate: []sfEdit{sfSet(false, "spec", "instanceRetrievable")}},
			want:   want{field: "spec", message: "instanceRetrievable is the deprecated spelling of instancesRetrievable"},
		},
		"SFServiceBindingRetrievableSpellingsDisagree": {
			reason: "The two spellings of bindingsRetrievable must not contradict each other.",
			args:   args{file: serviceFile, onCreate: []sfEdit{sfSet(false, "spec", "bindingRetrievable")}},
			want:   want{field: "spec", message: "bindingRetrievable is the deprecated spelling of bindingsRetrievable"},
		},
		"SFServiceRedirectURISpellingsDisagree": {
			reason: "The two spellings of redirectUri must not contradict each other.",
			args:   args{file: serviceFile, onCreate: []sfEdit{sfSet("https://elsewhere.example.com/", "spec", "dashboardClient", "redirectURI")}},
			want:   want{field: "spec.dashboardClient", message: "redirectURI is the deprecated spelling of redirectUri"},
		},

		// SFPlan.
		"SFPlanIDChanged": {
			reason: "Instances refer to the plan id.",
			args:   args{file: planFile, onUpdate: []sfEdit{sfSet("another-id", "spec", "id")}},
			want:   want{field: "spec.id", message: "id is immutable: it is the OSB plan_id"},
		},
		"SFPlanServiceIDChanged": {
			reason: "A plan cannot move to another service.",
			args:   args{file: planFile, onUpdate: []sfEdit{sfSet("another-service", "spec", "serviceId")}},
			want:   want{field: "spec.serviceId", message: "serviceId is immutable: a plan cannot move to another service"},
		},
		"SFPlanDescriptionAndTemplatesChanged": {
			reason: "Everything but the ids of a plan may change.",
			args: args{file: planFile, onUpdate: []sfEdit{
				sfSet("A bigger Redis", "spec", "description"),
				sfSet("apiVersion: v1\nkind: ConfigMap", "spec", "templates", 2, "content"),
			}},
		},
		"SFPlanTemplateWithoutText": {
			reason: "A template must have content, contentEncoded or url.",
			args:   args{file: planFile, onCreate: []sfEdit{sfRemove("spec", "templates", 2, "content")}},
			want:   want{field: "spec.templates[2]", message: templateNeedsIt},
		},
		"SFPlanTemplateWithEmptyContent": {
			reason: "An empty content is no template text.",
			args:   args{file: planFile, onCreate: []sfEdit{sfSet("", "spec", "templates", 2, "content")}},
			want:   want{field: "spec.templates[2]", message: templateNeedsIt},
		},
		"SFPlanTemplateWithContentAndContentEncoded": {
			reason: "Service Fabrik uses contentEncoded only when content is empty, so both may be set.",
			args:   args{file: planFile, onCreate: []sfEdit{sfSet("YXBpVmVyc2lvbjogdjEK", "spec", "templates", 2, "contentEncoded")}},
		},
		"SFPlanRemoteGoTemplate": {
			reason: "A gotemplate given only by url, as in the seed's remote-template example, is accepted.",
			args: args{file: planFile, onCreate: []sfEdit{
				sfRemove("spec", "templates", 2, "content"),
				sfSet("https://raw.githubusercontent.com/example/templates/main/unbind.yaml", "spec", "templates", 2, "url"),
			}},
		},
		"SFPlanTemplateActionDeploy": {
			reason: "deploy is not a template action.",
			args:   args{file: planFile, onCreate: []sfEdit{sfSet("deploy", "spec", "templates", 3, "action")}},
			want:   want{field: "spec.templates[3].action", message: `Unsupported value: "deploy"`},
		},
		"SFPlanTemplateTypeJsonnet": {
			reason: "jsonnet is not a template type.",
			args:   args{file: planFile, onCreate: []sfEdit{sfSet("jsonnet", "spec", "templates", 3, "type")}},
			want:   want{field: "spec.templates[3].type", message: `Unsupported value: "jsonnet"`},
		},
		"SFPlanHelmTemplateWithoutURL": {
			reason: "A helm template renders a chart that only url can locate.",
			args:   args{file: planFile, onCreate: []sfEdit{sfRemove("spec", "templates", 0, "url")}},
			want:   want{field: "spec.templates[0]", message: "a helm template needs url"},
		},
		"SFPlanWithoutTemplates": {
			reason: "Service Fabrik requires templates.",
			args:   args{file: planFile, onCreate: []sfEdit{sfRemove("spec", "templates")}},
			want:   want{field: "spec.templates", message: "Required value"},
		},
		"SFPlanWithoutFree": {
			reason: "Service Fabrik requires free.",
			args:   args{file: planFile, onCreate: []sfEdit{sfRemove("spec", "free")}},
			want:   want{field: "spec.free", message: "Required value"},
		},
		"SFPlanMaintenanceInfoWithoutVersion": {
			reason: "maintenance_info is meaningless without its version.",
			args:   args{file: planFile, onCreate: []sfEdit{sfRemove("spec", "maintenance_info", "version")}},
			want:   want{field: "spec.maintenance_info.version", message: "Required value"},
		},
		"SFPlanSchemaWithoutParameters": {
			reason: "A parameter schema must hold the schema itself.",
			args:   args{file: planFile, onCreate: []sfEdit{sfRemove("spec", "schemas", "service_binding", "create", "parameters")}},
			want:   want{field: "spec.schemas.service_binding.create.parameters", message: "Required value"},
		},

		// SFServiceInstance.
		"SFServiceInstanceServiceIDChanged": {
			reason: "An instance cannot move to another service.",
			args:   args{file: instanceFile, onUpdate: []sfEdit{sfSet("another-service", "spec", "serviceId")}},
			want:   want{field: "spec.serviceId", message: "serviceId is immutable: an instance cannot move to another service"},
		},
		"SFServiceInstanceInstanceIDChanged": {
			reason: "The instance id is the OSB instance_id.",
			args:   args{file: instanceFile, onUpdate: []sfEdit{sfSet("another-instance", "spec", "instanceId")}},
			want:   want{field: "spec.instanceId", message: "instanceId is immutable once set"},
		},
		"SFServiceInstanceInstanceIDRemoved": {
			reason: "Removing the instance id would allow setting another one later.",
			args:   args{file: instanceFile, onUpdate: []sfEdit{sfRemove("spec", "instanceId")}},
			want:   want{field: "spec.instanceId", message: "instanceId is immutable once set"},
		},
		"SFServiceInstanceInstanceIDSetLater": {
			reason: "The seed's instance has no instanceId; setting it later is allowed.",
			args:   args{file: seedInstance, onUpdate: []sfEdit{sfSet("0304b210-fcfd-11e8-a31b-b6001f10c97f", "spec", "instanceId")}},
		},
		"SFServiceInstancePlanAndClusterChanged": {
			reason: "An OSB update may change the plan, and the scheduler sets the cluster.",
			args: args{file: seedInstance, onUpdate: []sfEdit{
				sfSet("0d8f2e6c-1a2b-4c3d-8e9f-a0b1c2d3e4f5", "spec", "planId"),
				sfSet("sister-eu-1", "spec", "clusterId"),
			}},
		},
		"SFServiceInstanceWithoutPlanID": {
			reason: "Service Fabrik requires planId.",
			args:   args{file: instanceFile, onCreate: []sfEdit{sfRemove("spec", "planId")}},
			want:   want{field: "spec.planId", message: "Required value"},
		},

		// SFServiceBinding.
		"SFServiceBindingIDChanged": {
			reason: "The binding id is the OSB binding_id.",
			args:   args{file: bindingFile, onUpdate: []sfEdit{sfSet("another-binding", "spec", "id")}},
			want:   want{field: "spec.id", message: "id is immutable once set"},
		},
		"SFServiceBindingIDRemoved": {
			reason: "Removing the binding id would allow setting another one later.",
			args:   args{file: bindingFile, onUpdate: []sfEdit{sfRemove("spec", "id")}},
			want:   want{field: "spec.id", message: "id is immutable once set"},
		},
		"SFServiceBindingIDSetLater": {
			reason: "The seed's binding has no id; setting it later is allowed.",
			args:   args{file: seedBinding, onUpdate: []sfEdit{sfSet("de3dd272-fcfc-11e8-a31b-b6001f10c97f", "spec", "id")}},
		},
		"SFServiceBindingInstanceIDChanged": {
			reason: "A binding cannot move to another instance.",
			args:   args{file: bindingFile, onUpdate: []sfEdit{sfSet("another-instance", "spec", "instanceId")}},
			want:   want{field: "spec.instanceId", message: "instanceId is immutable: a binding cannot move to another instance"},
		},
		"SFServiceBindingServiceIDChanged": {
			reason: "A binding cannot move to another service.",
			args:   args{file: bindingFile, onUpdate: []sfEdit{sfSet("another-service", "spec", "serviceId")}},
			want:   want{field: "spec.serviceId", message: "serviceId is immutable: a binding cannot move to another service"},
		},
		"SFServiceBindingWithoutInstanceID": {
			reason: "Service Fabrik requires instanceId.",
			args:   args{file: bindingFile, onCreate: []sfEdit{sfRemove("spec", "instanceId")}},
			want:   want{field: "spec.instanceId", message: "Required value"},
		},

		// SFCluster.
		"SFClusterSchedulingLimitAbove100": {
			reason: "schedulingLimitPercentage is a percentage.",
			args:   args{file: clusterFile, onCreate: []sfEdit{sfSet(int64(101), "spec", "schedulingLimitPercentage")}},
			want:   want{field: "spec.schedulingLimitPercentage", message: "should be less than or equal to 100"},
		},
		"SFClusterSchedulingLimitNegative": {
			reason: "schedulingLimitPercentage is a percentage.",
			args:   args{file: clusterFile, onCreate: []sfEdit{sfSet(int64(-1), "spec", "schedulingLimitPercentage")}},
			want:   want{field: "spec.schedulingLimitPercentage", message: "should be greater than or equal to 0"},
		},
		"SFClusterSchedulingLimit100": {
			reason: "100 percent is a valid limit.",
			args:   args{file: clusterFile, onUpdate: []sfEdit{sfSet(int64(100), "spec", "schedulingLimitPercentage")}},
		},
		"SFClusterUncordoned": {
			reason: "A cordoned cluster may be uncordoned.",
			args:   args{file: clusterFile, onUpdate: []sfEdit{sfSet(false, "spec", "unschedulable")}},
		},
		"SFClusterWithoutSecretRef": {
			reason: "Service Fabrik requires secretRef.",
			args:   args{file: clusterFile, onCreate: []sfEdit{sfRemove("spec", "secretRef")}},
			want:   want{field: "spec.secretRef", message: "Required value"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			obj := sfFixtureObject(t, tc.args.file, "validation-"+strings.ToLower(name))
			for _, e := range tc.args.onCreate {
				e(t, obj)
			}
			sfEnsureNamespace(t, c, obj.GetNamespace())
			written := obj.DeepCopy()
			err := c.Client.Create(ctx, obj)
			if len(tc.args.onUpdate) > 0 {
				if err != nil {
					t.Fatalf("create %s %s before the update under test: %v", obj.GetKind(), sfKey(obj), err)
				}
				for _, e := range tc.args.onUpdate {
					e(t, obj)
				}
				written = obj.DeepCopy()
				err = c.Client.Update(ctx, obj)
			}
			if tc.want.field == "" {
				if err != nil {
					t.Fatalf("%s\nwant the request accepted, got: %v", tc.reason, err)
				}
				// The edited spec must be stored as written: a rule that
				// let the request through must not have lost anything.
				got := sfGet(t, c, written)
				wantSpec := map[string]any{"spec": written.Object["spec"]}
				if diffs := testenv.FieldDiffs(wantSpec, got.Object); len(diffs) > 0 {
					t.Errorf("%s\naccepted, but fields were lost or changed:\n%s", tc.reason, strings.Join(diffs, "\n"))
				}
				return
			}
			if err == nil {
				t.Fatalf("%s\nwant the request rejected at %s with %q, but it was accepted", tc.reason, tc.want.field, tc.want.message)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("%s\nwant an Invalid error, got: %v", tc.reason, err)
			}
			if !sfHasCause(err, tc.want.field, tc.want.message) {
				t.Errorf("%s\nwant a cause at %s containing %q, got: %v", tc.reason, tc.want.field, tc.want.message, err)
			}
		})
	}
}

// testSFPrinterColumns reads fixtures as kubectl does, as server-side tables,
// and checks every column but age: Service Fabrik's own columns (state,
// clusterid, display-name, numserviceinstance) and Marketplane's.
func testSFPrinterColumns(t *testing.T, c *testenv.Cluster) {
	tests := map[string]struct {
		reason   string
		file     string
		resource string
		want     map[string]any
	}{
		"SFService": {
			reason:   "An operator scans services by display name and id.",
			file:     "current-sfservice.yaml",
			resource: "sfservices",
			want: map[string]any{
				"Name": "columns-sfservice", "display-name": "redis", "id": "6e4b1c0a-8d7f-4f2e-9a3b-5c1d2e3f4a5b",
				"bindable": true, "ready": nil,
			},
		},
		"SFPlan": {
			reason:   "An operator scans plans by display name and service.",
			file:     "current-sfplan.yaml",
			resource: "sfplans",
			want: map[string]any{
				"Name": "columns-sfplan", "display-name": "small", "serviceid": "6e4b1c0a-8d7f-4f2e-9a3b-5c1d2e3f4a5b",
				"id": "0d8f2e6c-1a2b-4c3d-8e9f-a0b1c2d3e4f5", "free": false, "ready": nil,
			},
		},
		"SFServiceInstance": {
			reason:   "An operator scans instances by state, cluster and plan.",
			file:     "broker-sfserviceinstance.yaml",
			resource: "sfserviceinstances",
			want: map[string]any{
				"Name": "columns-sfserviceinstance", "state": "succeeded", "clusterid": "1",
				"planid": "0d8f2e6c-1a2b-4c3d-8e9f-a0b1c2d3e4f5", "serviceid": "6e4b1c0a-8d7f-4f2e-9a3b-5c1d2e3f4a5b",
				"ready": "True",
			},
		},
		"SFServiceBinding": {
			reason:   "An operator scans bindings by state and instance.",
			file:     "broker-sfservicebinding.yaml",
			resource: "sfservicebindings",
			want: map[string]any{
				"Name": "columns-sfservicebinding", "state": "succeeded", "instanceid": "7f3c2b1a-0e9d-4c8b-a7f6-e5d4c3b2a190",
				"planid": "0d8f2e6c-1a2b-4c3d-8e9f-a0b1c2d3e4f5", "ready": "True",
			},
		},
		"SFCluster": {
			reason:   "An operator scans clusters by load, capacity, limit and cordon.",
			file:     "current-sfcluster.yaml",
			resource: "sfclusters",
			want: map[string]any{
				"Name": "columns-sfcluster", "numserviceinstance": float64(12), "schedulinglimit": float64(80),
				"unschedulable": true, "ready": "True",
				"requests-cpu": "6500m", "requests-memory": "40Gi", "capacity-cpu": "64", "capacity-memory": "256Gi",
				// Not in the fixture: no components, the default (central)
				// provisioning mode, no offboarding.
				"components": nil, "mode": nil, "offboarding": nil,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := sfFixtureObject(t, tc.file, "columns-"+strings.ToLower(name))
			sfCreateWithStatus(t, c, obj)
			gv := obj.GroupVersionKind().GroupVersion()
			path := fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s", gv.Group, gv.Version, obj.GetNamespace(), tc.resource, obj.GetName())
			got := tableRow(t, c.Config, path)
			delete(got, "age")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncolumns of %s: -want, +got:\n%s", tc.reason, path, diff)
			}
		})
	}
}

// sfEdit changes an unstructured object in a test case.
type sfEdit func(t *testing.T, obj *unstructured.Unstructured)

// sfSet returns an sfEdit that sets the field at path (map keys as strings,
// list indexes as ints) to value.
func sfSet(value any, path ...any) sfEdit {
	return func(t *testing.T, obj *unstructured.Unstructured) {
		t.Helper()
		parent, last := sfWalk(t, obj.Object, path)
		switch p := parent.(type) {
		case map[string]any:
			p[last.(string)] = value
		case []any:
			p[last.(int)] = value
		}
	}
}

// sfRemove returns an sfEdit that deletes the map key at path.
func sfRemove(path ...any) sfEdit {
	return func(t *testing.T, obj *unstructured.Unstructured) {
		t.Helper()
		parent, last := sfWalk(t, obj.Object, path)
		m, ok := parent.(map[string]any)
		if !ok {
			t.Fatalf("remove %v: the parent is not an object", path)
		}
		if _, ok := m[last.(string)]; !ok {
			t.Fatalf("remove %v: the fixture has no such field", path)
		}
		delete(m, last.(string))
	}
}

// sfWalk returns the container holding the last element of path, and that
// element. It fails the test when the path does not exist in the fixture.
func sfWalk(t *testing.T, root map[string]any, path []any) (any, any) {
	t.Helper()
	var cur any = root
	for i, step := range path[:len(path)-1] {
		switch c := cur.(type) {
		case map[string]any:
			key, ok := step.(string)
			if !ok {
				t.Fatalf("path %v: step %d must be a key", path, i)
			}
			cur = c[key]
		case []any:
			idx, ok := step.(int)
			if !ok || idx < 0 || idx >= len(c) {
				t.Fatalf("path %v: step %d must be an index below %d", path, i, len(c))
			}
			cur = c[idx]
		default:
			t.Fatalf("path %v: nothing to walk into at step %d", path, i)
		}
	}
	return cur, path[len(path)-1]
}

// sfHasCause reports whether the Invalid error names field in one of its causes
// with a message containing message.
func sfHasCause(err error, field, message string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == field && strings.Contains(cause.Message, message) {
			return true
		}
	}
	return false
}

// sfDecodeFixture reads every object of a fixture file.
func sfDecodeFixture(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sfTestdata, file))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no objects", file)
	}
	return objs
}

// sfFixtureObject returns the single object of a fixture file under a new name,
// so that cases do not collide with each other or with the round trip.
func sfFixtureObject(t *testing.T, file, name string) *unstructured.Unstructured {
	t.Helper()
	objs := sfDecodeFixture(t, file)
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects, want 1", file, len(objs))
	}
	obj := objs[0]
	obj.SetName(name)
	return obj
}

// sfCreateWithStatus creates a copy of want and, when want has a status, writes
// it through the status subresource, since the API server ignores the status
// of a create. It returns the object as read back from the API server.
func sfCreateWithStatus(t *testing.T, c *testenv.Cluster, want *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	sfEnsureNamespace(t, c, want.GetNamespace())
	obj := want.DeepCopy()
	if err := c.Client.Create(ctx, obj); err != nil {
		t.Fatalf("create %s %s: %v", want.GetKind(), sfKey(want), err)
	}
	if status, ok := want.Object["status"]; ok {
		obj.Object["status"] = runtime.DeepCopyJSONValue(status)
		if err := c.Client.Status().Update(ctx, obj); err != nil {
			t.Fatalf("write the status of %s %s: %v", want.GetKind(), sfKey(want), err)
		}
	}
	return sfGet(t, c, want)
}

// sfGet reads the object named like obj.
func sfGet(t *testing.T, c *testenv.Cluster, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("get %s %s: %v", obj.GetKind(), sfKey(obj), err)
	}
	return got
}

// sfEnsureNamespace creates the namespace unless it exists.
func sfEnsureNamespace(t *testing.T, c *testenv.Cluster, name string) {
	t.Helper()
	if name == "" {
		return
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func sfKey(obj client.Object) string {
	return fmt.Sprintf("%s/%s", obj.GetNamespace(), obj.GetName())
}

func sfContainsCRD(list []*apiextensionsv1.CustomResourceDefinition, name string) bool {
	for _, crd := range list {
		if crd.Name == name {
			return true
		}
	}
	return false
}
