package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/marketplane/marketplane/internal/landscape/pki"
)

// A landscape has no container runtime and no kubelet. A cluster that runs
// workloads (WithWorkloads) gets them simulated instead: kube-scheduler
// places pods on Node objects that kwok (sigs.k8s.io/kwok) manages as if it
// were their kubelets. kwok marks the nodes Ready, renews their leases and
// takes every pod bound to them through the lifecycle of kwok's "general"
// pod stages (created, init containers, running and ready within a few
// seconds; deleted when asked). The controller manager of such a cluster
// also runs WorkloadControllers, so that a Deployment applied to it becomes
// Available as in a real cluster, and the nodes' allocatable is what
// capacity checks (SFCluster status) see.

// WorkloadControllers are the kube-controller-manager controllers a cluster
// that runs workloads adds to Controllers: deployment and replicaset create
// the pods of a Deployment, nodelifecycle taints a node whose lease is not
// renewed (kwok stopped) and evicts its pods, as in a real cluster.
var WorkloadControllers = []string{"deployment", "replicaset", "nodelifecycle"}

// Simulated nodes.
const (
	// SimulatedNodes is how many nodes a cluster that runs workloads has.
	SimulatedNodes = 2
	// SimulatedNodeAnnotation marks the nodes kwok manages (value
	// SimulatedNodeAnnotationValue); kwok leaves every other node alone.
	SimulatedNodeAnnotation      = "kwok.x-k8s.io/node"
	SimulatedNodeAnnotationValue = "fake"
	// simulatedNodePrefix starts the names of the simulated nodes.
	simulatedNodePrefix = "kwok-node-"
	// podCIDR is where kwok takes the pods' IP addresses from; it does not
	// overlap the API servers' --service-cluster-ip-range.
	podCIDR = "10.244.0.0/16"
	// nodeLeaseSeconds is the duration of the leases kwok renews for the
	// nodes (a kubelet's default); nodelifecycle marks a node whose lease
	// ran out NotReady.
	nodeLeaseSeconds = 40
	// schedulerUser is kube-scheduler's user, bound to its bootstrap
	// roles.
	schedulerUser = "system:kube-scheduler"
	// kwokUser is kwok's user. kwok stands in for the kubelets of every
	// simulated node (nodes, their status and leases, pods, their status
	// and deletion, events), which the node authorizer would limit to one
	// node each; as one process for all nodes it gets system:masters.
	kwokUser = "marketplane-kwok"
)

// SimulatedNodeResources returns the capacity and allocatable of each
// simulated node: 4 CPUs, 16 GiB of memory and 110 pods, a common small
// machine and the kubelet's default pod limit.
func SimulatedNodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// SimulatedNodeName returns the name of the i-th simulated node.
func SimulatedNodeName(i int) string { return simulatedNodePrefix + strconv.Itoa(i) }

// WithWorkloads makes the named clusters run workloads on simulated nodes:
// their controller manager also runs WorkloadControllers, and StartCluster
// starts kube-scheduler and kwok for them, kept running like the other
// processes, and creates SimulatedNodes nodes.
func WithWorkloads(clusters ...string) Option {
	return func(c *ControlPlane) {
		if c.workloads == nil {
			c.workloads = map[string]bool{}
		}
		for _, name := range clusters {
			c.workloads[name] = true
		}
	}
}

// controllers returns the controllers of a cluster's controller manager.
func (c *ControlPlane) controllers(cluster string) []string {
	if c.workloads[cluster] {
		return slices.Concat(Controllers, WorkloadControllers)
	}
	return Controllers
}

// startWorkloads starts kube-scheduler and kwok for a cluster whose API
// server and controller manager work, creates its simulated nodes, and
// waits until kwok reports them Ready.
func (c *ControlPlane) startWorkloads(ctx context.Context, rc *RunningCluster, id *identity) error {
	if c.Binaries.Scheduler == "" || c.Binaries.Kwok == "" || c.Binaries.KwokStages == "" {
		return fmt.Errorf("cluster %s runs workloads but kube-scheduler, kwok or %s is not known: %w", rc.Name, KwokStagesFile, ErrBinaryMissing)
	}
	schedulerKubeconfig, err := c.clientKubeconfig(rc, id, "scheduler", pki.Leaf{CommonName: schedulerUser, Client: true})
	if err != nil {
		return err
	}
	kwokKubeconfig, err := c.clientKubeconfig(rc, id, "kwok", pki.Leaf{CommonName: kwokUser, Organizations: []string{mastersGroup}, Client: true})
	if err != nil {
		return err
	}

	schedulerArgs := []string{
		"--kubeconfig=" + schedulerKubeconfig,
		"--leader-elect=false",
		// No serving: nothing scrapes it, and it would need a port.
		"--secure-port=0",
	}
	name := "kube-scheduler-" + rc.Name
	if rc.scheduler, err = c.runner.Start(name, c.Binaries.Scheduler, schedulerArgs, c.Layout.Log(name)); err != nil {
		return err
	}
	schedulerRec := rc.scheduler.Record // a copy, see StartEtcd
	if err := c.Store.Update(func(s *State) error { s.Clusters[rc.Name].Scheduler = &schedulerRec; return nil }); err != nil {
		return err
	}

	cs, err := kubernetes.NewForConfig(rc.Config)
	if err != nil {
		return fmt.Errorf("client for %s: %w", rc.Name, err)
	}
	if err := ensureSimulatedNodes(ctx, cs); err != nil {
		return fmt.Errorf("simulated nodes of %s: %w", rc.Name, err)
	}

	kwokArgs := []string{
		"--kubeconfig=" + kwokKubeconfig,
		// The stages `make tools` took from kwok's module: node
		// initialisation and heartbeat, the general pod lifecycle.
		"--config=" + c.Binaries.KwokStages,
		"--manage-nodes-with-annotation-selector=" + SimulatedNodeAnnotation + "=" + SimulatedNodeAnnotationValue,
		"--cidr=" + podCIDR,
		"--node-lease-duration-seconds=" + strconv.Itoa(nodeLeaseSeconds),
		// Without --server-address and --node-port kwok serves nothing
		// (no logs or exec of the simulated pods), so it needs no port.
	}
	name = "kwok-" + rc.Name
	if rc.kwok, err = c.runner.Start(name, c.Binaries.Kwok, kwokArgs, c.Layout.Log(name)); err != nil {
		return err
	}
	kwokRec := rc.kwok.Record // a copy, see StartEtcd
	if err := c.Store.Update(func(s *State) error { s.Clusters[rc.Name].Kwok = &kwokRec; return nil }); err != nil {
		return err
	}
	return c.poll(ctx, "the simulated nodes of "+rc.Name, []*Proc{rc.apiServer, rc.scheduler, rc.kwok}, func(ctx context.Context) (bool, error) {
		for i := range SimulatedNodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, SimulatedNodeName(i), metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
}

// clientKubeconfig issues a client certificate of the cluster's client CA
// for leaf and writes a kubeconfig with it to pki/<cluster>/<name>.kubeconfig.
func (c *ControlPlane) clientKubeconfig(rc *RunningCluster, id *identity, name string, leaf pki.Leaf) (string, error) {
	pair, err := id.clientCA.Issue(c.Layout.ClusterPKIDir(rc.Name), name, leaf)
	if err != nil {
		return "", err
	}
	data, err := kubeconfig(rc.Name, rc.Host, c.servingCA.CertPEM, pair)
	if err != nil {
		return "", err
	}
	path := c.Layout.Path("pki", rc.Name, name+".kubeconfig")
	if err := pki.WriteFileAtomic(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// ensureSimulatedNodes creates the simulated nodes that do not exist. A
// node's capacity and allocatable are set at creation (the API server keeps
// a new node's status); kwok's node stages keep them. Existing nodes (a
// resumed landscape) are left as they are.
func ensureSimulatedNodes(ctx context.Context, cs kubernetes.Interface) error {
	for i := range SimulatedNodes {
		name := SimulatedNodeName(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					corev1.LabelHostname:   name,
					corev1.LabelOSStable:   "linux",
					corev1.LabelArchStable: "amd64",
					"type":                 "kwok",
				},
				Annotations: map[string]string{SimulatedNodeAnnotation: SimulatedNodeAnnotationValue},
			},
			Status: corev1.NodeStatus{Capacity: SimulatedNodeResources(), Allocatable: SimulatedNodeResources()},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return nil
}

// nodeReady reports whether a node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
