package interoperator_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/manifests"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// sourceHint is what a refused or unreadable source's message says about
// where sources without a namespace are read.
const sourceHint = "a source without a namespace is read from the instance's namespace"

// installOpenCRD installs, on the target cluster, a namespaced CRD of
// group/version whose spec and status take any fields (no status
// subresource: an operator stand-in writes status with an update).
func installOpenCRD(t *testing.T, group, version, kind, plural string) {
	t.Helper()
	ctx := context.Background()
	preserve := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": preserve, "status": preserve},
				}},
			}},
		},
	}
	if err := target.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, "the "+crd.Name+" CRD to be established", func() bool {
		c := &apiextensionsv1.CustomResourceDefinition{}
		must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(crd), c))
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// operate plays the Docker operator of Service Fabrik's docker sample: it
// waits for the object apiVersion/kind namespace/name on the target
// cluster and sets its status.
func operate(t *testing.T, apiVersion, kind, namespace, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	waitFor(t, fmt.Sprintf("the %s %s/%s to be applied", kind, namespace, name), func() bool {
		err := target.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return false
		}
		must(t, err)
		return true
	})
	edit(t, target.Client, obj, func() { must(t, unstructured.SetNestedMap(obj.Object, status, "status")) })
}

// TestServiceFabrikDockerPattern provisions and binds with a plan shaped
// like Service Fabrik's docker gotemplates (testdata/sf-docker-plan.yaml):
// its objects have no namespace and land in the instance's namespace,
// while its sources name the namespace "default". With the ProviderConfig
// granting the plan "default" (as docs/interoperator.md's render policy
// documents), the sources are read where the objects were applied, as
// Service Fabrik reads them, and the operations succeed once the operator
// stand-in reports. A copy of the plan without the grant fails at once,
// naming the source and its namespace.
func TestServiceFabrikDockerPattern(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	const planID, ungranted = "docker-sf-shape", "docker-sf-shape-ungranted"
	e := newEnv(t, envOptions{configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.RenderPolicies = []interoperatorv1alpha1.RenderPolicy{{Plans: []string{planID}, Namespaces: []string{"default"}}}
	}})
	ctx := context.Background()
	installOpenCRD(t, "deployment.servicefabrik.io", "v1alpha1", "Docker", "dockers")
	installOpenCRD(t, "bind.servicefabrik.io", "v1alpha1", "DockerBind", "dockerbinds")

	data, err := os.ReadFile("testdata/sf-docker-plan.yaml")
	must(t, err)
	objs, err := manifests.Decode(data)
	must(t, err)
	plan := objs[0]
	plan.SetNamespace(e.catalog)
	e.createService(t, "docker-svc")
	copied := plan.DeepCopy()
	must(t, platform.Client.Create(ctx, plan))
	copied.SetName(ungranted)
	must(t, unstructured.SetNestedField(copied.Object, ungranted, "spec", "id"))
	must(t, unstructured.SetNestedField(copied.Object, ungranted, "spec", "name"))
	must(t, platform.Client.Create(ctx, copied))

	inst := e.createInstance(t, "d-1", "docker-svc", planID, map[string]any{"image": "nginx"})
	operate(t, "deployment.servicefabrik.io/v1alpha1", "Docker", e.ns, "d-1", map[string]any{"state": "succeeded"})
	got := e.waitInstance(t, "d-1", osbv1alpha1.StateSucceeded)
	if want := "Docker container d-1 is running"; got.Status.Description != want {
		t.Errorf("description = %q, want %q from the status template, which read the source docker", got.Status.Description, want)
	}
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "d-1"}, dockerObject("deployment.servicefabrik.io/v1alpha1", "Docker")); !apierrors.IsNotFound(err) {
		t.Errorf("a Docker d-1 in namespace default: err = %v, want NotFound: the object goes to the instance's namespace", err)
	}

	e.createBinding(t, "db-1", inst)
	creds := `{"user":"db-1","password":"from-the-operator"}`
	operate(t, "bind.servicefabrik.io/v1alpha1", "DockerBind", e.ns, "db-1",
		map[string]any{"state": "succeeded", "response": base64.StdEncoding.EncodeToString([]byte(creds))})
	e.waitBinding(t, "db-1", osbv1alpha1.StateSucceeded)
	if c, _ := bindResponse(t, e, "db-1")["credentials"].(map[string]any); c["user"] != "db-1" || c["password"] != "from-the-operator" {
		t.Errorf("credentials = %v, want the DockerBind's status.response, read through the source dockerbind", c)
	}

	e.createInstance(t, "d-2", "docker-svc", ungranted, nil)
	failed := e.waitInstance(t, "d-2", osbv1alpha1.StateFailed)
	for _, want := range []string{"source docker", "Docker default/d-2", "namespace default", sourceHint} {
		if !strings.Contains(failed.Status.Error, want) {
			t.Errorf("error = %q, want it to say %q", failed.Status.Error, want)
		}
	}
	if c := readyCondition(failed.Status.Conditions); c == nil || c.Reason != string(provisioner.ReasonSourceRefused) {
		t.Errorf("Ready = %+v, want reason %s", c, provisioner.ReasonSourceRefused)
	}

	deleteAndWait(t, onboarding.Client, &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "db-1"}})
	deleteAndWait(t, onboarding.Client, inst)
}

func dockerObject(apiVersion, kind string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	return obj
}

// The probe plan's source is a ConfigMap whose name and namespace are the
// instance's parameters; it provisions a ConfigMap of its own, without a
// namespace, and succeeds with the source's value once the source is read.
var sourceProbePlan = []osbv1alpha1.TemplateSpec{
	gotemplate(osbv1alpha1.ActionProvision, `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm-{{ .instance.metadata.name }}
data:
  value: own-{{ .instance.metadata.name }}`),
	gotemplate(osbv1alpha1.ActionSources, `src:
  apiVersion: v1
  kind: ConfigMap
  name: {{ .instance.spec.parameters.name | quote }}
  namespace: {{ .instance.spec.parameters.namespace | quote }}`),
	gotemplate(osbv1alpha1.ActionStatus, `{{- $state := "in progress" }}{{ $value := "" }}
{{- with .src }}{{ $state = "succeeded" }}{{ $value = .data.value }}{{ end }}
provision:
  state: {{ $state }}
  response: {{ $value | quote }}`),
}

// TestSourceNamespaces: sources that name a namespace other than the
// instance's. Another tenant's namespace, where an instance of the same
// name keeps a secret, is refused at once; a namespace that does not exist
// and that the instance did not create fails the instance once its objects
// are applied, instead of leaving it in progress; and a source naming such
// a namespace for an object the instance applied to its own namespace is
// read from there, as Service Fabrik reads every source.
func TestSourceNamespaces(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	const otherTenant = "source-namespaces-other-tenant"
	e := newEnv(t, envOptions{moreNamespaces: []string{otherTenant}})
	const secret = "victim-secret-7f3a"
	e.createService(t, "svc")
	e.createPlan(t, "victim", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm-{{ .instance.metadata.name }}
data:
  value: `+secret)})
	e.createPlan(t, "probe", "svc", sourceProbePlan)
	victims := e.tenant(otherTenant)
	victims.createInstance(t, "same", "svc", "victim", nil)
	victims.waitInstance(t, "same", osbv1alpha1.StateSucceeded)

	nowhere := e.name + "-nowhere"
	tests := map[string]struct {
		reason    string
		params    map[string]any
		state     osbv1alpha1.State
		mention   []string
		response  string
		reasonWas provisioner.Reason
	}{
		"same": {
			reason:    "An instance of the victim's name names the victim's namespace and object: refused before anything is read.",
			params:    map[string]any{"namespace": otherTenant, "name": "cm-same"},
			state:     osbv1alpha1.StateFailed,
			mention:   []string{"source src", "ConfigMap " + otherTenant + "/cm-same", sourceHint},
			reasonWas: provisioner.ReasonSourceRefused,
		},
		"missing": {
			reason:    "A namespace that does not exist and that the instance did not create can never hold a readable source.",
			params:    map[string]any{"namespace": nowhere, "name": "cm-other"},
			state:     osbv1alpha1.StateFailed,
			mention:   []string{"source src", "ConfigMap " + nowhere + "/cm-other", "namespace " + nowhere + " does not exist", sourceHint},
			reasonWas: provisioner.ReasonSourceRefused,
		},
		"applied": {
			reason:   "The object the instance applied to its own namespace is read from there, whatever namespace the source names.",
			params:   map[string]any{"namespace": nowhere, "name": "cm-applied"},
			state:    osbv1alpha1.StateSucceeded,
			response: "own-applied",
		},
	}
	for name, tc := range tests {
		e.createInstance(t, name, "svc", "probe", tc.params)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := e.waitInstance(t, name, tc.state)
			if strings.Contains(fmt.Sprintf("%+v", got), secret) {
				t.Errorf("%s\nthe victim's secret is in the instance", tc.reason)
			}
			for _, want := range tc.mention {
				if !strings.Contains(got.Status.Error, want) {
					t.Errorf("%s\nerror = %q, want it to say %q", tc.reason, got.Status.Error, want)
				}
			}
			if tc.reasonWas != "" {
				if c := readyCondition(got.Status.Conditions); c == nil || c.Reason != string(tc.reasonWas) {
					t.Errorf("%s\nReady = %+v, want reason %s", tc.reason, c, tc.reasonWas)
				}
			}
			if tc.response != "" && got.Status.Description != tc.response {
				t.Errorf("%s\ndescription = %q, want %q", tc.reason, got.Status.Description, tc.response)
			}
		})
	}
}
