package landscape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/stack"
)

// TestStopStart uses the commands as a user does, on the whole landscape
// in the background: `up`; an instance of the dedicated-cluster plan (its
// own kube-apiserver) and a binding, ordered through the broker, with a
// namespace created through the binding's kubeconfig; `stop`, after which
// no process of the landscape runs, the state directory is kept and
// status says "stopped"; `start`, after which status says "running", the
// instance and the binding are still there and Ready (same objects, not
// made again), and the binding's kubeconfig still authenticates and reads
// the namespace it created before. `stop` of a stopped landscape and
// `start` of a running one say so and succeed.
func TestStopStart(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	ctx := t.Context()
	bin := stackBinaries(t)
	dir := filepath.Join(t.TempDir(), "state")
	t.Cleanup(func() { _ = landscape.Down(context.Background(), dir, nil) })

	begin := time.Now()
	runCLI(t, "landscape", "up", "--state-dir", dir, "--bin-dir", bin, "--start-timeout", startTimeout.String())
	t.Logf("start-up (fresh, 'landscape up', whole landscape): %s", time.Since(begin).Round(10*time.Millisecond))
	var broker stack.BrokerInfo
	raw, err := os.ReadFile(filepath.Join(dir, stack.BrokerCredentialsFile))
	must(t, err)
	must(t, json.Unmarshal(raw, &broker))
	platform := clientFromFile(t, readState(t, dir).Clusters[landscape.ClusterPlatform].Kubeconfig)
	onboarding := clientFromFile(t, readState(t, dir).Clusters[landscape.ClusterOnboarding].Kubeconfig)

	const instance, binding, namespace = "kept-dc", "kept-b", "made-before-the-stop"
	bindPath := "/v2/service_instances/" + instance + "/service_bindings/" + binding
	status, answer, err := brokerCall(ctx, broker, http.MethodPut, "/v2/service_instances/"+instance+"?accepts_incomplete=true",
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`, dedicatedServiceID, dedicatedPlanID))
	must(t, err)
	if status != http.StatusAccepted {
		t.Fatalf("PUT instance: %d %s; want 202", status, answer)
	}
	states := pollLastOperation(t, broker, "/v2/service_instances/"+instance+"/last_operation", func() string { return logLines(dir, instance) })
	if states[len(states)-1] != "succeeded" {
		t.Fatalf("last_operation of the instance: %v; want succeeded", states)
	}
	kubeconfig, boundCluster := bindDedicated(ctx, t, broker, bindPath)
	must(t, bindingClient(t, kubeconfig).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	before := objectsOf(t, platform, onboarding, instance, binding)
	running := readState(t, dir)
	if c := running.Clusters[boundCluster]; c == nil || c.Request == nil || !controlplane.Alive(c.APIServer) {
		t.Fatalf("state records %+v for the instance's cluster %q; want its API server running", c, boundCluster)
	}
	if out := runCLI(t, "landscape", "status", "--state-dir", dir); !strings.Contains(out, ": running, Ready (supervisor pid "+strconv.Itoa(running.Supervisor.PID)) {
		t.Errorf("status of the running landscape does not say it runs, with its pid:\n%s", out)
	}

	// Every process of the landscape: the recorded ones and the providers
	// the operator runs, which state.json does not record.
	tree := landscape.ProcessTree(running.Supervisor.PID)
	if missing := missingFrom(tree, running.RecordedProcesses()); missing != "" || !slices.ContainsFunc(tree, func(p *controlplane.Process) bool { return p.Name == "sample" }) {
		t.Fatalf("the supervisor's process tree %s lacks recorded processes (%s) or the sample provider: the check after stop could not fail", names(tree), missing)
	}

	t.Run("stop ends every process and keeps the state directory", func(t *testing.T) {
		begin := time.Now()
		out := runCLI(t, "landscape", "stop", "--state-dir", dir)
		t.Logf("'landscape stop' of the whole landscape with one provisioned cluster: %s", time.Since(begin).Round(10*time.Millisecond))
		if !strings.Contains(out, "Stopped the landscape in") || !strings.Contains(out, "'marketplane landscape start' resumes it") {
			t.Errorf("stop does not say that it stopped the landscape and how to resume it:\n%s", out)
		}
		// No wait: stop returns once everything is gone.
		if controlplane.Alive(running.Supervisor) {
			t.Errorf("the supervisor (pid %d) runs after stop", running.Supervisor.PID)
		}
		checkNothingLeft(t, running)
		for _, p := range tree {
			if controlplane.Alive(p) {
				t.Errorf("%s (pid %d) of the landscape's process tree is still alive after stop", p.Name, p.PID)
			}
		}
		for _, path := range []string{running.Etcd.DataDir, running.Clusters[landscape.ClusterPlatform].Kubeconfig,
			running.Clusters[boundCluster].Kubeconfig, controlplane.Layout{Dir: dir}.PKIDir(), filepath.Join(dir, stack.BrokerCredentialsFile)} {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("after stop: %v; want it kept", err)
			}
		}
		s := readState(t, dir)
		if s.Phase != controlplane.PhaseStopped || s.StoppedAt == nil || s.Supervisor != nil || len(s.RecordedProcesses()) != 0 {
			t.Errorf("state after stop: phase %s, stopped at %v, supervisor %+v, processes %d; want Stopped on purpose, nothing running",
				s.Phase, s.StoppedAt, s.Supervisor, len(s.RecordedProcesses()))
		}
		if out := runCLI(t, "landscape", "status", "--state-dir", dir); !strings.Contains(out, ": stopped (stopped on purpose at ") ||
			!strings.Contains(out, "'marketplane landscape start' resumes it") {
			t.Errorf("status after stop does not say stopped, and how to resume:\n%s", out)
		}
		if out := runCLI(t, "landscape", "stop", "--state-dir", dir); !strings.Contains(out, "is not running (stopped on purpose at ") {
			t.Errorf("a second stop does not say that the landscape is not running:\n%s", out)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("start resumes it with the instance and the binding", func(t *testing.T) {
		begin := time.Now()
		out := runCLI(t, "landscape", "start", "--state-dir", dir, "--bin-dir", bin, "--start-timeout", startTimeout.String())
		t.Logf("start-up ('landscape start' after 'stop', with one provisioned cluster): %s", time.Since(begin).Round(10*time.Millisecond))
		if !strings.Contains(out, "resuming the landscape") || !strings.Contains(out, "restarting 1 cluster(s) provisioned earlier") {
			t.Errorf("start did not resume the landscape with its provisioned cluster:\n%s", out)
		}
		s := readState(t, dir)
		if s.Supervisor == nil || s.Supervisor.PID == running.Supervisor.PID || s.Phase != controlplane.PhaseReady || s.StoppedAt != nil {
			t.Fatalf("state after start: phase %s, supervisor %+v, stopped at %v; want Ready with a new supervisor", s.Phase, s.Supervisor, s.StoppedAt)
		}
		if out := runCLI(t, "landscape", "status", "--state-dir", dir); !strings.Contains(out, ": running, Ready (supervisor pid "+strconv.Itoa(s.Supervisor.PID)) {
			t.Errorf("status after start does not say it runs, with its pid:\n%s", out)
		}
		if out := runCLI(t, "landscape", "start", "--state-dir", dir, "--bin-dir", bin); !strings.Contains(out, "runs already") {
			t.Errorf("start of a running landscape does not say it runs:\n%s", out)
		}
		c := s.Clusters[boundCluster]
		if c == nil || !controlplane.Alive(c.APIServer) {
			t.Fatalf("the instance's cluster after start: %+v; want its API server running", c)
		}
		// The same objects, Ready: the clients are made anew, a port
		// may have moved.
		platform = clientFromFile(t, s.Clusters[landscape.ClusterPlatform].Kubeconfig)
		onboarding = clientFromFile(t, s.Clusters[landscape.ClusterOnboarding].Kubeconfig)
		var last string
		waitForWithin(t, provisionTimeout, "the instance's and the binding's objects Ready after start", func(context.Context) (bool, error) {
			after, err := tryObjectsOf(ctx, platform, onboarding, instance, binding)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if diff := sameObjects(before, after); diff != "" {
				return false, fmt.Errorf("after start: %s", diff)
			}
			return true, nil
		}, func() string { return last })
		states := pollLastOperation(t, broker, "/v2/service_instances/"+instance+"/last_operation", func() string { return logLines(dir, instance) })
		if states[len(states)-1] != "succeeded" {
			t.Errorf("last_operation of the instance after start: %v; want succeeded", states)
		}
		// The binding's kubeconfig, as the broker returned it before the
		// stop (pointed at the new port should the port have moved),
		// still authenticates and reads what it wrote.
		if c.Port != running.Clusters[boundCluster].Port {
			t.Logf("the instance's cluster moved from port %d to %d", running.Clusters[boundCluster].Port, c.Port)
			kubeconfig = rewriteHost(t, kubeconfig, c.Port)
		}
		bc := bindingClient(t, kubeconfig)
		waitForWithin(t, provisionTimeout, "the binding's kubeconfig to read the namespace it created before the stop", func(ctx context.Context) (bool, error) {
			err := bc.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
			last = fmt.Sprint(err)
			return err == nil, nil
		}, func() string { return last })
	})
}

// bindingClient returns a client with a binding's kubeconfig.
func bindingClient(t *testing.T, kubeconfig []byte) client.Client {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	must(t, err)
	c, err := client.New(cfg, client.Options{})
	must(t, err)
	return c
}

// instanceObjects are what an instance and a binding of the
// dedicated-cluster plan are made of, by UID.
type instanceObjects struct {
	instance, binding, clusterRequest, accessRequest, cluster string
}

// objectsOf returns the objects of instance and binding, failing t unless
// each is there and Ready.
func objectsOf(t *testing.T, platform, onboarding client.Client, instance, binding string) instanceObjects {
	t.Helper()
	o, err := tryObjectsOf(t.Context(), platform, onboarding, instance, binding)
	must(t, err)
	return o
}

// tryObjectsOf returns the objects of instance and binding, or an error
// saying which is missing or not Ready: the SFServiceInstance and
// SFServiceBinding on the onboarding cluster (succeeded), the
// ClusterRequest and AccessRequest on the platform cluster (Granted), and
// the provisioned Cluster (Ready).
func tryObjectsOf(ctx context.Context, platform, onboarding client.Client, instance, binding string) (instanceObjects, error) {
	var o instanceObjects
	si := &osbv1alpha1.SFServiceInstance{}
	if err := onboarding.Get(ctx, sf.InstanceKey(instance), si); err != nil {
		return o, fmt.Errorf("SFServiceInstance %s: %w", instance, err)
	}
	if si.Status.State != osbv1alpha1.StateSucceeded {
		return o, fmt.Errorf("SFServiceInstance %s: state %q, want succeeded", instance, si.Status.State)
	}
	sb := &osbv1alpha1.SFServiceBinding{}
	if err := onboarding.Get(ctx, sf.BindingKey(instance, binding), sb); err != nil {
		return o, fmt.Errorf("SFServiceBinding %s: %w", binding, err)
	}
	if sb.Status.State != osbv1alpha1.StateSucceeded {
		return o, fmt.Errorf("SFServiceBinding %s: state %q, want succeeded", binding, sb.Status.State)
	}
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := platform.Get(ctx, client.ObjectKey{Namespace: stack.DedicatedClustersNamespace, Name: instance}, cr); err != nil {
		return o, fmt.Errorf("ClusterRequest %s: %w", instance, err)
	}
	if !cr.Status.IsGranted() || cr.Status.Cluster == nil {
		return o, fmt.Errorf("ClusterRequest %s: %+v, want Granted", instance, cr.Status)
	}
	ar := &clustersv1alpha1.AccessRequest{}
	if err := platform.Get(ctx, client.ObjectKey{Namespace: stack.DedicatedClustersNamespace, Name: instance + "." + binding}, ar); err != nil {
		return o, fmt.Errorf("AccessRequest %s.%s: %w", instance, binding, err)
	}
	if !ar.Status.IsGranted() {
		return o, fmt.Errorf("AccessRequest %s: %+v, want Granted", ar.Name, ar.Status)
	}
	cl := &clustersv1alpha1.Cluster{}
	if err := platform.Get(ctx, cr.Status.Cluster.NamespacedName(), cl); err != nil {
		return o, fmt.Errorf("Cluster %s: %w", cr.Status.Cluster.Name, err)
	}
	if !apimeta.IsStatusConditionTrue(cl.Status.Conditions, common.ConditionTypeReady) {
		return o, fmt.Errorf("Cluster %s: conditions %+v, want Ready", cl.Name, cl.Status.Conditions)
	}
	return instanceObjects{string(si.UID), string(sb.UID), string(cr.UID), string(ar.UID), string(cl.UID)}, nil
}

// sameObjects says which objects were made anew (another UID), or "".
func sameObjects(before, after instanceObjects) string {
	var diffs []string
	for _, d := range []struct{ what, b, a string }{
		{"SFServiceInstance", before.instance, after.instance},
		{"SFServiceBinding", before.binding, after.binding},
		{"ClusterRequest", before.clusterRequest, after.clusterRequest},
		{"AccessRequest", before.accessRequest, after.accessRequest},
		{"Cluster", before.cluster, after.cluster},
	} {
		if d.b != d.a {
			diffs = append(diffs, fmt.Sprintf("%s has UID %s, before the stop %s", d.what, d.a, d.b))
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

// missingFrom returns the names of the processes of want that tree lacks.
func missingFrom(tree, want []*controlplane.Process) string {
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(tree, func(p *controlplane.Process) bool { return p.PID == w.PID && p.StartTime == w.StartTime }) {
			missing = append(missing, w.Name)
		}
	}
	return strings.Join(missing, ", ")
}

// names lists processes as name/pid.
func names(ps []*controlplane.Process) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name+"/"+strconv.Itoa(p.PID))
	}
	return strings.Join(out, " ")
}
