package interoperator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/internal/interoperator/scheduling"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// workloadNames are the shared workload API servers (sharedWorkloads);
// TestMultiClusterScheduling registers them as SFClusters of the same names.
var workloadNames = []string{"w1", "w2", "w3"}

// TestMultiClusterScheduling places instances on three workload API
// servers with each scheduler, and checks cordons, capacity, the plan's
// clusterSelector, the interoperator-config ConfigMap, a restart of
// round-robin and concurrent placements.
func TestMultiClusterScheduling(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	workloads := sharedWorkloads(t)

	// setup starts an inter-operator with the three SFClusters (mutate
	// sets labels and capacity) and a service with a plan whose instances
	// render one ConfigMap each.
	setup := func(t *testing.T, spec func(*interoperatorv1alpha1.ProviderConfigSpec), mutate func(*resourcev1alpha1.SFCluster), planMutate ...func(*osbv1alpha1.SFPlan)) *env {
		t.Helper()
		e := newEnv(t, envOptions{noCluster: true, configSpec: spec})
		for _, name := range workloadNames {
			e.registerCluster(t, name, workloads[name].Kubeconfig, mutate)
		}
		e.createService(t, "svc")
		e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: placed-{{ .instance.metadata.name }}\n")}, planMutate...)
		return e
	}
	// place creates an instance and waits until it is scheduled and
	// provisioned; it returns the cluster.
	place := func(t *testing.T, e *env, id string, params map[string]any) string {
		t.Helper()
		e.createInstance(t, id, "svc", "plan", params)
		inst := e.waitInstance(t, id, osbv1alpha1.StateSucceeded)
		return inst.Spec.ClusterID
	}
	placeAll := func(t *testing.T, e *env, prefix string, n int, params ...map[string]any) []string {
		t.Helper()
		var got []string
		for i := range n {
			var p map[string]any
			if len(params) > 0 {
				p = params[0]
			}
			got = append(got, place(t, e, fmt.Sprintf("%s-%d", prefix, i), p))
		}
		return got
	}
	schedulerType := func(typ scheduling.Type) func(*interoperatorv1alpha1.ProviderConfigSpec) {
		return func(s *interoperatorv1alpha1.ProviderConfigSpec) { s.SchedulerType = string(typ) }
	}
	cpu := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	requestsCPU := func(n string) func(*osbv1alpha1.SFPlan) {
		return func(p *osbv1alpha1.SFPlan) {
			p.Spec.Context = &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"requests":{"cpu":%q}}`, n)}
		}
	}

	t.Run("LeastFilled", func(t *testing.T) {
		t.Parallel()
		e := setup(t, schedulerType(scheduling.TypeLeastFilled), nil)
		// w1 holds two instances already, w3 one. Pinned there, they
		// count once the inter-operator accepted them.
		for i, c := range []string{"w1", "w1", "w3"} {
			e.createInstance(t, fmt.Sprintf("pre-%d", i), "svc", "plan", nil, func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = c })
		}
		for i := range 3 {
			e.waitInstance(t, fmt.Sprintf("pre-%d", i), osbv1alpha1.StateSucceeded)
		}
		got := placeAll(t, e, "new", 3)
		if want := []string{"w2", "w2", "w3"}; !equal(got, want) {
			t.Errorf("least-filled placed on %v, want %v (fewest instances, ties by name)", got, want)
		}
		inst := e.instance(t, "new-0")
		c := apimeta.FindStatusCondition(inst.Status.Conditions, provisioner.ConditionScheduled)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "w2") || !strings.Contains(c.Message, "least-filled") {
			t.Errorf("Scheduled condition %+v, want True naming w2 and least-filled", c)
		}
		// The decision is in the condition, not in an event too (each
		// event is a write per instance).
		if evs := e.events(t, "new-0"); containsSubstring(evs, "Scheduled on SFCluster") {
			t.Errorf("events %q, want none for the scheduling decision", evs)
		}
	})

	t.Run("RoundRobinAcrossRestart", func(t *testing.T) {
		t.Parallel()
		e := setup(t, schedulerType(scheduling.TypeRoundRobin), nil)
		got := placeAll(t, e, "a", 4)
		must(t, e.stop())
		e.start(t)
		got = append(got, placeAll(t, e, "b", 2)...)
		if want := []string{"w1", "w2", "w3", "w1", "w2", "w3"}; !equal(got, want) {
			t.Errorf("round-robin placed on %v, want %v (continuing after the restart)", got, want)
		}
	})

	t.Run("LeastUtilized", func(t *testing.T) {
		t.Parallel()
		capacities := map[string]string{"w1": "4", "w2": "10", "w3": "6"}
		e := setup(t, schedulerType(scheduling.TypeLeastUtilized), func(c *resourcev1alpha1.SFCluster) {
			c.Spec.TotalCapacity = cpu(capacities[c.Name])
		}, requestsCPU("1"))
		// Shares after placing: w2 1/10, then w3 1/6 < w2 2/10, then w2
		// 3/10 < w3 2/6 and w1 1/4.
		got := placeAll(t, e, "u", 3)
		if want := []string{"w2", "w3", "w2"}; !equal(got, want) {
			t.Errorf("least-utilized placed on %v, want %v", got, want)
		}
	})

	t.Run("CapacityAndCordon", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(s *interoperatorv1alpha1.ProviderConfigSpec) {
			s.SchedulerType = string(scheduling.TypeLeastFilled)
		}, func(c *resourcev1alpha1.SFCluster) {
			c.Spec.TotalCapacity = cpu("2")
			c.Spec.SchedulingLimitPercentage = 50 // one instance of one cpu
			c.Spec.Unschedulable = c.Name == "w3"
		}, requestsCPU("1"))
		got := placeAll(t, e, "c", 2)
		if want := []string{"w1", "w2"}; !equal(got, want) {
			t.Errorf("placed on %v, want %v (w3 is cordoned)", got, want)
		}
		e.createInstance(t, "c-full", "svc", "plan", nil)
		waitFor(t, "the third instance to wait because every cluster is full or cordoned", func() bool {
			inst := e.instance(t, "c-full")
			r := readyCondition(inst.Status.Conditions)
			return r != nil && r.Reason == "NoClusterAvailable" && strings.Contains(r.Message, "w1: full") && strings.Contains(r.Message, "w3: cordoned")
		})
		if inst := e.instance(t, "c-full"); inst.Spec.ClusterID != "" {
			t.Fatalf("the instance was placed on the full cluster %s", inst.Spec.ClusterID)
		}
		// Uncordoning w3 lets it in.
		sfc := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "w3"}}
		edit(t, platform.Client, sfc, func() { sfc.Spec.Unschedulable = false })
		if inst := e.waitInstance(t, "c-full", osbv1alpha1.StateSucceeded); inst.Spec.ClusterID != "w3" {
			t.Errorf("after the uncordon the instance went to %s, want w3", inst.Spec.ClusterID)
		}
	})

	t.Run("LabelSelector", func(t *testing.T) {
		t.Parallel()
		e := setup(t, schedulerType(scheduling.TypeLabelSelector), func(c *resourcev1alpha1.SFCluster) {
			c.Labels = map[string]string{"tier": map[string]string{"w1": "gold", "w2": "silver", "w3": "silver"}[c.Name]}
		}, func(p *osbv1alpha1.SFPlan) {
			p.Spec.Templates = append(p.Spec.Templates, gotemplate(osbv1alpha1.ActionClusterSelector, "tier={{ .instance.spec.parameters.tier }}"))
		})
		if got := place(t, e, "gold", map[string]any{"tier": "gold"}); got != "w1" {
			t.Errorf("tier=gold went to %s, want w1", got)
		}
		if got := placeAll(t, e, "silver", 2, map[string]any{"tier": "silver"}); !equal(got, []string{"w2", "w3"}) {
			t.Errorf("tier=silver went to %v, want w2 then w3 (fewest instances)", got)
		}
		e.createInstance(t, "bronze", "svc", "plan", map[string]any{"tier": "bronze"})
		inst := e.waitInstance(t, "bronze", osbv1alpha1.StateFailed)
		if r := readyCondition(inst.Status.Conditions); r == nil || r.Reason != string(provisioner.ReasonNoClusterMatches) || !strings.Contains(inst.Status.Error, "tier=bronze") {
			t.Errorf("no match: Ready %+v, error %q; want reason NoClusterMatches naming the selector", r, inst.Status.Error)
		}
	})

	t.Run("DefaultClusterOutsideSelector", func(t *testing.T) {
		t.Parallel()
		// The default scheduler with a default cluster, as on the
		// landscape: a plan whose clusterSelector leaves the default
		// out goes to the only cluster it selects; one that selects
		// the default goes there; one that selects several others
		// waits, as without a default.
		e := setup(t, func(s *interoperatorv1alpha1.ProviderConfigSpec) { s.DefaultCluster = "w1" }, func(c *resourcev1alpha1.SFCluster) {
			c.Labels = map[string]string{"tier": map[string]string{"w1": "gold", "w2": "silver", "w3": "bronze"}[c.Name]}
		}, func(p *osbv1alpha1.SFPlan) {
			p.Spec.Templates = append(p.Spec.Templates, gotemplate(osbv1alpha1.ActionClusterSelector, "tier in ({{ .instance.spec.parameters.tier }})"))
		})
		if got := place(t, e, "silver", map[string]any{"tier": "silver"}); got != "w2" {
			t.Errorf("tier=silver went to %s, want w2 (the only cluster the selector leaves)", got)
		}
		if got := place(t, e, "gold", map[string]any{"tier": "gold, silver"}); got != "w1" {
			t.Errorf("tier in (gold, silver) went to %s, want the default w1", got)
		}
		e.createInstance(t, "either", "svc", "plan", map[string]any{"tier": "silver, bronze"})
		waitFor(t, "the instance whose selector leaves out the default and matches two clusters to wait", func() bool {
			r := readyCondition(e.instance(t, "either").Status.Conditions)
			return r != nil && r.Reason == "NoClusterAvailable" && strings.Contains(r.Message, "w2, w3")
		})
	})

	t.Run("InteroperatorConfigMap", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		// Without a scheduler type and default cluster, the default
		// scheduler does not choose among three clusters.
		e.createInstance(t, "before", "svc", "plan", nil)
		waitFor(t, "the instance to wait for a default cluster", func() bool {
			r := readyCondition(e.instance(t, "before").Status.Conditions)
			return r != nil && r.Reason == "NoClusterAvailable"
		})
		must(t, platform.Client.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: scheduling.ConfigMapName},
			Data:       map[string]string{scheduling.ConfigMapKey: "instanceWorkerCount: 3\nprimaryClusterId: w2\n"},
		}))
		// The ConfigMap is not watched: touching the SFClusters wakes the
		// waiting instance once the ConfigMap's cache time has passed.
		waitFor(t, "the primaryClusterId of the interoperator-config to place the waiting instance on w2", func() bool {
			e.touchClusters(t)
			inst := e.instance(t, "before")
			return inst.Spec.ClusterID == "w2"
		})
		// Worker counts are read when the inter-operator starts.
		must(t, e.stop())
		e.start(t)
		workers := func(controller string) float64 {
			return testenv.MetricValue(t, "controller_runtime_max_concurrent_reconciles", map[string]string{"controller": e.name + "-" + controller})
		}
		// The gauge is set when the restarted controller starts.
		waitFor(t, "the restarted instance controller to run instanceWorkerCount (3) workers", func() bool {
			return workers(interoperator.InstanceControllerName) == 3
		})
		if n := workers(interoperator.BindingControllerName); n != interoperator.DefaultMaxConcurrentReconciles {
			t.Errorf("the binding controller runs %v workers, want the default %d (the ConfigMap sets no bindingWorkerCount)", n, interoperator.DefaultMaxConcurrentReconciles)
		}
	})

	t.Run("ConcurrentNeverOverfills", func(t *testing.T) {
		t.Parallel()
		const perCluster, instances = 10, 100
		e := setup(t, schedulerType(scheduling.TypeLeastFilled), func(c *resourcev1alpha1.SFCluster) {
			c.Spec.TotalCapacity = cpu(fmt.Sprint(perCluster))
		}, requestsCPU("1"))
		var wg sync.WaitGroup
		for i := range instances {
			wg.Go(func() { e.createInstance(t, fmt.Sprintf("race-%d", i), "svc", "plan", nil) })
		}
		wg.Wait()
		counts := map[string]int{}
		waitFor(t, fmt.Sprintf("%d instances placed and the rest waiting", perCluster*len(workloadNames)), func() bool {
			list := &osbv1alpha1.SFServiceInstanceList{}
			must(t, onboarding.Client.List(context.Background(), list, client.InNamespace(e.ns)))
			clear(counts)
			waiting := 0
			for _, inst := range list.Items {
				if inst.Spec.ClusterID != "" {
					counts[inst.Spec.ClusterID]++
					continue
				}
				if r := readyCondition(inst.Status.Conditions); r != nil && r.Reason == "NoClusterAvailable" {
					waiting++
				}
			}
			for c, n := range counts {
				if n > perCluster {
					t.Fatalf("SFCluster %s holds %d instances, capacity is %d", c, n, perCluster)
				}
			}
			return waiting == instances-perCluster*len(workloadNames)
		})
		for _, name := range workloadNames {
			if counts[name] != perCluster {
				t.Errorf("SFCluster %s holds %d instances, want %d (counts %v)", name, counts[name], perCluster, counts)
			}
		}
	})
}

// registerCluster registers the API server of kubeconfig as the SFCluster
// name; mutate, when not nil, changes it before it is created.
func (e *env) registerCluster(t *testing.T, name string, kubeconfig []byte, mutate func(*resourcev1alpha1.SFCluster)) {
	t.Helper()
	ctx := context.Background()
	must(t, platform.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name + "-kubeconfig"},
		Data:       map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: kubeconfig},
	}))
	sfc := &resourcev1alpha1.SFCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name},
		Spec:       resourcev1alpha1.SFClusterSpec{SecretRef: name + "-kubeconfig"},
	}
	if mutate != nil {
		mutate(sfc)
	}
	must(t, platform.Client.Create(ctx, sfc))
}

// touchClusters changes a label of every SFCluster of the env: a change of
// the SFClusters wakes the instances that wait for one.
func (e *env) touchClusters(t *testing.T) {
	t.Helper()
	list := &resourcev1alpha1.SFClusterList{}
	must(t, platform.Client.List(context.Background(), list, client.InNamespace(e.catalog)))
	for i := range list.Items {
		c := &list.Items[i]
		patch := fmt.Appendf(nil, `{"spec":{"schedulingLimitPercentage":%d}}`, 99-c.Generation%2)
		must(t, platform.Client.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)))
	}
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func containsSubstring(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}
