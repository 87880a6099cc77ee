package landscape_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/stack"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestSupervision runs the whole landscape (providers, catalog, broker) and
// kills its processes with SIGKILL one after the other: etcd, the
// onboarding cluster's kube-apiserver, the broker, the operator replica
// that leads. After each, with no step of the test's, the landscape must
// heal by itself: the killed process runs again (on the same port, with
// the same data), the API servers answer and still have an object created
// before the kills, the broker serves its catalog, state.json and status
// count the restart, and the landscape did not stop. After the operator's
// leader, the other replica holds the lease and an instance ordered through
// the broker is provisioned (the providers died with the leader and the new
// one started them).
func TestSupervision(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	ctx := t.Context()
	l, out, dir := startStack(t)
	failed := make(chan error, 1)
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go func() { failed <- l.Wait(waitCtx) }()

	var broker stack.BrokerInfo
	raw, err := os.ReadFile(filepath.Join(dir, stack.BrokerCredentialsFile))
	must(t, err)
	must(t, json.Unmarshal(raw, &broker))
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created-before-the-kills", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	must(t, l.Onboarding.Client.Create(ctx, before))
	ports := l.State()

	// The operator replica that leads: killing it must hand the lease
	// to the other, which starts the providers again (they died with
	// the leader).
	leader, lease := operatorLeader(t, l)
	// The landscape's patient lease, not the operator's 10 s: a loaded
	// machine must not make the leader give up (and its providers die).
	if got, want := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0), int32(landscape.DefaultOperatorLease/time.Second); got != want {
		t.Errorf("the operator's Lease lasts %d s, want the landscape's %d s", got, want)
	}
	kills := []struct {
		name string
		// record returns the process's record in a state.
		record func(*controlplane.State) *controlplane.Process
		// healed, when set, is what else must work again after the
		// kill.
		healed func(ctx context.Context) error
	}{
		{"etcd", func(s *controlplane.State) *controlplane.Process { return s.Etcd.Process }, nil},
		{"kube-apiserver-" + landscape.ClusterOnboarding, func(s *controlplane.State) *controlplane.Process {
			return s.Clusters[landscape.ClusterOnboarding].APIServer
		}, nil},
		{"broker", func(s *controlplane.State) *controlplane.Process { return s.Processes["broker"] }, nil},
		{"console", func(s *controlplane.State) *controlplane.Process { return s.Processes["console"] }, func(ctx context.Context) error {
			// The web console serves its sign-in page again, on its
			// recorded URL.
			url := l.State().Endpoints["console"]
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/login", nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("the console at %q: %w", url, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the console's sign-in page: %s", resp.Status)
			}
			return nil
		}},
		{leader, func(s *controlplane.State) *controlplane.Process { return s.Processes[leader] }, func(ctx context.Context) error {
			now := &coordinationv1.Lease{}
			if err := l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(lease), now); err != nil {
				return fmt.Errorf("the operator's lease: %w", err)
			}
			if ptr.Deref(now.Spec.HolderIdentity, "") == ptr.Deref(lease.Spec.HolderIdentity, "") {
				return fmt.Errorf("the operator's lease is still held by the killed leader %s", ptr.Deref(now.Spec.HolderIdentity, ""))
			}
			// Either replica may win the lease: the other one, or the
			// killed one started again (a new process, a new identity).
			if landscape.OperatorLeader(l.State()) == "" {
				return errors.New("no running operator replica logged that it acquired the lease")
			}
			// The inter-operator and the broker work again: an
			// instance ordered now is provisioned.
			return provisionThroughBroker(ctx, broker, "after-operator-kill")
		}},
	}
	for _, k := range kills {
		ok := t.Run("kill -9 "+k.name, func(t *testing.T) {
			killed := k.record(l.State())
			if killed == nil || !controlplane.Alive(killed) || killed.Restarts != 0 {
				t.Fatalf("record of %s before the kill: %+v; want a running process never restarted", k.name, killed)
			}
			must(t, syscall.Kill(killed.PID, syscall.SIGKILL))
			begin := time.Now()
			var last string
			// As long as a start may take: the killed process starts
			// again as at the landscape's start, on a loaded machine.
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
				rec := k.record(l.State())
				switch {
				case rec == nil || rec.PID == killed.PID || !controlplane.Alive(rec):
					last = fmt.Sprintf("%s not running again: %+v", k.name, rec)
					return false, nil
				case rec.Restarts != 1 || rec.LastExit != "ended (signal: killed)" || rec.LastExitAt == nil:
					return false, fmt.Errorf("record of the restarted %s: %+v; want 1 restart after SIGKILL", k.name, rec)
				}
				if err := healthy(ctx, l, broker, before); err != nil {
					last = err.Error()
					return false, nil
				}
				if k.healed != nil {
					if err := k.healed(ctx); err != nil {
						last = err.Error()
						return false, nil
					}
				}
				return true, nil
			})
			if err != nil {
				t.Fatalf("%s restarted and the landscape healthy again: %v; last seen: %s\nprogress:\n%s", k.name, err, last, out.String())
			}
			t.Logf("kill -9 %s: healthy again after %s", k.name, time.Since(begin).Round(10*time.Millisecond))

			st, err := landscape.ReadStatus(dir)
			must(t, err)
			var status bytes.Buffer
			st.Print(ctx, &status, false)
			if want := k.name + ": 1 restart, last exit: ended (signal: killed)"; !strings.Contains(status.String(), want) {
				t.Errorf("status lacks %q:\n%s", want, status.String())
			}
			if want := "restarted " + k.name; !strings.Contains(out.String(), want) {
				t.Errorf("progress lacks %q:\n%s", want, out.String())
			}
		})
		if !ok {
			t.FailNow() // the next kill would only fail the same way
		}
	}

	t.Run("the other processes were not restarted, nothing moved, the landscape never failed", func(t *testing.T) {
		now := l.State()
		for _, p := range now.RecordedProcesses() {
			killed := false
			for _, k := range kills {
				killed = killed || k.name == p.Name
			}
			if !killed && (p.Restarts != 0 || p.LastExit != "") {
				// The API servers ride out etcd's restart: their etcd
				// client reconnects; they need no restart.
				t.Errorf("%s was restarted (%d, last exit %q) though only %d processes were killed", p.Name, p.Restarts, p.LastExit, len(kills))
			}
		}
		if now.Etcd.ClientPort != ports.Etcd.ClientPort || now.Clusters[landscape.ClusterOnboarding].Port != ports.Clusters[landscape.ClusterOnboarding].Port {
			t.Errorf("ports moved: etcd %d -> %d, onboarding %d -> %d", ports.Etcd.ClientPort, now.Etcd.ClientPort,
				ports.Clusters[landscape.ClusterOnboarding].Port, now.Clusters[landscape.ClusterOnboarding].Port)
		}
		select {
		case err := <-failed:
			t.Errorf("the landscape failed: %v", err)
		default:
		}
	})
}

// operatorLeader waits until one operator replica has acquired the
// leader-election lease and returns its process name and the Lease.
func operatorLeader(t *testing.T, l *landscape.Landscape) (string, *coordinationv1.Lease) {
	t.Helper()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: landscape.Namespace, Name: "marketplane-operator-" + landscape.OperatorProviderName}}
	var leader, last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		if err := l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
			last = err.Error()
			return false, nil
		}
		if leader = landscape.OperatorLeader(l.State()); leader == "" {
			last = "no operator replica logged that it acquired the lease"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the operator's leader: %v; last seen: %s", err, last)
	}
	return leader, lease
}

// provisionThroughBroker orders the sample catalog's small plan as instance
// id through the broker and returns nil once it is provisioned: PUT (again,
// which the broker answers idempotently) until the answer is 200 or 201, or
// last_operation says succeeded.
func provisionThroughBroker(ctx context.Context, broker stack.BrokerInfo, id string) error {
	const service, plan = "3c8ac0a4-4e0b-4bb4-9a31-5d2f0e6b7a10", "8f0c6f36-2b71-4c65-8a7e-2a4f7c1d9b20"
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org","space_guid":"space"}`, service, plan)
	status, answer, err := brokerCall(ctx, broker, http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true", body)
	switch {
	case err != nil:
		return err
	case status == http.StatusOK || status == http.StatusCreated:
		return nil
	case status != http.StatusAccepted:
		return fmt.Errorf("broker: PUT instance %s: %d %s", id, status, answer)
	}
	status, answer, err = brokerCall(ctx, broker, http.MethodGet, "/v2/service_instances/"+id+"/last_operation", "")
	if err != nil {
		return err
	}
	var op struct {
		State string `json:"state"`
	}
	if status != http.StatusOK || json.Unmarshal(answer, &op) != nil || op.State != "succeeded" {
		return fmt.Errorf("broker: last_operation of instance %s: %d %s", id, status, answer)
	}
	return nil
}

// brokerCall sends one OSB request to the broker.
func brokerCall(ctx context.Context, broker stack.BrokerInfo, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, broker.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(broker.Username, broker.Password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("broker: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, answer, err
}

// healthy returns nil when every API server of l answers, the onboarding
// cluster still has before, and the broker serves a catalog.
func healthy(ctx context.Context, l *landscape.Landscape, broker stack.BrokerInfo, before *corev1.ConfigMap) error {
	for _, c := range []*landscape.Cluster{l.Platform, l.Onboarding, l.Workload} {
		if err := c.Client.List(ctx, &corev1.NamespaceList{}); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	got := &corev1.ConfigMap{}
	if err := l.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(before), got); err != nil {
		return fmt.Errorf("the ConfigMap created before: %w", err)
	}
	if got.UID != before.UID {
		return fmt.Errorf("the ConfigMap created before has UID %s, want %s", got.UID, before.UID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, broker.URL+"/v2/catalog", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(broker.Username, broker.Password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	defer resp.Body.Close()
	var catalog struct {
		Services []json.RawMessage `json:"services"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("broker: GET /v2/catalog: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&catalog); err != nil {
		return fmt.Errorf("broker: decode the catalog: %w", err)
	}
	if len(catalog.Services) == 0 {
		return errors.New("broker: an empty catalog; want the sample catalog")
	}
	return nil
}

// stackBinaries returns a directory with what the whole landscape runs:
// the broker, the inter-operator, the marketplace and the sample provider,
// built here once for the package's tests (`make test` builds only the
// control plane into bin/); links to the control plane's binaries and the
// operator requireBinaries prepared; and the test binary itself as
// `marketplane`, which TestMain turns into the CLI for the web console's
// process (`marketplane console`).
func stackBinaries(t *testing.T) string {
	t.Helper()
	requireBinaries(t)
	stackOnce.Do(func() {
		dir := filepath.Join(testBinDir, "stack")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		testenv.BuildBinaries(t, dir,
			"github.com/marketplane/marketplane/cmd/marketplane-broker",
			"github.com/marketplane/marketplane/cmd/marketplane-interoperator",
			"github.com/marketplane/marketplane/cmd/marketplane-marketplace",
			"github.com/marketplane/marketplane/providers/sample/cmd/sample")
		self, err := os.Executable()
		must(t, err)
		must(t, os.Symlink(self, filepath.Join(dir, "marketplane")))
		must(t, linkTools(testBinDir, dir))
		stackDir = dir
	})
	if stackDir == "" {
		t.Fatal("the stack's binaries could not be built (see the first test that asked for them)")
	}
	return stackDir
}

var (
	stackOnce sync.Once
	// stackDir is the directory stackBinaries prepared, under testBinDir
	// (which TestMain removes); empty until it is complete.
	stackDir string
)

// startStack starts the whole landscape (providers, catalog, broker) for a
// test, stops it when the test ends, and returns it with its progress
// output and its state directory.
func startStack(t *testing.T) (l *landscape.Landscape, out *testenv.SyncBuffer, stateDir string) {
	t.Helper()
	out = &testenv.SyncBuffer{}
	stateDir = filepath.Join(t.TempDir(), "state")
	l, err := landscape.New(landscape.Config{StateDir: stateDir, BinDir: stackBinaries(t), Out: out, StartTimeout: startTimeout, StopTimeout: 5 * time.Second})
	must(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	must(t, stack.Configure(l))
	begin := time.Now()
	must(t, l.Start(t.Context()))
	t.Logf("start-up of the whole landscape: %s", time.Since(begin).Round(10*time.Millisecond))
	return l, out, stateDir
}
