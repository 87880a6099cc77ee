package interoperator_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// uniqueName returns prefix and eight random lowercase letters or digits:
// names that parallel tests on the shared target cluster do not share.
func uniqueName(prefix string) string {
	return prefix + strings.ToLower(rand.Text()[:8])
}

// TestSameNameInstances plays issue #32's takeover with two tenants and
// one instance name. Tenant A's instance lives where the broker puts it
// (onboarding namespace sf-<name>); tenant B, with rights in its own
// namespace only, creates an SFServiceInstance of the same name and plan
// there, binds it, reads with the binding's token and deletes it. Before
// the fix B's instance adopted A's namespace (both were sf-<name>,
// labelled with the bare name), B's token read A's data and B's deletion
// deleted A's namespace. Now each gets its own namespace (.instanceId),
// sees only its own data, and deletes only its own objects; for the
// sample gotemplate plan and the sample Helm plan alike.
func TestSameNameInstances(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	plans := []struct{ name, id, instance string }{
		{"small", samplePlanSmall, uniqueName("victim-")},
		{"helm", samplePlanHelm, uniqueName("victim-")},
	}
	nsB := uniqueName("tenant-b-")
	namespaces := []string{nsB}
	for _, p := range plans {
		namespaces = append(namespaces, provisioner.BrokerNamespacePrefix+p.instance)
	}
	e := newEnv(t, envOptions{moreNamespaces: namespaces})
	applySamplePlans(t, e)
	b := e.tenant(nsB)
	ctx := context.Background()

	for _, plan := range plans {
		t.Run(plan.name, func(t *testing.T) {
			inst := plan.instance
			a := e.tenant(provisioner.BrokerNamespacePrefix + inst)
			// Tenant A provisions and stores data with its binding's token.
			a.createInstance(t, inst, sampleServiceID, plan.id, nil)
			instA := a.waitInstance(t, inst, osbv1alpha1.StateSucceeded)
			workA := "sf-" + provisioner.InstanceID(a.ns, inst)
			if !hasNamespace(instA.Status.Resources, workA) {
				t.Fatalf("A's instance: status.resources = %+v, want its namespace %s", instA.Status.Resources, workA)
			}
			must(t, target.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workA, Name: "a-data"}, Data: map[string]string{"secret": "A's"}}))

			// Tenant B: same name, same plan, its own namespace.
			b.createInstance(t, inst, sampleServiceID, plan.id, nil)
			instB := b.waitInstance(t, inst, osbv1alpha1.StateSucceeded)
			workB := "sf-" + provisioner.InstanceID(b.ns, inst)
			if workB == workA {
				t.Fatalf("both instances %s got the namespace %s", inst, workA)
			}
			if hasNamespace(instB.Status.Resources, workA) {
				t.Fatalf("B's instance recorded A's namespace %s: %+v", workA, instB.Status.Resources)
			}
			if !hasNamespace(instB.Status.Resources, workB) {
				t.Errorf("B's instance: status.resources = %+v, want its own namespace %s", instB.Status.Resources, workB)
			}
			for _, ns := range []struct{ name, uid string }{{workA, string(instA.UID)}, {workB, string(instB.UID)}} {
				got := &corev1.Namespace{}
				must(t, target.Client.Get(ctx, client.ObjectKey{Name: ns.name}, got))
				if got.Labels[provisioner.LabelInstanceUID] != ns.uid {
					t.Errorf("namespace %s: labels %v, want %s=%s", ns.name, got.Labels, provisioner.LabelInstanceUID, ns.uid)
				}
			}

			if plan.name == "small" {
				// B's binding reads its own namespace, never A's.
				bid := uniqueName("bind-")
				b.createBinding(t, bid, instB)
				credsB := b.bindCredentials(t, bid)
				if credsB.Namespace != workB {
					t.Errorf("B's credentials are for namespace %q, want %q", credsB.Namespace, workB)
				}
				tokenB := tenantClient(t, credsB.APIServer, credsB.CAData, credsB.Token)
				must(t, tokenB.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workB, Name: "b-data"}}))
				if err := tokenB.Get(ctx, client.ObjectKey{Namespace: workA, Name: "a-data"}, &corev1.ConfigMap{}); !apierrors.IsForbidden(err) {
					t.Errorf("B's token reading A's ConfigMap: %v, want Forbidden", err)
				}
				deleteAndWait(t, onboarding.Client, b.binding(t, bid))
			}

			// B deprovisions: its namespace goes, A's stays with its data.
			deleteAndWait(t, onboarding.Client, instB)
			waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workB}})
			cm := &corev1.ConfigMap{}
			if err := target.Client.Get(ctx, client.ObjectKey{Namespace: workA, Name: "a-data"}, cm); err != nil || cm.Data["secret"] != "A's" {
				t.Fatalf("A's data after B's deprovision: %v %v, want it untouched", err, cm.Data)
			}
			if got := a.instance(t, inst); got == nil || got.Status.State != osbv1alpha1.StateSucceeded {
				t.Errorf("A's instance after B's deprovision: %s, want succeeded", describeInstance(got))
			}
			deleteAndWait(t, onboarding.Client, instA)
			waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workA}})
		})
	}
}

// TestNoAdoption shows that an instance never takes over an object that
// is another instance's, whatever its plan renders: a plan written for
// Service Fabrik, which names its namespace after the instance name, and
// a plan that puts an object named after the instance into a namespace
// the platform operator shares between instances. The second instance of
// a name fails with ResourceConflict, and the message does not reveal the
// first one's tenant; the first keeps everything.
func TestNoAdoption(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	nsB, shared := uniqueName("tenant-b-"), uniqueName("shared-")
	must(t, target.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shared}}))
	e := newEnv(t, envOptions{moreNamespaces: []string{nsB}, configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.RenderPolicies = []interoperatorv1alpha1.RenderPolicy{{Plans: []string{"shared-plan"}, Namespaces: []string{shared}}}
	}})
	a, b := e, e.tenant(nsB)
	nsA := a.ns
	ctx := context.Background()
	e.createService(t, "svc")
	e.createPlan(t, "sf-plan", "svc", []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: `
apiVersion: v1
kind: Namespace
metadata:
  name: sfstyle-{{ .instance.metadata.name }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: data
  namespace: sfstyle-{{ .instance.metadata.name }}
data:
  owner: {{ .instance.metadata.namespace | quote }}
`}})
	e.createPlan(t, "shared-plan", "svc", []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: own-{{ .instanceId }}
data:
  owner: {{ .instance.metadata.namespace | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg-{{ .instance.metadata.name }}
  namespace: ` + shared + `
data:
  owner: {{ .instance.metadata.namespace | quote }}
`}})
	waitPlansReady(t, e, "sf-plan", "shared-plan")

	for _, tc := range []struct {
		plan string
		// object is A's object, named after the instance name, that
		// B's instance renders too.
		object func(inst string) client.ObjectKey
		// created is what B's instance creates before it meets A's
		// object: it records it, and its deprovision deletes it.
		created int
	}{
		{"sf-plan", func(inst string) client.ObjectKey {
			return client.ObjectKey{Namespace: "sfstyle-" + inst, Name: "data"}
		}, 0},
		{"shared-plan", func(inst string) client.ObjectKey { return client.ObjectKey{Namespace: shared, Name: "cfg-" + inst} }, 1},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			inst := uniqueName("dup-")
			key := tc.object(inst)
			a.createInstance(t, inst, "svc", tc.plan, nil)
			instA := a.waitInstance(t, inst, osbv1alpha1.StateSucceeded)
			b.createInstance(t, inst, "svc", tc.plan, nil)
			instB := b.waitInstance(t, inst, osbv1alpha1.StateFailed)
			c := readyCondition(instB.Status.Conditions)
			if c == nil || c.Reason != string(provisioner.ReasonResourceConflict) {
				t.Fatalf("B's instance: Ready = %+v, want reason %s", c, provisioner.ReasonResourceConflict)
			}
			if !strings.Contains(c.Message, "belongs to another instance") || strings.Contains(c.Message, nsA) {
				t.Errorf("B's message %q: want it to name the conflict and not A's namespace %s", c.Message, nsA)
			}
			if len(instB.Status.Resources) != tc.created {
				t.Errorf("B's instance recorded %+v, want the %d objects it created", instB.Status.Resources, tc.created)
			}
			for _, r := range instB.Status.Resources {
				if r.Namespace != nsB || !strings.HasPrefix(r.Name, "own-") {
					t.Errorf("B's instance recorded %+v, want only its own object in %s", r, nsB)
				}
			}
			got := &corev1.ConfigMap{}
			must(t, target.Client.Get(ctx, key, got))
			if got.Data["owner"] != nsA || got.Labels[provisioner.LabelInstanceUID] != string(instA.UID) {
				t.Errorf("A's object after B's attempt: data %v labels %v, want A's", got.Data, got.Labels)
			}
			// B's deprovision deletes nothing of A's.
			deleteAndWait(t, onboarding.Client, instB)
			must(t, target.Client.Get(ctx, key, got))
			if got.Data["owner"] != nsA {
				t.Errorf("A's object after B's deprovision: %v, want A's", got.Data)
			}
			for _, r := range instB.Status.Resources {
				err := target.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, &corev1.ConfigMap{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("B's own %s/%s after its deprovision: %v, want it deleted", r.Namespace, r.Name, err)
				}
			}
		})
	}
}

// applySamplePlans creates the sample service and its plans small and
// helm in the env's catalog namespace, with the Helm chart in a ConfigMap
// there, and waits until both plans are valid.
func applySamplePlans(t *testing.T, e *env) {
	t.Helper()
	createSampleObjects(t, e, func(o *unstructured.Unstructured) {
		if o.GetKind() != "SFPlan" {
			return
		}
		templates, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
		for _, x := range templates {
			tmpl := x.(map[string]any)
			if url, ok := tmpl["url"].(string); ok {
				tmpl["url"] = strings.Replace(url, "configmap://interoperator/", "configmap://"+e.catalog+"/", 1)
			}
		}
		must(t, unstructured.SetNestedSlice(o.Object, templates, "spec", "templates"))
	}, "service.yaml", "plan-small.yaml", "plan-helm.yaml")
	cm, err := catalog.ChartConfigMap(filepath.Join(sampleDir, "charts", "namespace-quota"), e.catalog, "namespace-quota-chart")
	must(t, err)
	must(t, platform.Client.Create(context.Background(), cm))
	waitPlansReady(t, e, "kubernetes-namespace-small", "kubernetes-namespace-medium-helm")
}

// waitPlansReady waits until the env's plans of the given names are valid.
func waitPlansReady(t *testing.T, e *env, names ...string) {
	t.Helper()
	for _, name := range names {
		waitFor(t, "plan "+name+" Ready", func() bool {
			p := &osbv1alpha1.SFPlan{}
			must(t, platform.Client.Get(context.Background(), client.ObjectKey{Namespace: e.catalog, Name: name}, p))
			c := readyCondition(p.Status.Conditions)
			return c != nil && c.Status == metav1.ConditionTrue && p.Status.SpecHash != ""
		})
	}
}

// hasNamespace reports whether resources lists the Namespace name.
func hasNamespace(resources []osbv1alpha1.Source, name string) bool {
	for _, r := range resources {
		if r.Kind == "Namespace" && r.Name == name {
			return true
		}
	}
	return false
}

// TestObjectsOfEarlierVersions shows the upgrade path: objects that an
// earlier version labelled only with the bare instance name stay their
// instance's, because its status.resources lists them, and another
// tenant's instance of the same name cannot claim them by that name.
func TestObjectsOfEarlierVersions(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	nsB := uniqueName("tenant-b-")
	e := newEnv(t, envOptions{moreNamespaces: []string{nsB}})
	a, b := e, e.tenant(nsB)
	ctx := context.Background()
	e.createService(t, "svc")
	e.createPlan(t, "sf-plan", "svc", []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: `
apiVersion: v1
kind: Namespace
metadata:
  name: old-{{ .instance.metadata.name }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: data
  namespace: old-{{ .instance.metadata.name }}
data:
  size: {{ (default dict .instance.spec.parameters).size | default "1" | quote }}
`}})
	waitPlansReady(t, e, "sf-plan")
	inst := uniqueName("old-")
	a.createInstance(t, inst, "svc", "sf-plan", nil)
	instA := a.waitInstance(t, inst, osbv1alpha1.StateSucceeded)
	// What an earlier version left: the bare name, no UID.
	keys := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old-" + inst}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "old-" + inst, Name: "data"}},
	}
	for _, o := range keys {
		must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(o), o))
		labels := o.GetLabels()
		delete(labels, provisioner.LabelInstanceUID)
		labels[provisioner.LabelInstanceID] = inst
		o.SetLabels(labels)
		must(t, target.Client.Update(ctx, o))
	}

	// B's instance of the same name does not list them: they are not its.
	b.createInstance(t, inst, "svc", "sf-plan", nil)
	instB := b.waitInstance(t, inst, osbv1alpha1.StateFailed)
	if c := readyCondition(instB.Status.Conditions); c == nil || c.Reason != string(provisioner.ReasonResourceConflict) {
		t.Fatalf("B's instance: Ready = %+v, want reason %s", c, provisioner.ReasonResourceConflict)
	}

	// A's update applies over them and labels them with its UID.
	edit(t, onboarding.Client, instA, func() { instA.Spec.Parameters = rawJSON(t, map[string]any{"size": "2"}) })
	a.waitInstance(t, inst, osbv1alpha1.StateSucceeded)
	for _, o := range keys {
		must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(o), o))
		if o.GetLabels()[provisioner.LabelInstanceUID] != string(instA.UID) {
			t.Errorf("%T %s after A's update: labels %v, want A's UID", o, o.GetName(), o.GetLabels())
		}
	}
	cm := keys[1].(*corev1.ConfigMap)
	if cm.Data["size"] != "2" {
		t.Errorf("A's ConfigMap after the update: %v, want size 2", cm.Data)
	}
}

// TestUpgradeKeepsTheInstancesNamespaces shows that an instance an earlier
// version provisioned with the sample plan, whose templates then named its
// namespace sf-<name>, keeps that namespace and its data when the plan's
// update re-renders it after the upgrade: its .instanceId stays its name
// (recorded in status.instanceId), where a new instance of the same name
// and namespace would get sf-<name>-<hash>.
func TestUpgradeKeepsTheInstancesNamespaces(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	createSampleObjects(t, e, nil, "service.yaml")
	name := uniqueName("old-")
	work, creds := "sf-"+name, credentialsNamespace(name)

	// What the earlier version left: the instance with its status, and
	// its objects labelled with the bare name. The plan is not there yet,
	// so the inter-operator waits instead of provisioning it first.
	inst := e.createInstance(t, name, sampleServiceID, samplePlanSmall, nil)
	waitFor(t, "the instance to wait for its plan", func() bool {
		c := readyCondition(e.instance(t, name).Status.Conditions)
		return c != nil && c.Reason == string(provisioner.ReasonPlanNotFound)
	})
	legacy := map[string]string{provisioner.LabelInstanceID: name}
	for _, ns := range []string{work, creds} {
		must(t, target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: legacy}}))
	}
	must(t, target.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: work, Name: "tenant-data"}, Data: map[string]string{"k": "v"}}))
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		must(t, onboarding.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst))
		inst.Status.State = osbv1alpha1.StateSucceeded
		inst.Status.ObservedGeneration = inst.Generation
		inst.Status.AppliedSpec = inst.Spec.DeepCopy()
		inst.Status.Resources = []osbv1alpha1.Source{
			{APIVersion: "v1", Kind: "Namespace", Name: work},
			{APIVersion: "v1", Kind: "ResourceQuota", Name: "quota", Namespace: work},
			{APIVersion: "v1", Kind: "Namespace", Name: creds},
		}
		return onboarding.Client.Status().Update(ctx, inst)
	}))

	// The new version's plan arrives (autoUpdateInstances): the instance
	// is rendered again, into the namespaces it has.
	createSampleObjects(t, e, nil, "plan-small.yaml")
	waitFor(t, "the instance to be rendered again with its recorded id", func() bool {
		i := e.instance(t, name)
		return i.Status.InstanceID != "" && i.Status.State == osbv1alpha1.StateSucceeded && i.Annotations[osbv1alpha1.AnnotationPlanHash] != ""
	})
	got := e.instance(t, name)
	if got.Status.InstanceID != name {
		t.Errorf("status.instanceId = %q, want the name %q, after which the earlier version named its namespaces", got.Status.InstanceID, name)
	}
	ns := &corev1.Namespace{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Name: work}, ns))
	if ns.Labels[provisioner.LabelInstanceUID] != string(got.UID) || ns.DeletionTimestamp != nil {
		t.Errorf("namespace %s after the upgrade: labels %v, deleting %v; want it kept and labelled with the instance's UID", work, ns.Labels, ns.DeletionTimestamp != nil)
	}
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: work, Name: "tenant-data"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the tenant's data after the upgrade: %v", err)
	}
	moved := "sf-" + provisioner.InstanceID(e.ns, name)
	if err := target.Client.Get(ctx, client.ObjectKey{Name: moved}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s (where a new instance would go): %v, want NotFound", moved, err)
	}
}
