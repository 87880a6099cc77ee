package landscape_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/stack"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// TestSimulatedWorkloads runs the whole landscape and checks that its
// workload cluster runs workloads: kwok's nodes are Ready with the
// documented allocatable, a Deployment applied to the cluster becomes
// Available (its pods scheduled onto the simulated nodes and made ready by
// kwok), and the inter-operator's SFCluster of the cluster reports the
// nodes' allocatable as its capacity. The other clusters have no nodes.
func TestSimulatedWorkloads(t *testing.T) {
	requireBinaries(t)
	useSharedStack(t)
	t.Parallel()
	ctx := t.Context()
	// The shared landscape: this test only adds objects of its own (a
	// Deployment, a tenant namespace with its ManagedControlPlane and
	// Sample) and reads the workload cluster's nodes and SFCluster, which
	// no other test on it changes.
	l, _ := sharedStack(t)

	state := l.State()
	workload := state.Clusters[landscape.ClusterWorkload]
	for _, p := range []*controlplane.Process{workload.Scheduler, workload.Kwok} {
		if !controlplane.Alive(p) {
			// Not fatal: the checks below say what is missing then.
			t.Errorf("state.json records the workload cluster's scheduler %+v and kwok %+v; want both running", workload.Scheduler, workload.Kwok)
			continue
		}
		if rss, err := supervisor.ResidentMemory(p.PID); err == nil {
			t.Logf("resident memory of %s: %d MiB", p.Name, rss>>20)
		}
	}

	perNode := controlplane.SimulatedNodeResources()
	t.Run("the workload cluster has simulated nodes, Ready, with the documented allocatable", func(t *testing.T) {
		nodes := &corev1.NodeList{}
		must(t, l.Workload.Client.List(ctx, nodes))
		if len(nodes.Items) != controlplane.SimulatedNodes {
			t.Fatalf("the workload cluster has %d nodes; want %d", len(nodes.Items), controlplane.SimulatedNodes)
		}
		for _, n := range nodes.Items {
			if !conditionTrue(n.Status.Conditions, corev1.NodeReady) {
				t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
			}
			for name, want := range perNode {
				if got := n.Status.Allocatable[name]; got.Cmp(want) != 0 {
					t.Errorf("node %s: allocatable %s = %s; want %s", n.Name, name, got.String(), want.String())
				}
			}
		}
		for _, c := range []*landscape.Cluster{l.Platform, l.Onboarding} {
			other := &corev1.NodeList{}
			must(t, c.Client.List(ctx, other))
			if len(other.Items) != 0 {
				t.Errorf("cluster %s has %d nodes; want none (only the workload cluster runs workloads)", c.Name, len(other.Items))
			}
		}
	})

	t.Run("a Deployment applied to the workload cluster becomes Available", func(t *testing.T) {
		const replicas = 3
		name := sharedName("simulated")
		labels := map[string]string{"app": name}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceDefault},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name:  "app",
						Image: "registry.invalid/simulated:v1", // never pulled: kwok runs no containers
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
						}},
					}}},
				},
			},
		}
		created := time.Now()
		must(t, l.Workload.Client.Create(ctx, deploy))
		// The pod stages take 1 to 6 s each (kwok's delay and jitter);
		// 90 s leaves room for a loaded machine.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			if err := l.Workload.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
				return false, nil
			}
			return deploy.Status.ObservedGeneration == deploy.Generation && deploy.Status.AvailableReplicas == replicas &&
				conditionTrueApps(deploy.Status.Conditions, appsv1.DeploymentAvailable), nil
		})
		if err != nil {
			t.Fatalf("the Deployment did not become Available with %d replicas within %s: status %+v; pods: %s",
				replicas, waitTimeout, deploy.Status, describePods(ctx, l.Workload.Client, labels))
		}
		t.Logf("Deployment with %d replicas: created to Available in %s", replicas, time.Since(created).Round(10*time.Millisecond))
		pods := &corev1.PodList{}
		must(t, l.Workload.Client.List(ctx, pods, client.InNamespace(corev1.NamespaceDefault), client.MatchingLabels(labels)))
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				t.Errorf("pod %s: node %q, phase %s, IP %q; want Running with an IP on a simulated node", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
			}
		}
	})

	t.Run("the workload cluster's SFCluster reports the nodes' allocatable as its capacity", func(t *testing.T) {
		want := corev1.ResourceList{}
		for name, q := range perNode {
			q.Mul(controlplane.SimulatedNodes)
			want[name] = q
		}
		sfc := &resourcev1alpha1.SFCluster{}
		key := client.ObjectKey{Namespace: stack.CatalogNamespace, Name: landscape.ClusterWorkload}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			if err := l.Platform.Client.Get(ctx, key, sfc); err != nil {
				return false, nil
			}
			return sameResources(sfc.Status.TotalCapacity, want) && sameResources(sfc.Status.CurrentCapacity, want), nil
		})
		if err != nil {
			t.Fatalf("SFCluster %s: totalCapacity %v, currentCapacity %v within %s; want %v (%d nodes of %v)",
				key, sfc.Status.TotalCapacity, sfc.Status.CurrentCapacity, waitTimeout, want, controlplane.SimulatedNodes, perNode)
		}
	})

	t.Run("a Sample whose provider runs a server Deployment becomes Ready once its pods run", func(t *testing.T) {
		checkSampleServer(t, l)
	})
}

// checkSampleServer creates a ManagedControlPlane and its Sample on the
// landscape. The landscape's sample ProviderConfig sets spec.workload, so
// the provider runs the Sample's server as a Deployment on the workload
// cluster (Velero-like) and reports the Sample Ready only once the
// Deployment is Available: its pods scheduled onto the simulated nodes and
// made ready by kwok.
func checkSampleServer(t *testing.T, l *landscape.Landscape) {
	ctx := t.Context()
	const name = "server"
	tenant := sharedName("tenant-server")
	must(t, l.Onboarding.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}))
	mcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.openmcp.cloud/v2alpha1", "kind": "ManagedControlPlane",
		"metadata": map[string]any{"name": name, "namespace": tenant},
		"spec":     map[string]any{"iam": map[string]any{}},
	}}
	must(t, l.Onboarding.Client.Create(ctx, mcp))
	sample := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sample.services.openmcp.cloud/v1alpha1", "kind": "Sample",
		"metadata": map[string]any{"name": name, "namespace": tenant},
		"spec":     map[string]any{},
	}}
	created := time.Now()
	must(t, l.Onboarding.Client.Create(ctx, sample))

	var ready string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*waitTimeout, true, func(ctx context.Context) (bool, error) {
		if err := l.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(sample), sample); err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(sample.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				ready = fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		// Twice waitTimeout: the MCP's cluster (a new API server) comes
		// first, then the server's pods.
		t.Fatalf("the Sample did not become Ready within %s; Ready is %q", 2*waitTimeout, ready)
	}
	t.Logf("Sample with a server Deployment: created to Ready in %s (its ManagedControlPlane's cluster included)", time.Since(created).Round(10*time.Millisecond))

	// Its server: the Deployment of the Sample in the provider's server
	// namespace, Available, its pods Running on simulated nodes.
	list := &appsv1.DeploymentList{}
	must(t, l.Workload.Client.List(ctx, list, client.InNamespace(sampleServerNamespace)))
	var deploy *appsv1.Deployment
	for i := range list.Items {
		if list.Items[i].Annotations[sampleOwnerAnnotation] == tenant+"/"+name {
			deploy = &list.Items[i]
		}
	}
	if deploy == nil {
		t.Fatalf("the Sample is Ready but the workload cluster has no Deployment of it in %s (%d Deployments there)", sampleServerNamespace, len(list.Items))
	}
	if !conditionTrueApps(deploy.Status.Conditions, appsv1.DeploymentAvailable) || deploy.Status.AvailableReplicas < 1 {
		t.Errorf("the Sample is Ready but its Deployment %s is not Available: %+v", deploy.Name, deploy.Status)
	}
	pods := &corev1.PodList{}
	must(t, l.Workload.Client.List(ctx, pods, client.InNamespace(sampleServerNamespace), client.MatchingLabels(deploy.Spec.Selector.MatchLabels)))
	if len(pods.Items) == 0 {
		t.Errorf("the Deployment %s has no pods", deploy.Name)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q, phase %s; want Running on a simulated node", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
}

// The sample provider's server Deployments (providers/sample
// internal/controller ServerNamespace and OwnerAnnotation; that package is
// internal to the provider).
const (
	sampleServerNamespace = "sample-servers"
	sampleOwnerAnnotation = "sample.services.openmcp.cloud/owner"
)

func conditionTrue(conds []corev1.NodeCondition, typ corev1.NodeConditionType) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func conditionTrueApps(conds []appsv1.DeploymentCondition, typ appsv1.DeploymentConditionType) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sameResources reports whether got has exactly the quantities of want.
func sameResources(got, want corev1.ResourceList) bool {
	if len(got) != len(want) {
		return false
	}
	for name, q := range want {
		if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// describePods says where the pods with labels are and in which phase, for
// a failure message.
func describePods(ctx context.Context, c client.Client, labels map[string]string) string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(corev1.NamespaceDefault), client.MatchingLabels(labels)); err != nil {
		return err.Error()
	}
	if len(pods.Items) == 0 {
		return "none (is the replicaset controller running?)"
	}
	var parts []string
	for _, p := range pods.Items {
		parts = append(parts, fmt.Sprintf("%s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
	}
	return strings.Join(parts, "; ")
}
