package interoperator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/internal/render"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// installCRD creates the CRD of file on c unless it exists, and waits
// until it is Established.
func installCRD(t *testing.T, c client.Client, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(file)
	must(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	must(t, yaml.Unmarshal(data, crd))
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, "CRD "+crd.Name+" Established", func() bool {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(crd), crd))
		return crdinstall.Established(crd)
	})
	return crd
}

// helmPlan creates, in e's catalog, the chart in dir as a ConfigMap and a
// plan id of service svc whose provision template is that chart.
func helmPlan(t *testing.T, e *env, dir, id, svc string) {
	t.Helper()
	cm, err := catalog.ChartConfigMap(dir, e.catalog, id+"-chart")
	must(t, err)
	must(t, platform.Client.Create(context.Background(), cm))
	var file string
	for key := range cm.BinaryData {
		file = key
	}
	e.createPlan(t, id, svc, []osbv1alpha1.TemplateSpec{{
		Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeHelm,
		URL: fmt.Sprintf("configmap://%s/%s/%s", e.catalog, cm.Name, file),
	}})
}

// postgres returns the KubeDB Postgres namespace/name, empty when it does
// not exist.
func postgres(t *testing.T, c client.Client, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	pg := &unstructured.Unstructured{}
	pg.SetAPIVersion("kubedb.com/v1alpha1")
	pg.SetKind("Postgres")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, pg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return pg
}

// TestHelmChartCRDPresent provisions a chart shaped like Service Fabrik's
// Helm sample "postgresql" (a v1beta1 CRD foo.bar.io in crds/, a KubeDB
// Postgres template) on a cluster that serves foo.bar.io Foo from a v1
// CRD of another name: as with helm install, the crds/ CRD is present
// and left alone, and the Postgres is created. Deprovision deletes the
// Postgres only.
func TestHelmChartCRDPresent(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	installCRD(t, target.Client, "testdata/postgres-crd.yaml")
	foo := installCRD(t, target.Client, "testdata/foo-crd-v1.yaml")
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	helmPlan(t, e, "testdata/charts/kubedb-postgres", "pg", "svc")

	e.createInstance(t, "pg-a", "svc", "pg", nil)
	inst := e.waitInstance(t, "pg-a", osbv1alpha1.StateSucceeded)
	name := "kdb-" + render.ReleaseName(inst.Name) + "-pg"
	if postgres(t, target.Client, e.ns, name) == nil {
		t.Fatalf("Postgres %s/%s missing after a successful provision", e.ns, name)
	}
	if len(inst.Status.Resources) != 1 || inst.Status.Resources[0].Kind != "Postgres" {
		t.Errorf("status.resources = %+v, want the Postgres only (crds/ is never recorded)", inst.Status.Resources)
	}
	absentCRD := &apiextensionsv1.CustomResourceDefinition{}
	if err := target.Client.Get(ctx, client.ObjectKey{Name: "foo.bar.io"}, absentCRD); !apierrors.IsNotFound(err) {
		t.Errorf("get CRD foo.bar.io: %v, want NotFound: a present crds/ CRD is left alone", err)
	}
	after := &apiextensionsv1.CustomResourceDefinition{}
	must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(foo), after))
	if after.ResourceVersion != foo.ResourceVersion {
		t.Errorf("CRD %s changed (resourceVersion %s to %s), want it left alone", foo.Name, foo.ResourceVersion, after.ResourceVersion)
	}

	deleteAndWait(t, onboarding.Client, inst)
	waitFor(t, "the Postgres deleted by deprovision", func() bool { return postgres(t, target.Client, e.ns, name) == nil })
	must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(foo), after))
}

// TestHelmChartCRDUnserved provisions the same chart on a cluster that
// lacks foo.bar.io Foo and does not serve apiextensions.k8s.io/v1beta1:
// helm install fails there, and so does the instance, at once, with a
// reason naming the file, the CRD's apiVersion and what to do.
func TestHelmChartCRDUnserved(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	workload := sharedWorkloads(t)["w1"]
	e := newEnv(t, envOptions{noCluster: true})
	e.registerCluster(t, "w1", workload.Kubeconfig, nil)
	e.createService(t, "svc")
	helmPlan(t, e, "testdata/charts/kubedb-postgres", "pg", "svc")

	e.createInstance(t, "pg-b", "svc", "pg", nil)
	inst := e.waitFailed(t, "pg-b", provisioner.ReasonKindNotServed,
		"crds/foo-v1beta1.yaml", "apiextensions.k8s.io/v1beta1 CustomResourceDefinition foo.bar.io",
		"Foo.foo.bar.io", "ship the CRD as apiextensions.k8s.io/v1", "target cluster w1")
	if strings.Contains(inst.Status.Error, "giving up") {
		t.Errorf("error = %q: the instance was retried, want it failed at once", inst.Status.Error)
	}
	e.expectQuiet(t, "after the instance failed")
}

// TestHelmChartCRDInstalled provisions a chart whose crds/ holds a v1 CRD
// the cluster lacks and whose template is an object of its kind: the CRD
// is installed first and served before the object is applied (granted by
// the ProviderConfig, as every CRD). Deprovision deletes the object and
// leaves the CRD, as helm uninstall does.
func TestHelmChartCRDInstalled(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.RenderPolicies = []interoperatorv1alpha1.RenderPolicy{{
			Plans:              []string{interoperatorv1alpha1.RenderPolicyAll},
			ClusterScopedKinds: []interoperatorv1alpha1.RenderPolicyKind{{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}},
		}}
	}})
	group := e.name + ".crds.test.marketplane.io"
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "crds"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: widgets\nversion: 0.1.0\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "crds", "widget.yaml"), []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.`+group+`
spec:
  group: `+group+`
  scope: Namespaced
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "templates", "widget.yaml"), []byte(
		"apiVersion: "+group+"/v1\nkind: Widget\nmetadata:\n  name: w-{{ .Release.Name }}\nspec:\n  size: 3\n"), 0o600))
	e.createService(t, "svc")
	helmPlan(t, e, dir, "widgets", "svc")

	e.createInstance(t, "w-c", "svc", "widgets", nil)
	inst := e.waitInstance(t, "w-c", osbv1alpha1.StateSucceeded)
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(group + "/v1")
	widget.SetKind("Widget")
	widget.SetNamespace(e.ns)
	widget.SetName("w-" + render.ReleaseName(inst.Name))
	must(t, target.Client.Get(ctx, client.ObjectKeyFromObject(widget), widget))
	for _, r := range inst.Status.Resources {
		if r.Kind == "CustomResourceDefinition" {
			t.Errorf("status.resources = %+v records the crds/ CRD, want it never deleted by deprovision", inst.Status.Resources)
		}
	}

	deleteAndWait(t, onboarding.Client, inst)
	waitGone(t, target.Client, widget)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := target.Client.Get(ctx, client.ObjectKey{Name: "widgets." + group}, crd); err != nil || crd.DeletionTimestamp != nil {
		t.Errorf("CRD widgets.%s after deprovision: %v (deleting: %v), want it kept", group, err, crd.DeletionTimestamp != nil)
	}
}

// TestUnservedKindFails renders, with a gotemplate, an object of a kind
// the target cluster does not serve: the instance fails in its first
// reconcile with reason KindNotServed and a message naming the group,
// version, kind and cluster, rather than being retried until the retries
// run out.
func TestUnservedKindFails(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	e.createPlan(t, "nothing", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		configMaps("before")+"---\napiVersion: unserved.example.com/v1\nkind: Nothing\nmetadata:\n  name: n-{{ .instance.metadata.name }}\n")})
	e.createInstance(t, "nothing-d", "svc", "nothing", nil)
	inst := e.waitFailed(t, "nothing-d", provisioner.ReasonKindNotServed,
		"unserved.example.com/v1 Nothing", `group "unserved.example.com"`, `version "v1"`, `kind "Nothing"`, "target cluster target")
	if strings.Contains(inst.Status.Error, "giving up") {
		t.Errorf("error = %q: the instance was retried, want it failed at once", inst.Status.Error)
	}
	if got := targetConfigMaps(t, e.ns, "nothing-d"); len(got) != 0 {
		t.Errorf("ConfigMaps %v applied, want nothing of a render with an unserved kind", got)
	}
}
