package interoperator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// replicatePlan renders, for an instance, a ConfigMap; for a binding, a
// Secret; and answers the bind with credentials naming the binding and the
// cluster that rendered them (.cluster.name: the SFCluster on the master,
// "1" on a sister).
var replicatePlan = []osbv1alpha1.TemplateSpec{
	gotemplate(osbv1alpha1.ActionProvision, configMaps("payload")),
	gotemplate(osbv1alpha1.ActionBind, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cred-{{ .binding.metadata.name }}\nstringData:\n  user: {{ .binding.metadata.name }}\n"),
	gotemplate(osbv1alpha1.ActionStatus, `provision:
  state: succeeded
  response: provisioned on {{ .cluster.name }}
{{- with .binding }}
bind:
  state: succeeded
  response: {{ mustToJson (dict "credentials" (dict "user" .metadata.name "cluster" $.cluster.name)) | squote }}
{{- end }}
`),
}

// TestProvisioningModes provisions, binds, unbinds and deprovisions through
// both provisioning modes: an instance on the SFCluster "central", a
// workload API server the master's inter-operator applies to, and one on
// the SFCluster "sister" in mode replicate, a workload API server without
// the Service Fabrik CRDs that runs an inter-operator of its own. At the
// end nothing of either is left on the workload clusters.
func TestProvisioningModes(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	workloads, err := testenv.NewMany(map[string][]testenv.Option{
		"central": {testenv.WithCRDs(), testenv.WithControllerManager()},
		"sister":  {testenv.WithCRDs(), testenv.WithControllerManager()},
	})
	must(t, err)
	t.Cleanup(func() {
		for _, c := range workloads {
			if err := c.Stop(); err != nil {
				t.Errorf("stop %s: %v", c.Name, err)
			}
		}
	})
	central, sister := workloads["central"], workloads["sister"]

	e := newEnv(t, envOptions{noCluster: true, configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.DefaultCluster = "sister"
	}})
	e.registerCluster(t, "central", central.Kubeconfig, nil)
	e.registerCluster(t, "sister", sister.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate
	})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", replicatePlan)
	instC := e.createInstance(t, "inst-c", "svc", "plan", nil, func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = "central" })
	// Placed on the sister by the default scheduler (defaultCluster).
	instR := e.createInstance(t, "inst-r", "svc", "plan", nil)

	// The replicator installs the CRDs on the sister and replicates the
	// instance, its service and plan; without an inter-operator there the
	// original waits, saying so.
	waitFor(t, "the SFServiceInstance CRD to be established on the sister", func() bool {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		return sister.Client.Get(ctx, client.ObjectKey{Name: "sfserviceinstances.osb.servicefabrik.io"}, crd) == nil && crdinstall.Established(crd)
	})
	replica := &osbv1alpha1.SFServiceInstance{}
	waitFor(t, "the replica of inst-r on the sister", func() bool {
		return sister.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "inst-r"}, replica) == nil
	})
	if replica.Spec.ClusterID != replicate.SisterClusterID || replica.Spec.PlanID != "plan" || replica.Labels[replicate.LabelReplica] != "true" {
		t.Errorf("replica: clusterId %q, planId %q, labels %v; want the original's spec on cluster %q, labelled as a replica",
			replica.Spec.ClusterID, replica.Spec.PlanID, replica.Labels, replicate.SisterClusterID)
	}
	must(t, sister.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "plan"}, &osbv1alpha1.SFPlan{}))
	waitFor(t, "inst-r to wait for the sister's inter-operator (Ready=False/Replicating)", func() bool {
		inst := e.instance(t, "inst-r")
		r := readyCondition(inst.Status.Conditions)
		return inst.Spec.ClusterID == "sister" && inst.Status.State == osbv1alpha1.StateInProgress && r != nil && r.Reason == replicate.ReasonReplicating
	})
	if !e.io.Replicator.Watching(e.catalog, "sister") {
		t.Errorf("the replicator does not watch the replicas on the sister")
	}
	if e.io.Replicator.Watching(e.catalog, "central") {
		t.Errorf("the replicator watches the central cluster, which is not in mode replicate")
	}

	startSister(t, sister, e.catalog, e.ns)

	// Provision.
	got := e.waitInstance(t, "inst-r", osbv1alpha1.StateSucceeded)
	if got.Status.Description != "provisioned on 1" || len(got.Status.Resources) != 1 {
		t.Errorf("inst-r: description %q, resources %+v; want the sister's status (rendered on cluster 1, one ConfigMap)", got.Status.Description, got.Status.Resources)
	}
	if r := readyCondition(got.Status.Conditions); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("inst-r: Ready %+v, want True", r)
	}
	got = e.waitInstance(t, "inst-c", osbv1alpha1.StateSucceeded)
	if got.Status.Description != "provisioned on central" {
		t.Errorf("inst-c: description %q, want it rendered centrally", got.Status.Description)
	}
	if n := labelled(t, sister, e.ns, "inst-r"); n != 1 {
		t.Errorf("the sister holds %d objects of inst-r, want its ConfigMap", n)
	}
	if n := labelled(t, central, e.ns, "inst-r"); n != 0 {
		t.Errorf("the central cluster holds %d objects of the replicated inst-r, want none", n)
	}
	if n := labelled(t, central, e.ns, "inst-c"); n != 1 {
		t.Errorf("the central cluster holds %d objects of inst-c, want its ConfigMap", n)
	}
	if err := sister.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "inst-c"}, &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("the central instance has a replica on the sister (%v)", err)
	}

	// Bind: the credentials reach the broker's Secret on the onboarding
	// cluster in both modes.
	e.createBinding(t, "b-c", instC)
	e.createBinding(t, "b-r", instR)
	for name, cluster := range map[string]string{"b-c": "central", "b-r": "1"} {
		b := e.waitBinding(t, name, osbv1alpha1.StateSucceeded)
		if b.Status.Response == nil || b.Status.Response.SecretRef != "sf-"+name {
			t.Errorf("%s: response %+v, want secretRef sf-%s", name, b.Status.Response, name)
		}
		secret := &corev1.Secret{}
		must(t, onboarding.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "sf-" + name}, secret))
		var resp struct {
			Credentials map[string]string `json:"credentials"`
		}
		must(t, json.Unmarshal(secret.Data[osbv1alpha1.BindingSecretResponseKey], &resp))
		if resp.Credentials["user"] != name || resp.Credentials["cluster"] != cluster {
			t.Errorf("%s: credentials %v, want user %s rendered on cluster %s", name, resp.Credentials, name, cluster)
		}
		if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != b.UID {
			t.Errorf("%s: the Secret's owners %+v, want the binding", name, secret.OwnerReferences)
		}
	}

	// Unbind.
	for _, name := range []string{"b-c", "b-r"} {
		deleteAndWait(t, onboarding.Client, &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}})
		if err := onboarding.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "sf-" + name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("the bind response Secret sf-%s is still on the onboarding cluster (%v)", name, err)
		}
	}
	for _, c := range []*testenv.Cluster{central, sister} {
		if names := secretsIn(t, c, e.ns); len(names) != 0 {
			t.Errorf("%s: Secrets %v left in %s after the unbinds", c.Name, names, e.ns)
		}
	}
	list := &osbv1alpha1.SFServiceBindingList{}
	must(t, sister.Client.List(ctx, list, client.InNamespace(e.ns)))
	if len(list.Items) != 0 {
		t.Errorf("%d binding replicas left on the sister", len(list.Items))
	}

	// Deprovision.
	for _, name := range []string{"inst-c", "inst-r"} {
		deleteAndWait(t, onboarding.Client, &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}})
	}
	waitGone(t, sister.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	// The central provisioner created the instance's namespace there, and
	// deletes it with the last instance of the namespace on that cluster.
	waitGone(t, central.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	for _, c := range []*testenv.Cluster{central, sister} {
		for _, inst := range []string{"inst-c", "inst-r"} {
			if n := labelled(t, c, e.ns, inst); n != 0 {
				t.Errorf("%s: %d objects of %s left", c.Name, n, inst)
			}
		}
	}
}

// labelled counts the ConfigMaps and Secrets of the instance in namespace
// on c that are not being deleted.
func labelled(t *testing.T, c *testenv.Cluster, namespace, instance string) int {
	t.Helper()
	n := 0
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}} {
		must(t, c.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{provisioner.LabelInstanceID: provisioner.InstanceID(namespace, instance)}))
		switch l := list.(type) {
		case *corev1.ConfigMapList:
			for _, o := range l.Items {
				if o.DeletionTimestamp == nil {
					n++
				}
			}
		case *corev1.SecretList:
			for _, o := range l.Items {
				if o.DeletionTimestamp == nil {
					n++
				}
			}
		}
	}
	return n
}

// secretsIn returns the names of the Secrets in namespace on c, service
// account tokens aside.
func secretsIn(t *testing.T, c *testenv.Cluster, namespace string) []string {
	t.Helper()
	list := &corev1.SecretList{}
	must(t, c.Client.List(context.Background(), list, client.InNamespace(namespace)))
	var names []string
	for _, s := range list.Items {
		if s.Type != corev1.SecretTypeServiceAccountToken && s.DeletionTimestamp == nil {
			names = append(names, s.Name)
		}
	}
	return names
}

// startSister runs an inter-operator on the sister cluster c, as Service
// Fabrik runs a provisioner on each of its sister clusters: c is its
// platform and onboarding cluster, its catalog namespace is the master's
// (where the replicator copies services and plans), and it provisions onto
// c itself, registered as the SFCluster "1". It serves the replicas in
// namespace and stops when the test ends.
func startSister(t *testing.T, c *testenv.Cluster, catalog, namespace string) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("sister-%d", envCounter.Add(1))
	must(t, c.Client.Create(ctx, &interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: interoperatorv1alpha1.ProviderConfigSpec{CatalogNamespace: catalog, Limits: &interoperatorv1alpha1.Limits{MaxTransientErrors: 3}}}))
	must(t, c.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog, Name: "own-kubeconfig"},
		Data:       map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: c.Kubeconfig},
	}))
	must(t, c.Client.Create(ctx, &resourcev1alpha1.SFCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog, Name: resourcev1alpha1.PrimaryClusterID},
		Spec:       resourcev1alpha1.SFClusterSpec{SecretRef: "own-kubeconfig"},
	}))
	own, err := cluster.New(c.Config, func(o *cluster.Options) { o.Scheme = scheme })
	must(t, err)
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	must(t, mgr.Add(own))
	_, err = interoperator.Setup(ctx, mgr, own, name,
		interoperator.WithControllerNamePrefix(name+"-"),
		interoperator.WithProgressWait(100*time.Millisecond, time.Second),
		interoperator.WithBackoff(50*time.Millisecond, time.Second))
	must(t, err)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sister manager: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log of %s:\n%s", name, logs.LinesWith(name+"-"))
		}
	})
}

// TestReplicateUnreachableSister shows that an instance on a sister that
// stops answering reports it (Ready=False, ClusterUnreachable) and keeps
// trying past limits.maxTransientErrors, and that it is provisioned once
// the sister answers again.
func TestReplicateUnreachableSister(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	sister := testenv.Start(t, testenv.WithName("sister"), testenv.WithCRDs())
	// A port nobody listens on any more.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	dead := l.Addr().String()
	must(t, l.Close())
	u, err := url.Parse(sister.Config.Host)
	must(t, err)
	deadKubeconfig := []byte(strings.ReplaceAll(string(sister.Kubeconfig), u.Host, dead))

	e := newEnv(t, envOptions{noCluster: true})
	e.registerCluster(t, "sister", sister.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate
	})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", replicatePlan)
	// The instance is placed on the sister while it answers (a pin to a
	// cluster that is not Ready waits until it is, as an instance the
	// scheduler cannot place does) and replicated there; no inter-operator
	// runs on the sister yet.
	e.createInstance(t, "inst", "svc", "plan", nil, func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = "sister" })
	waitFor(t, "the replica on the sister", func() bool {
		return sister.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "inst"}, &osbv1alpha1.SFServiceInstance{}) == nil
	})
	// The sister stops answering: the registry reads the broken
	// kubeconfig at its next refresh.
	e.setKubeconfig(t, "sister", deadKubeconfig)
	waitFor(t, "the instance to report the unreachable sister", func() bool {
		r := readyCondition(e.instance(t, "inst").Status.Conditions)
		return r != nil && r.Reason == replicate.ReasonClusterUnreachable
	})
	// The ProviderConfig allows 3 transient errors; the sister's absence
	// is not one of them.
	before := e.reconciles(t)
	waitFor(t, "more reconciles than limits.maxTransientErrors", func() bool { return e.reconciles(t)-before > 5 })
	inst := e.instance(t, "inst")
	if r := readyCondition(inst.Status.Conditions); inst.Status.State == osbv1alpha1.StateFailed || r == nil || r.Reason != replicate.ReasonClusterUnreachable ||
		!strings.Contains(inst.Status.Description, "SFCluster sister is unreachable") {
		t.Fatalf("while the sister is unreachable: %s; want it waiting with reason %s", describeInstance(inst), replicate.ReasonClusterUnreachable)
	}

	// The sister answers again, and its inter-operator provisions the
	// replica.
	e.setKubeconfig(t, "sister", sister.Kubeconfig)
	startSister(t, sister, e.catalog, e.ns)
	inst = e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	if inst.Status.Description != "provisioned on 1" {
		t.Errorf("description %q, want the sister's", inst.Status.Description)
	}
	deleteAndWait(t, onboarding.Client, inst)
	if err := sister.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "inst"}, &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("the replica outlived the original (%v)", err)
	}
}
