package interoperator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// fastClusterChecks makes the SFCluster status controller check a Ready
// cluster every second and an unreachable one after 100 ms to a second, so
// that the tests see a change of reachability quickly.
var fastClusterChecks = interoperator.WithClusterChecks(time.Second, 100*time.Millisecond, time.Second)

// sfcluster returns the SFCluster name of the env, or nil when it is gone.
func (e *env) sfcluster(t *testing.T, name string) *resourcev1alpha1.SFCluster {
	t.Helper()
	c := &resourcev1alpha1.SFCluster{}
	if err := platform.Client.Get(context.Background(), client.ObjectKey{Namespace: e.catalog, Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get SFCluster %s: %v", name, err)
	}
	return c
}

// waitSFCluster waits until cond holds for the SFCluster name and returns
// it; what says what the test waits for.
func (e *env) waitSFCluster(t *testing.T, name, what string, cond func(*resourcev1alpha1.SFCluster) bool) *resourcev1alpha1.SFCluster {
	t.Helper()
	var c *resourcev1alpha1.SFCluster
	deadline := time.Now().Add(pollTimeout)
	for {
		c = e.sfcluster(t, name)
		if c != nil && cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("SFCluster %s: timed out waiting for %s; last seen: %s", name, what, describeSFCluster(c))
		}
		time.Sleep(pollEvery)
	}
}

func describeSFCluster(c *resourcev1alpha1.SFCluster) string {
	if c == nil {
		return "<gone>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gen=%d observed=%d count=%d requests=%v current=%v total=%v finalizers=%v deleting=%v",
		c.Generation, c.Status.ObservedGeneration, c.Status.ServiceInstanceCount, c.Status.Requests,
		c.Status.CurrentCapacity, c.Status.TotalCapacity, c.Finalizers, c.DeletionTimestamp != nil)
	for _, cond := range c.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s(%q)", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return b.String()
}

// sameResources reports whether got holds exactly the quantities of want
// (written as strings).
func sameResources(got corev1.ResourceList, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for name, w := range want {
		q, ok := got[corev1.ResourceName(name)]
		if !ok || q.Cmp(resource.MustParse(w)) != 0 {
			return false
		}
	}
	return true
}

// condition returns the condition typ of c, or nil.
func condition(c *resourcev1alpha1.SFCluster, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(c.Status.Conditions, typ)
}

// isReady reports whether c's Ready condition has status and reason, for
// its current generation.
func isReady(c *resourcev1alpha1.SFCluster, status metav1.ConditionStatus, reason string) bool {
	r := condition(c, resourcev1alpha1.SFClusterConditionReady)
	return r != nil && r.Status == status && r.Reason == reason && c.Status.ObservedGeneration == c.Generation
}

// createClusterWith registers the SFCluster name with kubeconfig in its
// Secret and spec mutated by mutate.
func (e *env) createClusterWith(t *testing.T, name string, kubeconfig []byte, mutate func(*resourcev1alpha1.SFClusterSpec)) {
	t.Helper()
	ctx := context.Background()
	must(t, platform.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name + "-kubeconfig"},
		Data:       map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: kubeconfig},
	}))
	spec := resourcev1alpha1.SFClusterSpec{SecretRef: name + "-kubeconfig"}
	if mutate != nil {
		mutate(&spec)
	}
	must(t, platform.Client.Create(ctx, &resourcev1alpha1.SFCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name}, Spec: spec}))
}

// setKubeconfig replaces the kubeconfig in the Secret of the SFCluster name.
func (e *env) setKubeconfig(t *testing.T, name string, kubeconfig []byte) {
	t.Helper()
	s := &corev1.Secret{}
	must(t, platform.Client.Get(context.Background(), client.ObjectKey{Namespace: e.catalog, Name: name + "-kubeconfig"}, s))
	s.Data[resourcev1alpha1.KubeconfigSecretKey] = kubeconfig
	must(t, platform.Client.Update(context.Background(), s))
}

// createNode creates a Node with allocatable resources on c, as a kubelet
// would report them: the Node first, then its status.
func createNode(t *testing.T, c *testenv.Cluster, name string, allocatable map[string]string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	must(t, c.Client.Create(ctx, node))
	node.Status.Allocatable = corev1.ResourceList{}
	node.Status.Capacity = corev1.ResourceList{}
	for k, v := range allocatable {
		node.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(v)
		node.Status.Capacity[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	must(t, c.Client.Status().Update(ctx, node))
}

// requestsPlan registers a plan whose context requests what requests says,
// and whose instances provision one ConfigMap each (named after the
// instance: two instances of one plan must not claim the same object).
func (e *env) requestsPlan(t *testing.T, id, serviceID, requests string) {
	t.Helper()
	e.createPlan(t, id, serviceID, []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("cm-"+id+"-{{ .instance.metadata.name }}"))},
		func(p *osbv1alpha1.SFPlan) {
			p.Spec.Context = &runtime.RawExtension{Raw: []byte(`{"requests": ` + requests + `, "other": "ignored"}`)}
		})
}

// onCluster sets an instance's spec.clusterId, as a platform operator pins
// it; the inter-operator accepts the pin when the cluster passes the
// scheduler's filters.
func onCluster(name string) func(*osbv1alpha1.SFServiceInstance) {
	return func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = name }
}

// TestSFClusterStatus shows that every SFCluster gets a live status: the
// instances scheduled on it and what their plans request, the capacity of
// its nodes or of its spec, and whether its API server answers; that two
// clusters show their own numbers; that Ready follows the API server
// (stopped: Unreachable without quoting the kubeconfig; back: Reachable);
// and that a settled status is not written again by the periodic checks.
func TestSFClusterStatus(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	second := testenv.Start(t, testenv.WithName("second"), testenv.WithCRDs())
	e := newEnv(t, envOptions{noCluster: true, setup: []interoperator.Option{fastClusterChecks}})

	// target: no nodes, a capacity in the spec. second: two nodes, no
	// capacity in the spec.
	e.createClusterWith(t, "target", target.Kubeconfig, func(s *resourcev1alpha1.SFClusterSpec) {
		s.TotalCapacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("20Gi")}
	})
	createNode(t, second, "node-a", map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"})
	createNode(t, second, "node-b", map[string]string{"cpu": "2", "memory": "4Gi", "pods": "110"})
	e.createClusterWith(t, "second", second.Kubeconfig, nil)

	e.createService(t, "svc")
	e.requestsPlan(t, "big", "svc", `{"cpu": "1", "memory": "1Gi"}`)
	e.requestsPlan(t, "small", "svc", `{"cpu": 0.5}`)

	empty := func(c *resourcev1alpha1.SFCluster) bool {
		return isReady(c, metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable) && c.Status.ServiceInstanceCount == 0
	}
	got := e.waitSFCluster(t, "target", "Ready with no instances", empty)
	if len(got.Status.CurrentCapacity) != 0 || !sameResources(got.Status.TotalCapacity, map[string]string{"cpu": "10", "memory": "20Gi"}) {
		t.Errorf("target without nodes: currentCapacity = %v, want empty; totalCapacity = %v, want the spec's cpu 10, memory 20Gi",
			got.Status.CurrentCapacity, got.Status.TotalCapacity)
	}
	if !controllerutil.ContainsFinalizer(got, resourcev1alpha1.SFClusterFinalizer) {
		t.Errorf("SFCluster finalizers = %v, want %s", got.Finalizers, resourcev1alpha1.SFClusterFinalizer)
	}
	nodes := map[string]string{"cpu": "6", "memory": "12Gi", "pods": "220"}
	e.waitSFCluster(t, "second", "Ready with the capacity of its two nodes", func(c *resourcev1alpha1.SFCluster) bool {
		return empty(c) && sameResources(c.Status.CurrentCapacity, nodes) && sameResources(c.Status.TotalCapacity, nodes)
	})

	e.createInstance(t, "big-1", "svc", "big", nil, onCluster("target"))
	e.createInstance(t, "big-2", "svc", "big", nil, onCluster("target"))
	e.createInstance(t, "small-1", "svc", "small", nil, onCluster("second"))
	e.waitSFCluster(t, "target", "2 instances requesting cpu 2, memory 2Gi", func(c *resourcev1alpha1.SFCluster) bool {
		return c.Status.ServiceInstanceCount == 2 && sameResources(c.Status.Requests, map[string]string{"cpu": "2", "memory": "2Gi"})
	})
	e.waitSFCluster(t, "second", "1 instance requesting cpu 500m", func(c *resourcev1alpha1.SFCluster) bool {
		return c.Status.ServiceInstanceCount == 1 && sameResources(c.Status.Requests, map[string]string{"cpu": "500m"})
	})
	for _, name := range []string{"big-1", "big-2", "small-1"} {
		e.waitInstance(t, name, osbv1alpha1.StateSucceeded)
	}

	// Settled: the periodic checks (every second here) write nothing.
	before := e.sfcluster(t, "target")
	checks := testenv.ReconcileCount(t, e.name+"-"+interoperator.ClusterControllerName)
	time.Sleep(quietPeriod)
	after := e.sfcluster(t, "target")
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the status of a settled SFCluster was written during %s: %s, then %s", quietPeriod, describeSFCluster(before), describeSFCluster(after))
	}
	if n := testenv.ReconcileCount(t, e.name+"-"+interoperator.ClusterControllerName) - checks; n < 2 {
		t.Errorf("%v checks during %s, want at least 2 (one per second per cluster): the quiet window proves nothing", n, quietPeriod)
	}

	deleteAndWait(t, onboarding.Client, e.instance(t, "big-2"))
	e.waitSFCluster(t, "target", "1 instance requesting cpu 1, memory 1Gi after a deprovision", func(c *resourcev1alpha1.SFCluster) bool {
		return c.Status.ServiceInstanceCount == 1 && sameResources(c.Status.Requests, map[string]string{"cpu": "1", "memory": "1Gi"})
	})

	// The API server of second stops: Unreachable, the counts stay, the
	// last capacity seen stays, and the message holds no credentials.
	must(t, second.Stop())
	down := e.waitSFCluster(t, "second", "Ready=False Unreachable", func(c *resourcev1alpha1.SFCluster) bool {
		return isReady(c, metav1.ConditionFalse, resourcev1alpha1.SFClusterReasonUnreachable)
	})
	if down.Status.ServiceInstanceCount != 1 || !sameResources(down.Status.CurrentCapacity, nodes) {
		t.Errorf("unreachable: count = %d, currentCapacity = %v; want the instance and the last capacity seen", down.Status.ServiceInstanceCount, down.Status.CurrentCapacity)
	}
	msg := condition(down, resourcev1alpha1.SFClusterConditionReady).Message
	for _, line := range strings.Split(string(second.Kubeconfig), "\n") {
		if _, v, ok := strings.Cut(line, ": "); ok && len(v) > 40 && strings.Contains(msg, v) {
			t.Errorf("the Ready message quotes the kubeconfig: %q", msg)
		}
	}
	if up := e.sfcluster(t, "target"); !isReady(up, metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable) {
		t.Errorf("target went down with second: %s", describeSFCluster(up))
	}

	// The Secret is pointed at an API server that answers: Ready again,
	// with that cluster's capacity (no nodes).
	e.setKubeconfig(t, "second", target.Kubeconfig)
	e.waitSFCluster(t, "second", "Ready=True again with the new cluster's (empty) capacity", func(c *resourcev1alpha1.SFCluster) bool {
		return isReady(c, metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable) && len(c.Status.CurrentCapacity) == 0 && len(c.Status.TotalCapacity) == 0
	})

	// A kubeconfig that is none: the registry's reason.
	e.setKubeconfig(t, "second", []byte("not: [a kubeconfig"))
	e.waitSFCluster(t, "second", "Ready=False InvalidKubeconfig", func(c *resourcev1alpha1.SFCluster) bool {
		return isReady(c, metav1.ConditionFalse, "InvalidKubeconfig")
	})
	e.setKubeconfig(t, "second", target.Kubeconfig)

	for _, name := range []string{"big-1", "small-1"} {
		deleteAndWait(t, onboarding.Client, e.instance(t, name))
	}
	e.waitSFCluster(t, "target", "no instances", func(c *resourcev1alpha1.SFCluster) bool {
		return c.Status.ServiceInstanceCount == 0 && len(c.Status.Requests) == 0
	})
}

// TestSFClusterSlowAnswer shows that one probe a loaded API server does
// not answer in time leaves a Ready SFCluster Ready: only a second one in a
// row makes it Unreachable, saying so, and an answer makes it Ready again.
func TestSFClusterSlowAnswer(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	proxy := testenv.StartProxy(t, hostPort(t, target))
	e := newEnv(t, envOptions{noCluster: true, setup: []interoperator.Option{fastClusterChecks}})
	e.createClusterWith(t, "slow", proxy.Kubeconfig(target), nil)
	reachable := func(c *resourcev1alpha1.SFCluster) bool {
		return isReady(c, metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable)
	}
	e.waitSFCluster(t, "slow", "Ready=True Reachable", reachable)

	stalled := time.Now()
	proxy.Stall()
	down := e.waitSFCluster(t, "slow", "Ready=False Unreachable", func(c *resourcev1alpha1.SFCluster) bool {
		return isReady(c, metav1.ConditionFalse, resourcev1alpha1.SFClusterReasonUnreachable)
	})
	// Each probe waits clusters.DefaultProbeTimeout; a probe already under
	// way at the stall may end sooner, the one after it may not.
	if took := time.Since(stalled); took < clusters.DefaultProbeTimeout {
		t.Errorf("Unreachable %s after the API server stopped answering, sooner than one probe's wait of %s", took, clusters.DefaultProbeTimeout)
	}
	if msg := condition(down, resourcev1alpha1.SFClusterConditionReady).Message; !strings.Contains(msg, "no answer in time, twice in a row") {
		t.Errorf("Ready message = %q, want it to say that two probes in a row got no answer", msg)
	}
	proxy.Up()
	e.waitSFCluster(t, "slow", "Ready=True Reachable once the API server answers again", reachable)
}

// TestSFClusterOffboarding shows offboarding: a cordoned cluster reports
// what is still on it; deleting an SFCluster that instances run on is
// blocked with a drain report and completes, forgetting the cluster's
// client, once they are deprovisioned; an empty SFCluster is deleted at
// once. Every change shows without waiting for a periodic check.
func TestSFClusterOffboarding(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	// No periodic check within the test: what it sees follows the events
	// (instances, the SFCluster's spec and deletion) at once.
	e := newEnv(t, envOptions{setup: []interoperator.Option{interoperator.WithClusterChecks(time.Hour, time.Hour, time.Hour)}})
	ctx := context.Background()
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("cm-{{ .instance.metadata.name }}"))})
	for _, name := range []string{"inst-1", "inst-2"} {
		e.createInstance(t, name, "svc", "plan", nil, onCluster("target"))
		e.waitInstance(t, name, osbv1alpha1.StateSucceeded)
	}
	e.waitSFCluster(t, "target", "2 instances", func(c *resourcev1alpha1.SFCluster) bool {
		return c.Status.ServiceInstanceCount == 2 && controllerutil.ContainsFinalizer(c, resourcev1alpha1.SFClusterFinalizer)
	})
	if !e.io.Registry.Cached(e.catalog, "target") {
		t.Fatal("the registry holds no client for the cluster in use")
	}

	// Cordoned: the drain report.
	c := e.sfcluster(t, "target")
	edit(t, platform.Client, c, func() { c.Spec.Unschedulable = true })
	e.waitSFCluster(t, "target", "an Offboarding=Cordoned drain report naming both instances", func(c *resourcev1alpha1.SFCluster) bool {
		off := condition(c, resourcev1alpha1.SFClusterConditionOffboarding)
		return off != nil && off.Reason == resourcev1alpha1.SFClusterReasonCordoned &&
			strings.Contains(off.Message, "2 instances") && strings.Contains(off.Message, e.ns+"/inst-1") && strings.Contains(off.Message, e.ns+"/inst-2")
	})

	// An empty, cordoned SFCluster is Drained, and its deletion is
	// immediate.
	e.createClusterWith(t, "empty", target.Kubeconfig, func(s *resourcev1alpha1.SFClusterSpec) { s.Unschedulable = true })
	empty := e.waitSFCluster(t, "empty", "Offboarding=Drained", func(c *resourcev1alpha1.SFCluster) bool {
		off := condition(c, resourcev1alpha1.SFClusterConditionOffboarding)
		return off != nil && off.Reason == resourcev1alpha1.SFClusterReasonDrained && controllerutil.ContainsFinalizer(c, resourcev1alpha1.SFClusterFinalizer)
	})
	deleteAndWait(t, platform.Client, empty)

	// Deleting the non-empty one is blocked, with the report.
	must(t, platform.Client.Delete(ctx, e.sfcluster(t, "target")))
	e.waitSFCluster(t, "target", "Offboarding=DeletionBlocked naming both instances", func(c *resourcev1alpha1.SFCluster) bool {
		off := condition(c, resourcev1alpha1.SFClusterConditionOffboarding)
		return c.DeletionTimestamp != nil && off != nil && off.Reason == resourcev1alpha1.SFClusterReasonDeletionBlocked &&
			strings.Contains(off.Message, "2 instances") && strings.Contains(off.Message, e.ns+"/inst-1")
	})

	// Deprovisioning works on the cluster being deleted, and the last one
	// gone lets the deletion complete.
	deleteAndWait(t, onboarding.Client, e.instance(t, "inst-1"))
	e.waitSFCluster(t, "target", "a drain report of 1 instance", func(c *resourcev1alpha1.SFCluster) bool {
		off := condition(c, resourcev1alpha1.SFClusterConditionOffboarding)
		return off != nil && strings.Contains(off.Message, "1 instance") && !strings.Contains(off.Message, "inst-1")
	})
	if e.sfcluster(t, "target") == nil {
		t.Fatal("the SFCluster was deleted while an instance still ran on it")
	}
	deleteAndWait(t, onboarding.Client, e.instance(t, "inst-2"))
	waitGone(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "target"}})
	waitFor(t, "the registry to forget the deleted cluster", func() bool { return !e.io.Registry.Cached(e.catalog, "target") })
}
