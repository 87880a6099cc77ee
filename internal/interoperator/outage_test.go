package interoperator_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
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
	must(t, workload.Client.List(context.Background(), list, client.InNamespace(e.ns), client.MatchingLabels{provisioner.LabelInstanceID: "scheduled-0"}))
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
