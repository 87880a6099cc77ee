package interoperator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// injectable is a provision template that interpolates a tenant parameter
// without quoting it, as plan authors easily write: a value with line
// breaks adds YAML documents of the tenant's choosing.
const injectable = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings-{{ .instance.metadata.name }}
data:
  greeting: {{ .instance.spec.parameters.greeting }}
`

// waitFailed waits for the instance to fail with reason and checks that
// its error mentions each of want.
func (e *env) waitFailed(t *testing.T, name string, reason provisioner.Reason, want ...string) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	inst := e.waitInstance(t, name, osbv1alpha1.StateFailed)
	if c := readyCondition(inst.Status.Conditions); c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(reason) {
		t.Errorf("instance %s: Ready = %+v, want False/%s", name, c, reason)
	}
	for _, w := range want {
		if !strings.Contains(inst.Status.Error, w) {
			t.Errorf("instance %s: error = %q, want it to mention %q", name, inst.Status.Error, w)
		}
	}
	return inst
}

// absent fails the test when obj exists on the target cluster.
func absent(t *testing.T, obj client.Object, why string) {
	t.Helper()
	err := target.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err == nil {
		t.Errorf("%T %s exists on the target cluster: %s", obj, client.ObjectKeyFromObject(obj), why)
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// TestRenderedObjectsRefused is the attack of issue #10 item 4: a plan
// interpolates a parameter without quoting it, and tenants' parameters add
// objects to the render: a ConfigMap in kube-system, a ClusterRoleBinding
// and a RoleBinding to cluster-admin, the adoption of an existing
// namespace. Each is refused before anything is applied: the instance
// fails with RenderedObjectRefused naming the object and the rule, and not
// even the plan's own ConfigMap is applied. A plan the ProviderConfig
// grants a namespace, a cluster-scoped kind and a ClusterRole may render
// them, and still no binding to cluster-admin.
func TestRenderedObjectsRefused(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	n := envCounter.Load() + 1000
	granted := fmt.Sprintf("granted-%d", n)
	must(t, target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: granted}}))
	e := newEnv(t, envOptions{configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.RenderPolicies = []interoperatorv1alpha1.RenderPolicy{{
			Plans:              []string{"granted"},
			Namespaces:         []string{granted},
			ClusterScopedKinds: []interoperatorv1alpha1.RenderPolicyKind{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}},
			ClusterRoles:       []string{"view"},
		}}
	}})
	e.createService(t, "svc")
	e.createPlan(t, "injectable", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, injectable)})
	e.createPlan(t, "granted", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, injectable)})

	crbName := func(id string) string { return e.name + "-" + id }
	tests := map[string]struct {
		reason  string
		plan    string
		inject  string
		want    provisioner.Reason
		mention []string
		absent  []client.Object
	}{
		"ConfigMapInKubeSystem": {
			reason:  "A namespaced object outside the instance's namespaces is refused.",
			plan:    "injectable",
			inject:  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: kube-system\ndata:\n  x: injected",
			want:    provisioner.ReasonRenderedObjectRefused,
			mention: []string{"ConfigMap kube-system/injected", apply.RuleOwnNamespaces},
			absent:  []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "injected"}}},
		},
		"ClusterRoleBindingToClusterAdmin": {
			reason: "A cluster-scoped kind is refused.",
			plan:   "injectable",
			inject: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + crbName("crb") +
				"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: system:authenticated",
			want:    provisioner.ReasonRenderedObjectRefused,
			mention: []string{"ClusterRoleBinding " + crbName("crb"), apply.RuleNamespacedKinds},
			absent:  []client.Object{&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crbName("crb")}}},
		},
		"RoleBindingToClusterAdmin": {
			reason: "A RoleBinding, even in the instance's namespace, may not refer to cluster-admin.",
			plan:   "injectable",
			inject: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: injected\n" +
				"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: system:authenticated",
			want:    provisioner.ReasonRenderedObjectRefused,
			mention: []string{"RoleBinding " + e.ns + "/injected", `"cluster-admin"`, apply.RuleBindableClusterRoles},
			absent:  []client.Object{&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "injected"}}},
		},
		"AdoptExistingNamespace": {
			reason:  "A Namespace that exists and is not the instance's is refused: applying it would make deprovision delete it.",
			plan:    "injectable",
			inject:  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default",
			want:    provisioner.ReasonRenderedObjectRefused,
			mention: []string{"Namespace default", apply.RuleOwnNamespaceObjects},
		},
		"GrantedDoesNotMeanClusterAdmin": {
			reason: "A grant of ClusterRoleBindings and the ClusterRole view does not allow cluster-admin.",
			plan:   "granted",
			inject: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + crbName("granted-admin") +
				"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: system:authenticated",
			want:    provisioner.ReasonRenderedObjectRefused,
			mention: []string{apply.RuleBindableClusterRoles},
			absent:  []client.Object{&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crbName("granted-admin")}}},
		},
	}
	for name, tc := range tests {
		e.createInstance(t, strings.ToLower(name), "svc", tc.plan, map[string]any{"greeting": "hi\n---\n" + tc.inject})
	}
	// The grant's widening works: a ConfigMap in the granted namespace and
	// a ClusterRoleBinding to view.
	e.createInstance(t, "granted-ok", "svc", "granted", map[string]any{"greeting": "hi\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: granted\n  namespace: " + granted + "\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + crbName("view") +
		"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: view\nsubjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: nobody"})
	t.Cleanup(func() {
		_ = target.Client.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crbName("view")}})
	})

	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id := strings.ToLower(name)
			inst := e.waitFailed(t, id, tc.want, tc.mention...)
			if len(inst.Status.Resources) != 0 {
				t.Errorf("%s\nstatus.resources = %+v, want none: nothing is applied", tc.reason, inst.Status.Resources)
			}
			for _, obj := range tc.absent {
				absent(t, obj, tc.reason)
			}
			if got := targetConfigMaps(t, e.ns, id); len(got) != 0 {
				t.Errorf("%s\nConfigMaps of the instance on the target = %v, want none: a refused render applies nothing", tc.reason, got)
			}
		})
	}
	t.Run("NamespaceNotAdopted", func(t *testing.T) {
		ns := &corev1.Namespace{}
		must(t, target.Client.Get(ctx, client.ObjectKey{Name: "default"}, ns))
		if v, ok := ns.Labels[provisioner.LabelInstanceID]; ok {
			t.Errorf("namespace default carries %s=%s: it was applied", provisioner.LabelInstanceID, v)
		}
	})
	t.Run("GrantWidens", func(t *testing.T) {
		e.waitInstance(t, "granted-ok", osbv1alpha1.StateSucceeded)
		must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: granted, Name: "granted"}, &corev1.ConfigMap{}))
		must(t, target.Client.Get(ctx, client.ObjectKey{Name: crbName("view")}, &rbacv1.ClusterRoleBinding{}))
	})
}

// TestHelmChartRefused renders a Helm chart whose template puts a value in
// without quoting it; the plan's values template quotes the parameter, but
// the chart does not, and the tenant's value adds a ClusterRoleBinding to
// cluster-admin. The chart's output passes the same policy as a
// gotemplate's: refused, nothing applied.
func TestHelmChartRefused(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: unquoted\nversion: 0.1.0\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "templates", "configmap.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: {{ .Values.greeting }}\n"), 0o600))
	e := newEnv(t, envOptions{})
	cm, err := catalog.ChartConfigMap(dir, e.catalog, "unquoted-chart")
	must(t, err)
	must(t, platform.Client.Create(ctx, cm))
	e.createService(t, "svc")
	e.createPlan(t, "helm", "svc", []osbv1alpha1.TemplateSpec{{
		Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeHelm,
		URL:     fmt.Sprintf("configmap://%s/unquoted-chart/unquoted-0.1.0.tgz", e.catalog),
		Content: "greeting: {{ .instance.spec.parameters.greeting | quote }}\n",
	}})
	crb := e.name + "-helm-crb"
	e.createInstance(t, "helm-attack", "svc", "helm", map[string]any{"greeting": "hi\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + crb +
		"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: system:authenticated"})
	e.createInstance(t, "helm-ok", "svc", "helm", map[string]any{"greeting": "hi"})

	e.waitFailed(t, "helm-attack", provisioner.ReasonRenderedObjectRefused, "ClusterRoleBinding "+crb, apply.RuleNamespacedKinds)
	absent(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crb}}, "the chart's injected ClusterRoleBinding was applied")
	if got := targetConfigMaps(t, e.ns, "helm-attack"); len(got) != 0 {
		t.Errorf("ConfigMaps of the refused instance = %v, want none", got)
	}
	e.waitInstance(t, "helm-ok", osbv1alpha1.StateSucceeded)
}

// sourceLeakPlan provisions nothing of note and, for a binding, names a
// source from the binding's parameters and returns its data as the bind
// response: the plan of issue #10 item 4 that handed out another tenant's
// token.
var sourceLeakPlan = []osbv1alpha1.TemplateSpec{
	gotemplate(osbv1alpha1.ActionProvision, configMaps("own")),
	gotemplate(osbv1alpha1.ActionSources, `{{- with .binding }}
secret:
  apiVersion: v1
  kind: Secret
  name: {{ .spec.parameters.name }}
  namespace: {{ .spec.parameters.namespace }}
{{- end }}`),
	gotemplate(osbv1alpha1.ActionStatus, `provision:
  state: succeeded
bind:
  state: succeeded
  response: {{ dict "credentials" (dict "token" (.secret | default dict).data) | toJson | squote }}`),
}

// TestSourceRefused: a binding's parameters name another instance's token
// Secret as a source, in the namespace the instances share and in the
// victim's own namespace. Both are refused with SourceRefused; no bind
// response Secret is written and the token appears nowhere.
func TestSourceRefused(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	const token = "victim-token-4b1d"
	victimNS := e.name + "-victim"
	e.createPlan(t, "victim", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: token
stringData:
  token: %[2]s
---
apiVersion: v1
kind: Secret
metadata:
  name: token
  namespace: %[1]s
stringData:
  token: %[2]s
`, victimNS, token))})
	e.createPlan(t, "attacker", "svc", sourceLeakPlan)
	e.createInstance(t, "victim", "svc", "victim", nil)
	attacker := e.createInstance(t, "attacker", "svc", "attacker", nil)
	e.waitInstance(t, "victim", osbv1alpha1.StateSucceeded)
	e.waitInstance(t, "attacker", osbv1alpha1.StateSucceeded)
	t.Cleanup(func() {
		_ = target.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victimNS}})
	})

	tests := map[string]struct {
		reason    string
		namespace string
		mention   string
	}{
		"shared-namespace": {
			reason:    "In the namespace both instances use, the victim's Secret carries the victim's instance id.",
			namespace: e.ns,
			mention:   "another instance",
		},
		"victim-namespace": {
			reason:    "The victim's own namespace is not the attacker's.",
			namespace: victimNS,
			mention:   apply.RuleOwnSources,
		},
	}
	for name, tc := range tests {
		must(t, onboarding.Client.Create(ctx, &osbv1alpha1.SFServiceBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
			Spec: osbv1alpha1.SFServiceBindingSpec{ID: name, InstanceID: attacker.Spec.InstanceID,
				PlanID: attacker.Spec.PlanID, ServiceID: attacker.Spec.ServiceID,
				Parameters: rawJSON(t, map[string]any{"name": "token", "namespace": tc.namespace})},
		}))
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := e.waitBinding(t, name, osbv1alpha1.StateFailed)
			if !strings.Contains(b.Status.Error, tc.mention) || !strings.Contains(b.Status.Error, "Secret "+tc.namespace+"/token") {
				t.Errorf("%s\nerror = %q, want it to name the Secret and say %q", tc.reason, b.Status.Error, tc.mention)
			}
			if c := readyCondition(b.Status.Conditions); c == nil || c.Reason != string(provisioner.ReasonSourceRefused) {
				t.Errorf("%s\nReady = %+v, want reason %s", tc.reason, c, provisioner.ReasonSourceRefused)
			}
			if strings.Contains(fmt.Sprintf("%+v", b), token) {
				t.Errorf("%s\nthe victim's token is in the binding", tc.reason)
			}
			err := onboarding.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: provisioner.BindingSecretPrefix + name}, &corev1.Secret{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s\nbind response Secret: err = %v, want NotFound", tc.reason, err)
			}
		})
	}
}

// TestNoNetworkFunctions: getHostByName, env and expandenv are not
// template functions; a plan using them is invalid and its instances fail.
func TestNoNetworkFunctions(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	for _, fn := range []string{`getHostByName "localhost"`, `env "HOME"`, `expandenv "$HOME"`} {
		name := strings.ToLower(strings.Fields(fn)[0])
		e.createPlan(t, name, "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  v: {{ "+fn+" | quote }}\n")})
		e.createInstance(t, name, "svc", name, nil)
	}
	for _, fn := range []string{"getHostByName", "env", "expandenv"} {
		t.Run(fn, func(t *testing.T) {
			inst := e.waitInstance(t, strings.ToLower(fn), osbv1alpha1.StateFailed)
			if want := fmt.Sprintf("function %q not defined", fn); !strings.Contains(inst.Status.Error, want) {
				t.Errorf("error = %q, want it to say %s", inst.Status.Error, want)
			}
			if c := readyCondition(inst.Status.Conditions); c == nil || !containsReason([]provisioner.Reason{provisioner.ReasonPlanInvalid, provisioner.ReasonTemplateFailed}, c.Reason) {
				t.Errorf("Ready = %+v, want PlanInvalid or TemplateFailed", c)
			}
		})
	}
}

// workloadPlan renders what issue #10 item 6 left behind: a namespace of
// the instance's own, its quota, a ServiceAccount and a RoleBinding, then
// a ConfigMap made from the parameters (repeated times times).
func workloadPlan(times int) string {
	return fmt.Sprintf(`{{- $ns := printf "sf-%%s" .instance.metadata.name }}
apiVersion: v1
kind: Namespace
metadata:
  name: {{ $ns }}
---
apiVersion: v1
kind: ResourceQuota
metadata:
  name: quota
  namespace: {{ $ns }}
spec:
  hard:
    pods: "10"
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: owner
  namespace: {{ $ns }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: owner
  namespace: {{ $ns }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: admin
subjects:
- kind: ServiceAccount
  name: owner
  namespace: {{ $ns }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .instance.spec.parameters.name | default "data" }}
  namespace: {{ $ns }}
data:
  blob: {{ repeat %d (.instance.spec.parameters.blob | default "") | quote }}
`, times)
}

// workload returns the objects of workloadPlan for instance id.
func workload(id string) []client.Object {
	ns := "sf-" + id
	return []client.Object{
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
	}
}

// TestOversizedInput is issue #10 item 6: parameters that pass the plan's
// schema but are larger than an instance can record, and parameters that
// render an object larger than etcd stores. Each instance fails at once
// with a reason, applies nothing, and does not loop; deprovision then
// leaves nothing behind.
func TestOversizedInput(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	e.createPlan(t, "once", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, workloadPlan(1))})
	e.createPlan(t, "eightfold", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, workloadPlan(8))})

	// 800 KiB: below the broker's 1 MiB body limit and etcd's, so the
	// instance is stored; twice that (spec and status.appliedSpec) is more
	// than etcd stores, so the status write after the apply would fail on
	// every attempt and leave the applied objects unrecorded.
	big := strings.Repeat("x", 800<<10)
	// 200 kB, eight times: a 1.6 MB ConfigMap.
	medium := strings.Repeat("y", 200<<10)
	hold := func(i *osbv1alpha1.SFServiceInstance) { controllerutil.AddFinalizer(i, holdFinalizer) }
	e.createInstance(t, "big-params", "svc", "once", map[string]any{"blob": big}, hold)
	e.createInstance(t, "big-render", "svc", "eightfold", map[string]any{"blob": medium}, hold)

	tests := map[string]struct {
		reason  provisioner.Reason
		mention string
	}{
		"big-params": {reason: provisioner.ReasonParametersTooLarge, mention: "parameters"},
		"big-render": {reason: provisioner.ReasonResourceTooLarge, mention: "ConfigMap sf-big-render/data"},
	}
	for id, tc := range tests {
		t.Run(id, func(t *testing.T) {
			inst := e.waitFailed(t, id, tc.reason, tc.mention)
			if len(inst.Status.Resources) != 0 {
				t.Errorf("status.resources = %+v, want none: nothing is applied", inst.Status.Resources)
			}
			for _, obj := range workload(id) {
				absent(t, obj, "a failed oversized render applied it")
			}
		})
	}

	// Failures are final: no loop.
	e.expectQuiet(t, "after both instances failed")

	for id := range tests {
		inst := e.instance(t, id)
		must(t, onboarding.Client.Delete(context.Background(), inst))
		deprovisioned := e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
		if len(deprovisioned.Status.Resources) != 0 {
			t.Errorf("%s: status.resources after deprovision = %+v", id, deprovisioned.Status.Resources)
		}
		release(t, e, id)
	}
}

// TestDeprovisionAfterPartialApply: the API server rejects the last object
// of a render after the namespace, quota, ServiceAccount and RoleBinding
// were applied. The instance fails, status.resources records what was
// applied, and deprovision deletes all of it.
func TestDeprovisionAfterPartialApply(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, workloadPlan(1))})
	const id = "partial"
	e.createInstance(t, id, "svc", "plan", map[string]any{"name": "Bad_Name", "blob": "z"},
		func(i *osbv1alpha1.SFServiceInstance) { controllerutil.AddFinalizer(i, holdFinalizer) })

	inst := e.waitFailed(t, id, provisioner.ReasonResourceRejected, "Bad_Name")
	ns := "sf-" + id
	want := []osbv1alpha1.Source{
		{APIVersion: "v1", Kind: "Namespace", Name: ns},
		{APIVersion: "v1", Kind: "ResourceQuota", Name: "quota", Namespace: ns},
		{APIVersion: "v1", Kind: "ServiceAccount", Name: "owner", Namespace: ns},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: "owner", Namespace: ns},
	}
	if !sameSources(inst.Status.Resources, want) {
		t.Fatalf("status.resources = %+v, want what was applied before the rejected object: %+v", inst.Status.Resources, want)
	}
	for _, obj := range workload(id) {
		must(t, target.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}

	must(t, onboarding.Client.Delete(context.Background(), inst))
	e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
	for _, obj := range workload(id) {
		waitGone(t, target.Client, obj)
	}
	release(t, e, id)
}
