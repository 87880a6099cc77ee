package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/marketplane/marketplane/pkg/supervisor"
)

// KCPBinary is the name of kcp's binary in BinaryDir, built by `make tools`.
const KCPBinary = "kcp"

// KCPReadyTimeout bounds how long NewKCP waits for /readyz: kcp answers
// after about 30 s on an idle 2-core machine and took 79 s at load average
// 14, though its start costs only about 16 CPU-seconds (its start-up steps
// wait on one another, not on the CPU).
const KCPReadyTimeout = 6 * time.Minute

// kcpStartAttempts bounds the starts NewKCP tries: a port found free can
// be taken by another process before kcp binds it.
const kcpStartAttempts = 3

// KCP is a kcp server (github.com/kcp-dev/kcp) started for a test: one
// process serving many logical clusters ("workspaces").
type KCP struct {
	// Dir is kcp's root directory (its embedded etcd's data, certificates
	// and admin.kubeconfig); Stop removes it.
	Dir string
	// KubeconfigPath is kcp's admin kubeconfig, whose context points at
	// the root workspace.
	KubeconfigPath string
	// Config is an admin REST config of the root workspace (server
	// URL+"/clusters/root").
	Config *rest.Config
	// URL is the server's base URL, https://127.0.0.1:<port>.
	URL string

	cmd  *exec.Cmd
	log  *tailWriter
	done chan struct{}
}

// StartKCP starts kcp for a test and stops it when the test ends. It fails
// the test when kcp cannot start, and skips it under -short.
func StartKCP(t testing.TB) *KCP {
	t.Helper()
	SkipIfShort(t)
	k, err := NewKCP()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("testenv: stop kcp: %v", err)
		}
	})
	return k
}

// NewKCP starts bin/kcp on loopback ports it chooses, waits until /readyz
// answers ok and returns it. The caller must call Stop.
func NewKCP() (*KCP, error) {
	dir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, KCPBinary)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kcp binary: %w: run 'make tools' (builds bin/kcp from source)", err)
	}
	var errs []error
	for range kcpStartAttempts {
		k, err := startKCP(bin)
		if err == nil {
			return k, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errKCPExited) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// errKCPExited marks a kcp that exited before it was ready, which a new
// start with other ports may cure.
var errKCPExited = errors.New("kcp exited before it was ready")

func startKCP(bin string) (*KCP, error) {
	ports, err := loopbackPorts(3)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "marketplane-kcp-")
	if err != nil {
		return nil, fmt.Errorf("kcp directory: %w", err)
	}
	k := &KCP{
		Dir:            root,
		KubeconfigPath: filepath.Join(root, "admin.kubeconfig"),
		URL:            "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		log:            &tailWriter{max: 16 << 10},
		done:           make(chan struct{}),
	}
	k.cmd = exec.Command(bin, KCPArgs(root, ports[0], ports[1], ports[2])...)
	k.cmd.Dir = root
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log

	// No start slot (pkg/startslot): kcp would hold one for its whole
	// start, which waits more than it computes.
	ctx, cancel := context.WithTimeout(context.Background(), KCPReadyTimeout)
	defer cancel()
	// StartCmd: its own process group, and (on Linux) killed with a test
	// binary that crashes, forked from a thread that lasts.
	if err := supervisor.StartCmd(k.cmd); err != nil {
		return nil, errors.Join(fmt.Errorf("start kcp: %w", err), os.RemoveAll(root))
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	if err := k.waitReady(ctx); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.KubeconfigPath)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("kcp admin kubeconfig: %w", err), k.Stop())
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	k.Config = cfg
	return k, nil
}

// KCPArgs are the arguments of `kcp start` for a server rooted at dir on
// loopback, with its API on port and its embedded etcd on etcdClient and
// etcdPeer (kcp's defaults, 6443, 2379 and 2380, would clash with other
// servers on the machine).
func KCPArgs(dir string, port, etcdClient, etcdPeer int) []string {
	return []string{
		"start",
		"--root-directory=" + dir,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--embedded-etcd-client-port=" + strconv.Itoa(etcdClient),
		"--embedded-etcd-peer-port=" + strconv.Itoa(etcdPeer),
	}
}

// waitReady polls /readyz until it answers 200, kcp exits or ctx ends. The
// admin kubeconfig exists from early on; /readyz is what says the server
// and its controllers have started.
func (k *KCP) waitReady(ctx context.Context) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-k.done:
			return fmt.Errorf("%w (%s); its last output:\n%s", errKCPExited, k.cmd.ProcessState, k.log)
		case <-ctx.Done():
			return fmt.Errorf("kcp at %s not ready after %s (last: %w); its last output:\n%s", k.URL, KCPReadyTimeout, last, k.log)
		case <-tick.C:
		}
		if last = k.readyz(ctx); last == nil {
			return nil
		}
	}
}

// readyz asks /readyz once with the admin credentials.
func (k *KCP) readyz(ctx context.Context) error {
	if _, err := os.Stat(k.KubeconfigPath); err != nil {
		return fmt.Errorf("no admin kubeconfig yet: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("client of the admin kubeconfig: %w", err)
	}
	hc.Timeout = 5 * time.Second
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL+"/readyz", nil)
	if err != nil {
		return fmt.Errorf("readyz request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	return nil
}

// WorkspaceConfig returns the admin config for the logical cluster at path,
// such as "root:ws1": the same credentials, the server URL+"/clusters/"+path.
func (k *KCP) WorkspaceConfig(path string) *rest.Config {
	cfg := rest.CopyConfig(k.Config)
	cfg.Host = k.URL + "/clusters/" + path
	return cfg
}

// Log returns the tail of kcp's output.
func (k *KCP) Log() string { return k.log.String() }

// Stop ends kcp (SIGTERM, then SIGKILL after 20 s) and removes its
// directory.
func (k *KCP) Stop() error {
	if k.cmd != nil && k.cmd.Process != nil {
		select {
		case <-k.done:
		default:
			_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-k.done:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
				<-k.done
			}
		}
	}
	k.log.stop()
	if err := os.RemoveAll(k.Dir); err != nil {
		return fmt.Errorf("remove kcp directory: %w", err)
	}
	return nil
}

// loopbackPorts returns n distinct TCP ports that were free on 127.0.0.1:
// the listeners are held until all are found, so no two are the same.
func loopbackPorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
