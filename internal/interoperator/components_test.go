package interoperator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
)

// operatorChart writes version of a small "service operator" chart into a
// directory and returns it: a CRD (widgets.<group>), a ClusterRole, a
// ConfigMap with the value greeting (required) and, in version 0.1.0
// only, a ServiceAccount, which an upgrade must prune.
func operatorChart(t *testing.T, group, version string) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "crds"), 0o755))
	files := map[string]string{
		"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: operator\nversion: %s\n", version),
		"crds/widgets.yaml": fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group),
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: operator-config\ndata:\n" +
			"  greeting: {{ required \"greeting is required\" .Values.greeting | quote }}\n  version: {{ .Chart.Version | quote }}\n",
		"templates/clusterrole.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + group + "-operator\n" +
			"rules:\n- apiGroups: [\"" + group + "\"]\n  resources: [widgets]\n  verbs: [get, list, watch]\n",
	}
	if version == "0.1.0" {
		files["templates/serviceaccount.yaml"] = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: operator\n"
	}
	for name, text := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	return dir
}

// TestSFClusterComponents installs a service operator's chart on a
// workload cluster named in the SFCluster's spec.components: the
// scheduler keeps instances away until it is installed, an instance of a
// plan that needs the operator's kind then provisions there, a new chart
// version with new values upgrades it (and prunes what the new version
// dropped), removing the component uninstalls it, and deleting the
// SFCluster removes the components before it goes.
func TestSFClusterComponents(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	workload := sharedWorkloads(t)["w2"]
	e := newEnv(t, envOptions{noCluster: true, setup: []interoperator.Option{
		interoperator.WithClusterChecks(2*time.Second, 200*time.Millisecond, 2*time.Second)}})
	group := e.name + ".example.com"
	for i, version := range []string{"0.1.0", "0.2.0"} {
		cm, err := catalog.ChartConfigMap(operatorChart(t, group, version), e.catalog, fmt.Sprintf("operator-chart-%d", i+1))
		must(t, err)
		must(t, platform.Client.Create(ctx, cm))
	}
	chartURL := func(i int, version string) string {
		return fmt.Sprintf("configmap://%s/operator-chart-%d/operator-%s.tgz", e.catalog, i, version)
	}
	values := func(v map[string]any) *runtime.RawExtension {
		if v == nil {
			return nil
		}
		b, err := json.Marshal(v)
		must(t, err)
		return &runtime.RawExtension{Raw: b}
	}
	component := func(chart string, vals map[string]any) resourcev1alpha1.SFClusterComponent {
		return resourcev1alpha1.SFClusterComponent{Name: "operator", Namespace: "operator-system",
			Chart: resourcev1alpha1.SFClusterComponentChart{URL: chart}, Values: values(vals)}
	}
	sfcKey := client.ObjectKey{Namespace: e.catalog, Name: "w"}
	getCluster := func() *resourcev1alpha1.SFCluster {
		sfc := &resourcev1alpha1.SFCluster{}
		if err := platform.Client.Get(ctx, sfcKey, sfc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			t.Fatal(err)
		}
		return sfc
	}
	setComponents := func(comps ...resourcev1alpha1.SFClusterComponent) {
		t.Helper()
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"components": comps}})
		must(t, err)
		must(t, platform.Client.Patch(ctx, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "w"}},
			client.RawPatch("application/merge-patch+json", patch)))
	}
	// waitComponents waits until ComponentsReady describes the current
	// generation with reason (or is absent when reason is "").
	waitComponents := func(reason string) *resourcev1alpha1.SFCluster {
		t.Helper()
		var sfc *resourcev1alpha1.SFCluster
		waitFor(t, "ComponentsReady reason "+reason, func() bool {
			sfc = getCluster()
			c := apimeta.FindStatusCondition(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionComponentsReady)
			if reason == "" {
				return c == nil && len(sfc.Status.Components) == 0
			}
			return c != nil && c.Reason == reason && c.ObservedGeneration == sfc.Generation
		})
		return sfc
	}
	operatorConfig := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		err := workload.Client.Get(ctx, client.ObjectKey{Namespace: "operator-system", Name: "operator-config"}, cm)
		if apierrors.IsNotFound(err) {
			return nil
		}
		must(t, err)
		return cm
	}

	// The SFCluster joins with a component whose values lack what the
	// chart requires: InstallFailed, and nothing is scheduled there.
	e.registerCluster(t, "w", workload.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.Components = []resourcev1alpha1.SFClusterComponent{component(chartURL(1, "0.1.0"), nil)}
	})
	sfc := waitComponents(resourcev1alpha1.SFClusterReasonInstallFailed)
	if c := apimeta.FindStatusCondition(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionComponentsReady); !strings.Contains(c.Message, "greeting is required") {
		t.Errorf("ComponentsReady message = %q, want the chart's error", c.Message)
	}

	e.createService(t, "svc")
	e.createPlan(t, "widgets", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		"apiVersion: "+group+"/v1\nkind: Widget\nmetadata:\n  name: widget\nspec:\n  size: 1\n")})
	e.createInstance(t, "needs-operator", "svc", "widgets", nil)
	waitFor(t, "the instance to wait for the cluster's components", func() bool {
		inst := e.instance(t, "needs-operator")
		r := readyCondition(inst.Status.Conditions)
		return r != nil && r.Reason == clusters.ReasonNoClusterAvailable && strings.Contains(r.Message, "w: components not installed (InstallFailed)")
	})
	if inst := e.instance(t, "needs-operator"); inst.Spec.ClusterID != "" {
		t.Fatalf("the instance was placed on %q before the cluster's components were installed", inst.Spec.ClusterID)
	}

	// Fixing the values installs the chart; the waiting instance is placed
	// and provisions a Widget, a kind only the component defines.
	setComponents(component(chartURL(1, "0.1.0"), map[string]any{"greeting": "hello"}))
	sfc = waitComponents(resourcev1alpha1.SFClusterReasonInstalled)
	if len(sfc.Status.Components) != 1 {
		t.Fatalf("status.components = %+v, want one", sfc.Status.Components)
	}
	st := sfc.Status.Components[0]
	if st.Name != "operator" || st.Version != "0.1.0" || st.Hash == "" || st.Chart != chartURL(1, "0.1.0") || len(st.Resources) != 4 {
		t.Errorf("status of the component = %+v, want operator 0.1.0 with a hash and 4 resources (CRD, ClusterRole, ConfigMap, ServiceAccount)", st)
	}
	if cm := operatorConfig(); cm == nil || cm.Data["greeting"] != "hello" || cm.Labels[clusters.LabelComponent] != "operator" {
		t.Fatalf("operator-config on the workload cluster = %+v, want greeting hello and the component label", cm)
	}
	must(t, workload.Client.Get(ctx, client.ObjectKey{Namespace: "operator-system", Name: "operator"}, &corev1.ServiceAccount{}))
	must(t, workload.Client.Get(ctx, client.ObjectKey{Name: group + "-operator"}, &rbacv1.ClusterRole{}))
	inst := e.waitInstance(t, "needs-operator", osbv1alpha1.StateSucceeded)
	if inst.Spec.ClusterID != "w" {
		t.Errorf("instance placed on %q, want w", inst.Spec.ClusterID)
	}
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(group + "/v1")
	widget.SetKind("Widget")
	must(t, workload.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "widget"}, widget))

	// A new chart version with new values upgrades the component and
	// prunes the ServiceAccount that version 0.2.0 no longer has.
	setComponents(component(chartURL(2, "0.2.0"), map[string]any{"greeting": "bye"}))
	waitFor(t, "the upgrade to 0.2.0", func() bool {
		sfc = getCluster()
		c := apimeta.FindStatusCondition(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionComponentsReady)
		return c != nil && c.Reason == resourcev1alpha1.SFClusterReasonInstalled && c.ObservedGeneration == sfc.Generation &&
			len(sfc.Status.Components) == 1 && sfc.Status.Components[0].Version == "0.2.0"
	})
	if got := sfc.Status.Components[0]; got.Hash == st.Hash || len(got.Resources) != 3 {
		t.Errorf("status after the upgrade = %+v, want a new hash and 3 resources", got)
	}
	if cm := operatorConfig(); cm == nil || cm.Data["greeting"] != "bye" || cm.Data["version"] != "0.2.0" {
		t.Errorf("operator-config after the upgrade = %+v, want greeting bye, version 0.2.0", cm)
	}
	waitGone(t, workload.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "operator-system", Name: "operator"}})

	// Removing the component uninstalls it; the instance stays.
	setComponents()
	waitComponents("")
	waitGone(t, workload.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "operator-system", Name: "operator-config"}})
	waitGone(t, workload.Client, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: group + "-operator"}})
	waitGone(t, workload.Client, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group}})

	// Offboarding: with the component back, deleting the SFCluster waits
	// for the instance, then removes the component, then the SFCluster
	// goes.
	setComponents(component(chartURL(2, "0.2.0"), map[string]any{"greeting": "again"}))
	waitComponents(resourcev1alpha1.SFClusterReasonInstalled)
	must(t, platform.Client.Delete(ctx, getCluster()))
	waitFor(t, "the deletion to wait for the instance", func() bool {
		c := apimeta.FindStatusCondition(getCluster().Status.Conditions, resourcev1alpha1.SFClusterConditionOffboarding)
		return c != nil && c.Reason == resourcev1alpha1.SFClusterReasonDeletionBlocked
	})
	if operatorConfig() == nil {
		t.Fatal("the component was removed while an instance still ran on the cluster")
	}
	deleteAndWait(t, onboarding.Client, e.instance(t, "needs-operator"))
	waitGone(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "w"}})
	if cm := operatorConfig(); cm != nil && cm.DeletionTimestamp == nil {
		t.Error("the component's ConfigMap is still on the cluster after the SFCluster was offboarded")
	}
	waitGone(t, workload.Client, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: group + "-operator"}})
}
