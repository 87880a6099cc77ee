package interoperator_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/api/common"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// configMaps is a gotemplate of one ConfigMap per name, as YAML documents,
// each holding the instance's name.
func configMaps(names ...string) string {
	var docs []string
	for _, n := range names {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  instance: {{ .instance.metadata.name }}\n", n))
	}
	return strings.Join(docs, "---\n")
}

func gotemplate(action osbv1alpha1.TemplateAction, content string) osbv1alpha1.TemplateSpec {
	return osbv1alpha1.TemplateSpec{Action: action, Type: osbv1alpha1.TypeGoTemplate, Content: content}
}

// targetConfigMaps returns the names of the ConfigMaps in namespace on the
// target cluster that carry the label of the instance of that name in the
// onboarding namespace of the same name (its default namespace there).
func targetConfigMaps(t *testing.T, namespace, instance string) []string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	must(t, target.Client.List(context.Background(), list, client.InNamespace(namespace),
		client.MatchingLabels{provisioner.LabelInstanceID: provisioner.InstanceID(namespace, instance)}))
	var names []string
	for _, cm := range list.Items {
		if cm.DeletionTimestamp == nil {
			names = append(names, cm.Name)
		}
	}
	sort.Strings(names)
	return names
}

// TestUpdateRemovesDroppedFields provisions an instance whose ConfigMap
// the provisioner creates (a create, not a server-side apply: one request
// where an apply needs a read first), then updates it so that the render
// drops a data key and a label: the update's apply removes them, as it
// would from an object it had applied, and the ConfigMap's fields are the
// provisioner's server-side apply's alone afterwards.
func TestUpdateRemovesDroppedFields(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	tmpl := `apiVersion: v1
kind: ConfigMap
metadata:
  name: fields
{{- if .instance.spec.parameters.extra }}
  labels:
    extra: "yes"
{{- end }}
data:
  kept: "1"
{{- if .instance.spec.parameters.extra }}
  extra: "1"
{{- end }}
`
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, tmpl)})
	e.createInstance(t, "inst", "svc", "plan", map[string]any{"extra": true})
	inst := e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: e.ns, Name: "fields"}
	must(t, target.Client.Get(context.Background(), key, cm))
	if cm.Data["extra"] != "1" || cm.Labels["extra"] != "yes" {
		t.Fatalf("after provision: data %v, labels %v; want extra in both", cm.Data, cm.Labels)
	}
	if ops := managers(cm); !slices.Contains(ops, apply.DefaultFieldOwner+" Update") {
		t.Errorf("after provision: managed fields %v; want the provisioner's create (%s Update)", ops, apply.DefaultFieldOwner)
	}

	edit(t, onboarding.Client, inst, func() { inst.Spec.Parameters = rawJSON(t, map[string]any{"extra": false}) })
	waitFor(t, "the update to succeed", func() bool {
		i := e.instance(t, "inst")
		return i.Status.State == osbv1alpha1.StateSucceeded && i.Status.ObservedGeneration == i.Generation
	})
	must(t, target.Client.Get(context.Background(), key, cm))
	if _, ok := cm.Data["extra"]; ok || cm.Data["kept"] != "1" {
		t.Errorf("after the update: data %v; want kept alone", cm.Data)
	}
	if _, ok := cm.Labels["extra"]; ok {
		t.Errorf("after the update: labels %v; want no extra", cm.Labels)
	}
	if diff := cmp.Diff([]string{apply.DefaultFieldOwner + " Apply"}, managers(cm)); diff != "" {
		t.Errorf("after the update: managed fields -want +got:\n%s", diff)
	}
}

// managers lists an object's managed fields entries as "manager
// operation".
func managers(o client.Object) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		out = append(out, m.Manager+" "+string(m.Operation))
	}
	return out
}

// TestTemplateSources provisions one instance per way of supplying
// template text: inline with several documents, contentEncoded, http url,
// file url and configmap url. Each renders ConfigMaps into the instance's
// namespace, which the provisioner creates on the target cluster.
func TestTemplateSources(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "provision.yaml"), []byte(configMaps("from-file")), 0o600))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/templates/provision.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(configMaps("from-http")))
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, envOptions{configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.TemplateFileRoots = []string{dir}
	}})
	ctx := context.Background()
	must(t, platform.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "templates"},
		Data:       map[string]string{"provision.yaml": configMaps("from-configmap")},
	}))
	e.createService(t, "svc")

	tests := map[string]struct {
		reason   string
		template osbv1alpha1.TemplateSpec
		want     []string
	}{
		"MultiDocument": {
			reason:   "An inline gotemplate may render several objects as YAML documents.",
			template: gotemplate(osbv1alpha1.ActionProvision, configMaps("a", "b", "c")),
			want:     []string{"a", "b", "c"},
		},
		"ContentEncoded": {
			reason: "contentEncoded holds the template in base64.",
			template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate,
				ContentEncoded: base64.StdEncoding.EncodeToString([]byte(configMaps("encoded")))},
			want: []string{"encoded"},
		},
		"HTTPURL": {
			reason:   "A url names a template served over http.",
			template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, URL: srv.URL + "/templates/provision.yaml"},
			want:     []string{"from-http"},
		},
		"FileURL": {
			reason:   "A file url names a template below one of the ProviderConfig's templateFileRoots.",
			template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, URL: "file://" + filepath.Join(dir, "provision.yaml")},
			want:     []string{"from-file"},
		},
		"ConfigMapURL": {
			reason:   "A configmap url names a key of a ConfigMap on the platform cluster.",
			template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, URL: fmt.Sprintf("configmap://%s/templates/provision.yaml", e.catalog)},
			want:     []string{"from-configmap"},
		},
	}
	for name, tc := range tests {
		plan := strings.ToLower(name)
		e.createPlan(t, plan, "svc", []osbv1alpha1.TemplateSpec{tc.template})
		e.createInstance(t, "inst-"+plan, "svc", plan, nil)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id := "inst-" + strings.ToLower(name)
			inst := e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
			if diff := cmp.Diff(tc.want, targetConfigMaps(t, e.ns, id)); diff != "" {
				t.Errorf("%s\nConfigMaps on the target, -want +got:\n%s", tc.reason, diff)
			}
			if len(inst.Status.Resources) != len(tc.want) {
				t.Errorf("%s\nstatus.resources = %+v, want %d ConfigMaps", tc.reason, inst.Status.Resources, len(tc.want))
			}
		})
	}
}

// TestUpdateRemovesDroppedResources changes an instance's parameters and
// then its plan (autoUpdateInstances): each time, what the new render no
// longer has is deleted.
func TestUpdateRemovesDroppedResources(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	tmpl := configMaps("a", "b") + "{{- if .instance.spec.parameters.extra }}\n---\n" + configMaps("c") + "{{- end }}\n"
	plan := e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, tmpl)},
		func(p *osbv1alpha1.SFPlan) { p.Spec.AutoUpdateInstances = true })
	e.createInstance(t, "inst", "svc", "plan", map[string]any{"extra": true})
	inst := e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	if diff := cmp.Diff([]string{"a", "b", "c"}, targetConfigMaps(t, e.ns, "inst")); diff != "" {
		t.Fatalf("after provision, -want +got:\n%s", diff)
	}
	firstHash := inst.Annotations[osbv1alpha1.AnnotationPlanHash]
	if firstHash == "" {
		t.Errorf("no %s annotation on an instance of an auto-updating plan", osbv1alpha1.AnnotationPlanHash)
	}

	// An update request (new parameters) drops c.
	edit(t, onboarding.Client, inst, func() { inst.Spec.Parameters = rawJSON(t, map[string]any{"extra": false}) })
	waitFor(t, "c to be deleted", func() bool {
		i := e.instance(t, "inst")
		return i.Status.State == osbv1alpha1.StateSucceeded && i.Status.ObservedGeneration == i.Generation &&
			cmp.Equal([]string{"a", "b"}, targetConfigMaps(t, e.ns, "inst"))
	})
	inst = e.instance(t, "inst")
	if len(inst.Status.Resources) != 2 {
		t.Errorf("status.resources = %+v, want a and b", inst.Status.Resources)
	}

	// A new plan template drops b: the plan updates its instances.
	edit(t, platform.Client, plan, func() { plan.Spec.Templates[0].Content = configMaps("a") })
	waitFor(t, "b to be deleted after the plan changed", func() bool {
		return cmp.Equal([]string{"a"}, targetConfigMaps(t, e.ns, "inst"))
	})
	// The status write that lists the resources follows the deletion, and
	// state was already succeeded before the plan changed: wait for the
	// status to catch up (it never does if dropped resources stay listed).
	waitFor(t, "status.resources to list only a after the plan changed", func() bool {
		inst = e.instance(t, "inst")
		return inst.Status.State == osbv1alpha1.StateSucceeded && len(inst.Status.Resources) == 1 &&
			inst.Status.Resources[0].Name == "a"
	})
	if h := inst.Annotations[osbv1alpha1.AnnotationPlanHash]; h == firstHash || h != catalog.SpecHash(plan) {
		t.Errorf("planhash annotation = %q, want the new plan's hash %q", h, catalog.SpecHash(plan))
	}
}

// TestSeedPostgresPlan applies the SFPlan of seed 05 against a Postgres
// CRD: verbatim, its mis-indented metadata leaves the object without a
// name and the instance fails with a readable error; with the indentation
// fixed the Postgres is created.
func TestSeedPostgresPlan(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	crdData, err := os.ReadFile("testdata/postgres-crd.yaml")
	must(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	must(t, yaml.Unmarshal(crdData, crd))
	if err := target.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, "the Postgres CRD to be established", func() bool {
		c := &apiextensionsv1.CustomResourceDefinition{}
		must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(crd), c))
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})

	data, err := os.ReadFile("testdata/seed05-postgres-plan.yaml")
	must(t, err)
	objs, err := manifests.Decode(data)
	must(t, err)
	verbatim := objs[0]
	verbatim.SetNamespace(e.catalog)
	const serviceID = "24731fb8-7b84-5f57-914f-c3d55d793dd4"
	e.createService(t, serviceID)
	must(t, platform.Client.Create(ctx, verbatim))

	fixed := verbatim.DeepCopy()
	fixed.SetResourceVersion("")
	fixed.SetName("fixed-plan")
	templates, _, _ := unstructured.NestedSlice(fixed.Object, "spec", "templates")
	tmpl := templates[0].(map[string]any)
	tmpl["content"] = strings.Replace(tmpl["content"].(string), "metadata:\nname:", "metadata:\n  name:", 1)
	must(t, unstructured.SetNestedSlice(fixed.Object, templates, "spec", "templates"))
	must(t, unstructured.SetNestedField(fixed.Object, "fixed-plan", "spec", "id"))
	must(t, unstructured.SetNestedField(fixed.Object, "v9.4-dev-large-fixed", "spec", "name"))
	must(t, platform.Client.Create(ctx, fixed))
	// Both plans are valid catalog entries (the verbatim one fails only
	// when applied): the instances come after the catalog's verdict, so
	// that what they meet is the templates. (Instances that come earlier
	// wait: TestInstanceBeforeItsCatalog.)
	for _, name := range []string{verbatim.GetName(), fixed.GetName()} {
		waitFor(t, "SFPlan "+name+" valid in the catalog", func() bool {
			var plan osbv1alpha1.SFPlan
			must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: name}, &plan))
			c := readyCondition(plan.Status.Conditions)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == plan.Generation
		})
	}

	params := map[string]any{"foo": "bar"}
	e.createInstance(t, "pg-verbatim", serviceID, "29d7d4c8-6fe2-4c2a-a5ca-a826937d5a88", params)
	e.createInstance(t, "pg-fixed", serviceID, "fixed-plan", params)

	failed := e.waitInstance(t, "pg-verbatim", osbv1alpha1.StateFailed)
	for _, want := range []string{"kubedb.com/v1alpha1 Postgres", "no metadata.name"} {
		if !strings.Contains(failed.Status.Error, want) {
			t.Errorf("error = %q, want it to mention %q", failed.Status.Error, want)
		}
	}
	if c := readyCondition(failed.Status.Conditions); c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(provisioner.ReasonInvalidResource) {
		t.Errorf("Ready = %+v, want False/%s", c, provisioner.ReasonInvalidResource)
	}

	e.waitInstance(t, "pg-fixed", osbv1alpha1.StateSucceeded)
	pg := &unstructured.Unstructured{}
	pg.SetAPIVersion("kubedb.com/v1alpha1")
	pg.SetKind("Postgres")
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "kdb-pg-fixed-pg"}, pg))
	if v, _, _ := unstructured.NestedString(pg.Object, "spec", "version"); v != "10.2-v1" {
		t.Errorf("Postgres spec.version = %q, want 10.2-v1", v)
	}
}

// TestFailures creates instances whose templates do not parse or execute,
// whose objects the API server rejects, and whose template url is
// unreachable, together with a good one: the bad ones fail with a readable
// error, the good one succeeds, and nothing loops.
func TestFailures(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	unreachable := fmt.Sprintf("http://%s/provision.yaml", l.Addr())
	must(t, l.Close())

	tests := map[string]struct {
		template osbv1alpha1.TemplateSpec
		reasons  []provisioner.Reason
		message  string
	}{
		"parse-error": {
			template: gotemplate(osbv1alpha1.ActionProvision, "{{ .instance.metadata.name "),
			// The catalog may find the plan invalid before the instance
			// is rendered; either way the instance fails.
			reasons: []provisioner.Reason{provisioner.ReasonTemplateFailed, provisioner.ReasonPlanInvalid},
			message: "unclosed action",
		},
		"fail-function": {
			template: gotemplate(osbv1alpha1.ActionProvision, `{{ fail "boom" }}`),
			reasons:  []provisioner.Reason{provisioner.ReasonTemplateFailed},
			message:  "boom",
		},
		"rejected-name": {
			template: gotemplate(osbv1alpha1.ActionProvision, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n"),
			reasons:  []provisioner.Reason{provisioner.ReasonResourceRejected},
			message:  "Bad_Name",
		},
		"unreachable-url": {
			template: osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, URL: unreachable},
			reasons:  []provisioner.Reason{provisioner.ReasonRetriesExhausted},
			message:  "connection refused",
		},
	}
	for name, tc := range tests {
		e.createPlan(t, name, "svc", []osbv1alpha1.TemplateSpec{tc.template})
		e.createInstance(t, name, "svc", name, nil)
	}
	e.createPlan(t, "good", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("good"))})
	e.createInstance(t, "good", "svc", "good", nil)

	e.waitInstance(t, "good", osbv1alpha1.StateSucceeded)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := e.waitInstance(t, name, osbv1alpha1.StateFailed)
			if !strings.Contains(inst.Status.Error, tc.message) || inst.Status.Description != inst.Status.Error {
				t.Errorf("error = %q, description = %q; want both to say %q", inst.Status.Error, inst.Status.Description, tc.message)
			}
			c := readyCondition(inst.Status.Conditions)
			if c == nil || c.Status != metav1.ConditionFalse || !containsReason(tc.reasons, c.Reason) {
				t.Errorf("Ready = %+v, want False with one of %v", c, tc.reasons)
			}
		})
	}

	// Failed operations are not retried: the reconciles stop.
	e.expectQuiet(t, "after every instance settled")
	if total := e.reconciles(t); total > 40 {
		t.Errorf("%v reconciles for 5 instances, want few (each failure is final)", total)
	}
}

func containsReason(reasons []provisioner.Reason, r string) bool {
	for _, x := range reasons {
		if string(x) == r {
			return true
		}
	}
	return false
}

// TestStatusTemplate keeps an instance "in progress" until a source object
// says it is ready, then takes state, description and dashboardUrl from the
// status template.
func TestStatusTemplate(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.createService(t, "svc")
	sources := "gate:\n  apiVersion: v1\n  kind: ConfigMap\n  name: gate-{{ .instance.metadata.name }}\n"
	status := `provision:
{{- if and .gate (eq (.gate.data.ready | default "") "true") }}
  state: succeeded
  response: ready at {{ .gate.data.url }}
  dashboardUrl: {{ .gate.data.url }}
{{- else }}
  state: in progress
  response: waiting for the gate
{{- end }}
`
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, configMaps("payload")),
		gotemplate(osbv1alpha1.ActionSources, sources),
		gotemplate(osbv1alpha1.ActionStatus, status),
	})
	e.createInstance(t, "inst", "svc", "plan", nil)
	inst := e.waitInstance(t, "inst", osbv1alpha1.StateInProgress)
	if inst.Status.Description != "waiting for the gate" {
		t.Errorf("description = %q, want the status template's response", inst.Status.Description)
	}
	if c := readyCondition(inst.Status.Conditions); c == nil || c.Reason != string(provisioner.ReasonInProgress) {
		t.Errorf("Ready = %+v, want reason %s", c, provisioner.ReasonInProgress)
	}
	must(t, target.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gate-inst"},
		Data:       map[string]string{"ready": "true", "url": "https://dashboard.example.com/inst"},
	}))
	inst = e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	if inst.Status.DashboardURL != "https://dashboard.example.com/inst" || inst.Status.Description != "ready at https://dashboard.example.com/inst" {
		t.Errorf("dashboardUrl = %q, description = %q; want them from the gate", inst.Status.DashboardURL, inst.Status.Description)
	}
}

// TestNoClusterAvailable shows that an instance without an SFCluster to run
// on waits, with a reason and without retries, and proceeds once one is
// registered.
func TestNoClusterAvailable(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{noCluster: true})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("x"))})
	e.createInstance(t, "inst", "svc", "plan", nil)
	waitFor(t, "Ready=False/NoClusterAvailable", func() bool {
		c := readyCondition(e.instance(t, "inst").Status.Conditions)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == clusters.ReasonNoClusterAvailable
	})
	e.expectQuiet(t, "while waiting for a cluster")
	waiting := e.instance(t, "inst")
	if s := waiting.Status.State; s.IsTerminal() {
		t.Errorf("state = %q while waiting for a cluster, want it unchanged", s)
	}
	// Waiting is not failing: a client (the validation flow, a tenant)
	// that sees phase Failed gives up on an instance that a cluster
	// registered a moment later would have placed.
	if p := common.Phase(waiting.Status.Phase); p != common.PhasePending {
		t.Errorf("phase = %q while waiting for a cluster, want Pending", p)
	}
	e.createCluster(t, "late")
	inst := e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	if inst.Spec.ClusterID != "late" {
		t.Errorf("spec.clusterId = %q, want late", inst.Spec.ClusterID)
	}
	waitFor(t, "Ready=True and phase Ready once placed", func() bool {
		i := e.instance(t, "inst")
		c := readyCondition(i.Status.Conditions)
		return c != nil && c.Status == metav1.ConditionTrue && common.Phase(i.Status.Phase) == common.PhaseReady
	})
}

// TestInstanceBeforeItsCatalog creates an instance before its plan, then
// the plan before its service: the instance waits, with the reason, and
// provisions once its catalog entries exist. The catalog's kinds come
// through separate watches in no order, and the catalog controller judges
// the plan (ServiceNotFound, then valid) in status writes of its own: the
// instance must neither fail on a verdict about a missing service nor miss
// the events that let it go on.
func TestInstanceBeforeItsCatalog(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	waitReason := func(what string, reason provisioner.Reason) {
		t.Helper()
		waitFor(t, what, func() bool {
			c := readyCondition(e.instance(t, "early").Status.Conditions)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(reason)
		})
		// The operation waits: Service Fabrik's state says nothing
		// final, which a platform polling last_operation would take
		// for the answer.
		if inst := e.instance(t, "early"); inst.Status.State.IsTerminal() {
			t.Fatalf("%s: state %q; want an operation that waits", what, inst.Status.State)
		}
	}
	e.createInstance(t, "early", "late-svc", "late-plan", nil)
	waitReason("the instance to wait for its plan", provisioner.ReasonPlanNotFound)

	e.createPlan(t, "late-plan", "late-svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("x"))})
	waitFor(t, "the catalog's verdict ServiceNotFound on the plan", func() bool {
		var plan osbv1alpha1.SFPlan
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "late-plan"}, &plan))
		c := readyCondition(plan.Status.Conditions)
		return c != nil && c.ObservedGeneration == plan.Generation && c.Reason == string(catalog.ReasonServiceNotFound)
	})
	// Whether the instance met the plan before or after the verdict, it
	// waits for the service.
	waitReason("the instance to wait for its service", provisioner.ReasonServiceNotFound)

	e.createService(t, "late-svc")
	e.waitInstance(t, "early", osbv1alpha1.StateSucceeded)
	if got := targetConfigMaps(t, e.ns, "early"); !equal(got, []string{"x"}) {
		t.Errorf("ConfigMaps on the target = %v, want [x]", got)
	}
}

// TestCatalogValidation shows the catalog's verdicts on SFServices and
// SFPlans.
func TestCatalogValidation(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{noCluster: true})
	ctx := context.Background()
	e.createService(t, "svc")
	provision := []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("x"))}
	schema := func(raw string) func(*osbv1alpha1.SFPlan) {
		return func(p *osbv1alpha1.SFPlan) {
			p.Spec.Schemas = &osbv1alpha1.ServiceSchemas{Instance: &osbv1alpha1.ServiceInstanceSchema{
				Create: &osbv1alpha1.Schema{Parameters: rawString(raw)}}}
		}
	}
	e.createPlan(t, "valid", "svc", provision, schema(`{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"size":{"type":"integer"}}}`))
	e.createPlan(t, "unknown-service", "no-such-service", provision)
	e.createPlan(t, "dup-1", "svc", provision, func(p *osbv1alpha1.SFPlan) { p.Spec.ID = "dup" })
	// dup-1 is valid, with a specHash, until dup-2 exists: the hash must
	// go when it turns invalid (a CI run once saw the verdict before the
	// hash of the first reconcile was gone).
	waitFor(t, "dup-1 valid with a specHash before dup-2 exists", func() bool {
		var plan osbv1alpha1.SFPlan
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "dup-1"}, &plan))
		return plan.Status.SpecHash != ""
	})
	e.createPlan(t, "dup-2", "svc", provision, func(p *osbv1alpha1.SFPlan) { p.Spec.ID = "dup" })
	e.createPlan(t, "bad-schema", "svc", provision, schema(`{"$schema":"http://json-schema.org/draft-06/schema#","type":12}`))
	e.createPlan(t, "no-schema-version", "svc", provision, schema(`{"type":"object"}`))
	e.createPlan(t, "no-provision", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionBind, configMaps("x"))})

	tests := map[string]struct {
		reason string
		want   catalog.Reason
	}{
		"valid":             {"A plan of an existing service with a valid schema is served.", catalog.ReasonValid},
		"unknown-service":   {"A plan must name an existing service.", catalog.ReasonServiceNotFound},
		"dup-1":             {"Plan ids are unique.", catalog.ReasonDuplicateID},
		"dup-2":             {"Plan ids are unique, for both plans.", catalog.ReasonDuplicateID},
		"bad-schema":        {"Schemas must be valid JSON Schema.", catalog.ReasonInvalidSchema},
		"no-schema-version": {"OSB requires $schema.", catalog.ReasonInvalidSchema},
		"no-provision":      {"A plan needs a provision template.", catalog.ReasonInvalidTemplate},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var plan osbv1alpha1.SFPlan
			// Verdicts change as the catalog grows (dup-1 is valid until
			// dup-2 exists): wait for the expected one.
			err := wait.PollUntilContextTimeout(ctx, pollEvery, pollTimeout, true, func(ctx context.Context) (bool, error) {
				if err := platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: name}, &plan); err != nil {
					return false, err
				}
				c := readyCondition(plan.Status.Conditions)
				return c != nil && c.ObservedGeneration == plan.Generation && c.Reason == string(tc.want), nil
			})
			if err != nil {
				t.Fatalf("%s\nReady = %+v, want reason %s", tc.reason, readyCondition(plan.Status.Conditions), tc.want)
			}
			c := readyCondition(plan.Status.Conditions)
			wantStatus := metav1.ConditionFalse
			if tc.want == catalog.ReasonValid {
				wantStatus = metav1.ConditionTrue
			}
			if c.Status != wantStatus || c.Reason != string(tc.want) || c.Message == "" {
				t.Errorf("%s\nReady = %s/%s (%q), want %s/%s with a message", tc.reason, c.Status, c.Reason, c.Message, wantStatus, tc.want)
			}
			if wantHash := tc.want == catalog.ReasonValid; (plan.Status.SpecHash != "") != wantHash {
				t.Errorf("%s\nspecHash = %q, want one only for a valid plan", tc.reason, plan.Status.SpecHash)
			}
		})
	}

	// A second service with the same id makes both invalid; removing it
	// makes the first valid again.
	dup := &osbv1alpha1.SFService{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "svc-copy"},
		Spec:       osbv1alpha1.SFServiceSpec{ID: "svc", Name: "svc-copy", Description: "a copy"},
	}
	must(t, platform.Client.Create(ctx, dup))
	waitFor(t, "duplicate service ids reported", func() bool {
		svc := &osbv1alpha1.SFService{}
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "svc"}, svc))
		c := readyCondition(svc.Status.Conditions)
		return c != nil && c.Reason == string(catalog.ReasonDuplicateID)
	})
	must(t, platform.Client.Delete(ctx, dup))
	waitFor(t, "the service valid again", func() bool {
		svc := &osbv1alpha1.SFService{}
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "svc"}, svc))
		c := readyCondition(svc.Status.Conditions)
		return c != nil && c.Status == metav1.ConditionTrue
	})
}

// TestWritesPerInstance counts the API writes of one instance of a
// one-object plan, events included: one patch with the finalizer and
// clusterId and one status write on the onboarding cluster, one apply on
// the target cluster, and no event (issue #15: at most 3 writes per
// instance, events included; a success is in the conditions).
func TestWritesPerInstance(t *testing.T) {
	needsClusters(t)
	// Not parallel: the API servers' request counters are shared.
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	// A PodTemplate: a kind no other test renders on the shared target,
	// whose counter of single-object writes is this instance's only.
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		"apiVersion: v1\nkind: PodTemplate\nmetadata:\n  name: one\ntemplate:\n  spec:\n    containers:\n    - name: c\n      image: registry.invalid/c\n")})
	// The namespace exists on the target, as for every instance after
	// the first of a namespace.
	must(t, target.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	waitFor(t, "the plan to be validated", func() bool {
		p := &osbv1alpha1.SFPlan{}
		must(t, platform.Client.Get(context.Background(), client.ObjectKey{Namespace: e.catalog, Name: "plan"}, p))
		return p.Status.SpecHash != ""
	})
	onboardingBefore := writes(t, onboarding, "sfserviceinstances")
	targetBefore := writes(t, target, "podtemplates")
	e.createInstance(t, "inst", "svc", "plan", nil)
	e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	time.Sleep(quietPeriod)
	got := map[string]float64{
		"sfserviceinstances": writes(t, onboarding, "sfserviceinstances") - onboardingBefore,
		"podtemplates":       writes(t, target, "podtemplates") - targetBefore,
		"events":             eventWrites(t, e, "inst"),
	}
	// create (the test); finalizer and clusterId in one patch; status;
	// one apply; no event.
	want := map[string]float64{"sfserviceinstances": 3, "podtemplates": 1, "events": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("API writes, -want +got:\n%s\ntarget's counters:\n%s\nevents: %q", diff, metricLines(t, target, "podtemplates"), e.events(t, "inst"))
	}
	if total := got["sfserviceinstances"] - 1 + got["podtemplates"] + got["events"]; total > 3 {
		t.Errorf("the provisioner wrote %.0f times for one instance, events included; want at most 3", total)
	}

	// A binding as the broker creates it, with the provisioner's
	// finalizer already on it: the provisioner's only write is its
	// status (the plan renders nothing for bindings).
	bindingsBefore := writes(t, onboarding, "sfservicebindings")
	inst := e.instance(t, "inst")
	b := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bind",
			Finalizers: []string{osbv1alpha1.FinalizerBroker, osbv1alpha1.FinalizerProvisioner}},
		Spec: osbv1alpha1.SFServiceBindingSpec{ID: "bind", InstanceID: inst.Spec.InstanceID, PlanID: inst.Spec.PlanID, ServiceID: inst.Spec.ServiceID},
	}
	must(t, onboarding.Client.Create(context.Background(), b))
	e.waitBinding(t, "bind", osbv1alpha1.StateSucceeded)
	time.Sleep(quietPeriod)
	got = map[string]float64{
		"sfservicebindings": writes(t, onboarding, "sfservicebindings") - bindingsBefore,
		"events":            eventWrites(t, e, "bind"),
	}
	// create (the test, as the broker); status; no finalizer patch, no event.
	if diff := cmp.Diff(map[string]float64{"sfservicebindings": 2, "events": 0}, got); diff != "" {
		t.Errorf("API writes for a binding created with the provisioner's finalizer, -want +got:\n%s\nevents: %q", diff, e.events(t, "bind"))
	}
}

// eventWrites returns how many writes the events regarding the named object
// in e's namespace took: one per event, and one more per repetition of an
// event series. The API servers' counters are not used: they do not tell
// namespaces apart, and other tests' controllers may record events.
func eventWrites(t *testing.T, e *env, name string) float64 {
	t.Helper()
	list := &eventsv1.EventList{}
	must(t, e.onboarding().Client.List(context.Background(), list, client.InNamespace(e.ns)))
	var n float64
	for _, ev := range list.Items {
		if ev.Regarding.Name != name {
			continue
		}
		n++
		if ev.Series != nil && ev.Series.Count > 1 {
			n += float64(ev.Series.Count - 1)
		}
	}
	return n
}

// metricLines returns the request counters of c's API server for resource.
func metricLines(t *testing.T, c *testenv.Cluster, resource string) string {
	t.Helper()
	cs, err := kubernetesClient(c)
	must(t, err)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(t, err)
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="`+resource+`"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// writes sums the successful write requests (POST, PUT, PATCH, APPLY,
// DELETE) for resource that the API server of c counted.
func writes(t *testing.T, c *testenv.Cluster, resource string) float64 {
	t.Helper()
	cs, err := kubernetesClient(c)
	must(t, err)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(t, err)
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		if !strings.Contains(line, `code="2`) || !strings.Contains(line, `scope="resource"`) {
			// Only writes of one object that took effect count: not a
			// request refused under load and retried, nor the
			// collection deletes with which the namespace controller
			// empties a namespace another test deleted.
			continue
		}
		write := false
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
			if strings.Contains(line, `verb="`+verb+`"`) {
				write = true
			}
		}
		if !write {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v); err == nil {
			total += v
		}
	}
	return total
}

func rawString(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

// kubernetesClient returns a clientset for c.
func kubernetesClient(c *testenv.Cluster) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.Config)
}
