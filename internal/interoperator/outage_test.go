package interoperator_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestTargetOutageDuringProvisioning cuts the network to the only target
// cluster while instances are provisioned, some already scheduled on it and
// some not: none fails, the scheduled ones report ClusterUnreachable, and
// once the cluster is back every instance succeeds with its objects there.
func TestTargetOutageDuringProvisioning(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	workload := sharedWorkloads(t)["w1"]
	proxy := testenv.StartProxy(t, hostPort(t, workload))
	// client-go retries a read that finds the connection cut ten times, a
	// second apart; a short request timeout makes the outage show sooner.
	e := newEnv(t, envOptions{noCluster: true, setup: []interoperator.Option{interoperator.WithTargetRequestTimeout(3 * time.Second)}})
	e.registerCluster(t, "flaky", proxy.Kubeconfig(workload), nil)
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: survived-{{ .instance.metadata.name }}\n")})

	proxy.Down()
	const n = 3
	for i := range n {
		e.createInstance(t, fmt.Sprintf("scheduled-%d", i), "svc", "plan", nil, func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = "flaky" })
		e.createInstance(t, fmt.Sprintf("unscheduled-%d", i), "svc", "plan", nil)
	}
	for i := range n {
		name := fmt.Sprintf("scheduled-%d", i)
		waitFor(t, name+" to report that its cluster cannot be reached", func() bool {
			inst := e.instance(t, name)
			r := readyCondition(inst.Status.Conditions)
			if inst.Status.State == osbv1alpha1.StateFailed {
				t.Fatalf("%s failed while its cluster was unreachable: %s", name, describeInstance(inst))
			}
			return r != nil && r.Reason == string(provisioner.ReasonClusterUnreachable)
		})
	}
	// More than limits.maxTransientErrors (3 in these tests) attempts
	// pass while the cluster is down: the runtime retries every second
	// at most.
	e.expectNoneFailed(t, n*2)

	proxy.Up()
	for i := range n {
		for _, name := range []string{fmt.Sprintf("scheduled-%d", i), fmt.Sprintf("unscheduled-%d", i)} {
			e.waitInstance(t, name, osbv1alpha1.StateSucceeded)
		}
	}
	list := &corev1.ConfigMapList{}
	must(t, workload.Client.List(context.Background(), list, client.InNamespace(e.ns), client.MatchingLabels{provisioner.LabelInstanceID: provisioner.InstanceID(e.ns, "scheduled-0")}))
	if len(list.Items) != 1 {
		all := &corev1.ConfigMapList{}
		must(t, workload.Client.List(context.Background(), all))
		var names []string
		for _, cm := range all.Items {
			names = append(names, cm.Namespace+"/"+cm.Name+fmt.Sprint(cm.Labels))
		}
		t.Errorf("the target holds %d ConfigMaps of scheduled-0, want 1; it holds %v; instance: %s", len(list.Items), names, describeInstance(e.instance(t, "scheduled-0")))
	}
}

// TestTargetAPIServerRestartDuringProvisioning stops the API server of the
// only target cluster (etcd keeps running) while instances are provisioned,
// some already scheduled on it and some not, and starts it again on the
// same address with the same certificates, as a control-plane restart or
// upgrade does: none fails while it is down, the scheduled ones report
// ClusterUnreachable, and afterwards every instance succeeds with exactly
// one object of its own on the target. Unlike
// TestTargetOutageDuringProvisioning the server really goes away: its open
// connections and watches end, and new connections are refused.
func TestTargetAPIServerRestartDuringProvisioning(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	// A cluster of its own: restarting a shared one would disturb the
	// tests running next to this one.
	workload := testenv.Start(t, testenv.WithName("restarting"), testenv.WithCRDs())
	e := newEnv(t, envOptions{noCluster: true})
	e.registerCluster(t, "restarting", workload.Kubeconfig, nil)
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: restarted-{{ .instance.metadata.name }}\n")})
	// The cluster is in use when it goes down: the registry has seen it
	// Ready and the provisioner has made its client and cache for it by
	// provisioning an instance there.
	waitFor(t, "SFCluster restarting to be Ready=True", func() bool {
		return isReady(e.sfcluster(t, "restarting"), metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable)
	})
	e.createInstance(t, "before", "svc", "plan", nil)
	e.waitInstance(t, "before", osbv1alpha1.StateSucceeded)

	stopped := time.Now()
	must(t, workload.StopAPIServer())
	const n = 3
	names := []string{"before"}
	for i := range n {
		scheduled, unscheduled := fmt.Sprintf("scheduled-%d", i), fmt.Sprintf("unscheduled-%d", i)
		e.createInstance(t, scheduled, "svc", "plan", nil, func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = "restarting" })
		e.createInstance(t, unscheduled, "svc", "plan", nil)
		names = append(names, scheduled, unscheduled)
	}
	for i := range n {
		name := fmt.Sprintf("scheduled-%d", i)
		waitFor(t, name+" to report that its cluster cannot be reached", func() bool {
			inst := e.instance(t, name)
			if inst.Status.State == osbv1alpha1.StateFailed {
				t.Fatalf("%s failed while the API server of its cluster was stopped: %s", name, describeInstance(inst))
			}
			r := readyCondition(inst.Status.Conditions)
			return r != nil && r.Reason == string(provisioner.ReasonClusterUnreachable)
		})
	}
	// More than limits.maxTransientErrors (3 in these tests) attempts
	// pass while the API server is down: the runtime retries every second
	// at most.
	e.expectNoneFailed(t, len(names))

	restarted := time.Now()
	must(t, workload.StartAPIServer(context.Background()))
	t.Logf("API server down for %s, ready again %s after the start", restarted.Sub(stopped).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	for _, name := range names {
		e.waitInstance(t, name, osbv1alpha1.StateSucceeded)
	}
	t.Logf("every instance succeeded %s after the API server started again", time.Since(restarted).Round(time.Millisecond))
	for _, name := range names {
		list := &corev1.ConfigMapList{}
		must(t, workload.Client.List(context.Background(), list, client.InNamespace(e.ns), client.MatchingLabels{provisioner.LabelInstanceID: provisioner.InstanceID(e.ns, name)}))
		if len(list.Items) != 1 || list.Items[0].Name != "restarted-"+name {
			var got []string
			for _, cm := range list.Items {
				got = append(got, cm.Name)
			}
			t.Errorf("the target holds the ConfigMaps %v of %s, want exactly [restarted-%s]; instance: %s", got, name, name, describeInstance(e.instance(t, name)))
		}
	}
}

// expectNoneFailed checks, over the quiet period, that none of the env's n
// instances fails.
func (e *env) expectNoneFailed(t *testing.T, n int) {
	t.Helper()
	waitForDuration(t, quietPeriod, func() {
		list := &osbv1alpha1.SFServiceInstanceList{}
		must(t, onboarding.Client.List(context.Background(), list, client.InNamespace(e.ns)))
		if len(list.Items) != n {
			t.Fatalf("%d instances, want %d", len(list.Items), n)
		}
		for i := range list.Items {
			if list.Items[i].Status.State == osbv1alpha1.StateFailed {
				t.Fatalf("instance %s failed while its cluster was unreachable: %s", list.Items[i].Name, describeInstance(&list.Items[i]))
			}
		}
	})
}

// waitForDuration calls check every poll interval for d.
func waitForDuration(t *testing.T, d time.Duration, check func()) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		check()
		time.Sleep(pollEvery)
	}
}

// hostPort returns the host:port of c's API server.
func hostPort(t *testing.T, c *testenv.Cluster) string {
	t.Helper()
	u, err := url.Parse(c.Config.Host)
	if err != nil || u.Host == "" {
		t.Fatalf("API server address %q: %v", c.Config.Host, err)
	}
	return u.Host
}

// TestOnboardingAPIServerRestartDuringProvisioning stops the API server of
// the onboarding cluster (where the instances live) while instances are in
// progress, lets their sources turn ready on the target while it is down,
// so that the inter-operator has status to write and cannot, and starts it
// again: every instance ends succeeded, and the inter-operator (its
// manager, caches and watches) came through without a restart.
func TestOnboardingAPIServerRestartDuringProvisioning(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	// An onboarding cluster of its own: the package's is shared.
	own := testenv.Start(t, testenv.WithName("onboarding-restarting"))
	e := newEnv(t, envOptions{onboarding: own})
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", gatedPlan)
	const n = 4
	for i := range n {
		e.createInstance(t, fmt.Sprintf("inst-%d", i), "svc", "plan", nil)
	}
	for i := range n {
		e.waitInstance(t, fmt.Sprintf("inst-%d", i), osbv1alpha1.StateInProgress)
	}

	stopped := time.Now()
	must(t, own.StopAPIServer())
	for i := range n {
		must(t, target.Client.Create(ctx, gate(e.ns, fmt.Sprintf("gate-inst-%d", i), "succeeded")))
	}
	// The gates wake the instances, whose status writes now fail: wait
	// until the inter-operator tried (its reconciles of the instances
	// ended in errors) before the API server comes back.
	errorsBefore := testenv.MetricValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": e.name + "-" + interoperator.InstanceControllerName})
	waitFor(t, "the inter-operator to fail writing to the stopped onboarding API server", func() bool {
		return testenv.MetricValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": e.name + "-" + interoperator.InstanceControllerName}) > errorsBefore
	})
	restarted := time.Now()
	must(t, own.StartAPIServer(ctx))
	for i := range n {
		e.waitInstance(t, fmt.Sprintf("inst-%d", i), osbv1alpha1.StateSucceeded)
	}
	t.Logf("onboarding API server down for %s; every instance succeeded %s after it started again",
		restarted.Sub(stopped).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	// A new instance after the restart goes through too: the watches of
	// the inter-operator's cache were re-established.
	e.createInstance(t, "after", "svc", "plan", nil)
	must(t, target.Client.Create(ctx, gate(e.ns, "gate-after", "succeeded")))
	e.waitInstance(t, "after", osbv1alpha1.StateSucceeded)
}
