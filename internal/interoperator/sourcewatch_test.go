package interoperator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// gatedPlan provisions a ConfigMap and reports provision and bind
// succeeded once a source ConfigMap, the gate, says so: the instance's
// gate-<instance> and the binding's gate-<binding>, in the instance's
// namespace on the target. A gate that is missing, or says anything else,
// keeps the operation in progress.
var gatedPlan = []osbv1alpha1.TemplateSpec{
	// One ConfigMap per instance: instances never share an object.
	gotemplate(osbv1alpha1.ActionProvision, configMaps("payload-{{ .instance.metadata.name }}")),
	gotemplate(osbv1alpha1.ActionSources, `gate:
  apiVersion: v1
  kind: ConfigMap
  name: gate-{{ with .binding }}{{ .metadata.name }}{{ else }}{{ .instance.metadata.name }}{{ end }}
`),
	gotemplate(osbv1alpha1.ActionStatus, `{{- $state := "in progress" }}
{{- with .gate }}{{ $state = .data.state | default "in progress" }}{{ end }}
provision:
  state: {{ $state }}
bind:
  state: {{ $state }}
  response: '{"credentials":{"user":"u"}}'
`),
}

// TestSourcesAreWatched is issue #13's "sources are watched in the
// target": operations in progress wait on a source, and polling is slowed
// to once an hour, so only a watch can make them finish within the test's
// waits.
// The instance's gate is created (an Add event), the binding's gate is
// first created saying "in progress" and then updated (an Update event).
// Every informer stops when the SFCluster goes.
func TestSourcesAreWatched(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{setup: []interoperator.Option{
		interoperator.WithProgressWait(time.Hour, time.Hour),
		interoperator.WithWatchedWait(time.Hour),
	}})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", gatedPlan)
	const n = 3
	for i := range n {
		e.createInstance(t, fmt.Sprintf("inst-%d", i), "svc", "plan", nil)
	}
	for i := range n {
		e.waitInstance(t, fmt.Sprintf("inst-%d", i), osbv1alpha1.StateInProgress)
	}
	// The informer is started by the first evaluation and has synced by
	// the time the second looks: wait until the watcher says so, so that
	// the gates below are seen by the watch, not by a first list.
	waitFor(t, "the source watcher to watch the ConfigMaps of the target", func() bool {
		return e.io.Sources.Informers("target") == 1 && e.io.Sources.Waiting() == n
	})
	start := time.Now()
	for i := range n {
		must(t, target.Client.Create(ctx, gate(e.ns, fmt.Sprintf("gate-inst-%d", i), "succeeded")))
	}
	for i := range n {
		e.waitInstance(t, fmt.Sprintf("inst-%d", i), osbv1alpha1.StateSucceeded)
	}
	t.Logf("%d instances succeeded %v after their gates were created", n, time.Since(start).Round(time.Millisecond))

	inst := e.instance(t, "inst-0")
	must(t, target.Client.Create(ctx, gate(e.ns, "gate-bind", "in progress")))
	e.createBinding(t, "bind", inst)
	e.waitBinding(t, "bind", osbv1alpha1.StateInProgress)
	waitFor(t, "the binding to wait on its gate", func() bool { return e.io.Sources.Waiting() == 1 })
	g := &corev1.ConfigMap{}
	must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "gate-bind"}, g))
	g.Data["state"] = "succeeded"
	must(t, target.Client.Update(ctx, g))
	e.waitBinding(t, "bind", osbv1alpha1.StateSucceeded)
	if w := e.io.Sources.Waiting(); w != 0 {
		t.Errorf("%d operations still wait on sources after all ended", w)
	}
}

// TestSourceInformersStopWithTheCluster: the source informers of an
// SFCluster stop when it leaves.
func TestSourceInformersStopWithTheCluster(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", gatedPlan)
	e.createInstance(t, "inst", "svc", "plan", nil)
	e.waitInstance(t, "inst", osbv1alpha1.StateInProgress)
	waitFor(t, "the source watcher to watch the ConfigMaps of the target", func() bool { return e.io.Sources.Informers("target") == 1 })
	// A cluster with instances cannot go: the instance is deleted first.
	deleteAndWait(t, onboarding.Client, e.instance(t, "inst"))
	if w := e.io.Sources.Waiting(); w != 0 {
		t.Errorf("%d operations wait on sources after the only one was deleted", w)
	}
	deleteAndWait(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "target"}})
	waitFor(t, "the informers of the deleted SFCluster to stop", func() bool { return e.io.Sources.Informers("target") == 0 })
}

// TestUnwatchableSourceIsPolled: a source of a kind the target does not
// serve cannot be watched; the operation is polled as before and finishes
// once the kind and the object appear.
func TestUnwatchableSourceIsPolled(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{setup: []interoperator.Option{interoperator.WithWatchedWait(time.Hour)}})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, configMaps("payload")),
		gotemplate(osbv1alpha1.ActionSources, "gate:\n  apiVersion: example.invalid/v1\n  kind: Gate\n  name: g\n"),
		gotemplate(osbv1alpha1.ActionStatus, "provision:\n  state: {{ if .gate }}succeeded{{ else }}in progress{{ end }}\n"),
	})
	e.createInstance(t, "inst", "svc", "plan", nil)
	e.waitInstance(t, "inst", osbv1alpha1.StateInProgress)
	before := e.reconciles(t)
	// Polled every second at most (newEnv's progress wait): a few more
	// reconciles come within the wait, not one an hour.
	waitFor(t, "the instance with an unwatchable source to be polled", func() bool { return e.reconciles(t) >= before+3 })
	if got := e.io.Sources.Informers("target"); got != 0 {
		t.Errorf("%d informers run for a kind the target does not serve, want 0", got)
	}
}

// gate is a gate ConfigMap of gatedPlan.
func gate(namespace, name, state string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"state": state}}
}

// TestRefusedSourceWatchIsPolled: the target's credentials may read and
// write ConfigMaps but not list or watch them. The informer's list is
// refused, so the watcher gives the kind up (no informer runs) and the
// operation is polled, and still succeeds once its gate appears.
func TestRefusedSourceWatchIsPolled(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{noCluster: true, setup: []interoperator.Option{interoperator.WithWatchedWait(time.Hour)}})
	sa := e.name + "-no-list"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "patch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch", "update", "delete"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: sa}},
	}
	for _, obj := range []client.Object{role, binding} {
		must(t, target.Client.Create(ctx, obj))
		t.Cleanup(func() { _ = target.Client.Delete(context.Background(), obj) })
	}
	token := target.ServiceAccountToken(t, metav1.NamespaceDefault, sa)
	e.registerCluster(t, "target", tokenKubeconfig(t, target, token), nil)
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", gatedPlan)
	e.createInstance(t, "inst", "svc", "plan", nil)
	e.waitInstance(t, "inst", osbv1alpha1.StateInProgress)
	waitFor(t, "the watcher to give up the ConfigMaps it may not list", func() bool {
		return e.io.Sources.Informers("target") == 0 && e.io.Sources.Refused("target") == 1
	})
	must(t, target.Client.Create(ctx, gate(e.ns, "gate-inst", "succeeded")))
	e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
}

// tokenKubeconfig returns a kubeconfig for c's API server that
// authenticates with token.
func tokenKubeconfig(t *testing.T, c *testenv.Cluster, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["target"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "user"}
	cfg.CurrentContext = "target"
	data, err := clientcmd.Write(*cfg)
	must(t, err)
	return data
}
