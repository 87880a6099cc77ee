package install

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marketplane/marketplane/internal/freeport"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/supervisor"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Environment of in-cluster clients: rest.InClusterConfig reads the API
// server's address from these.
const (
	envServiceHost = "KUBERNETES_SERVICE_HOST"
	envServicePort = "KUBERNETES_SERVICE_PORT"
)

// podCredentials are the service-account files of a pod, as host files the
// process sees in the pod's place.
type podCredentials struct {
	// Namespace is the pod's namespace (the namespace file).
	Namespace string
	// TokenFile and CAFile are host paths of the token and the API
	// server's CA; empty: the process gets no such file.
	TokenFile, CAFile string
}

// writeCredentials writes token and the cluster's CA into dir and returns
// them as the credentials of a pod in namespace.
func writeCredentials(t *testing.T, c *testenv.Cluster, dir, namespace, token string) podCredentials {
	t.Helper()
	creds := podCredentials{Namespace: namespace, TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(creds.TokenFile, []byte(token), 0o600); err != nil {
		t.Fatalf("write token: %v", err)
	}
	if err := os.WriteFile(creds.CAFile, c.Config.CAData, 0o600); err != nil {
		t.Fatalf("write CA: %v", err)
	}
	return creds
}

// inClusterEnv returns KUBERNETES_SERVICE_HOST and _PORT of the cluster's
// API server, as a pod sees the kubernetes Service.
func inClusterEnv(t *testing.T, c *testenv.Cluster) []string {
	t.Helper()
	u, err := url.Parse(c.Config.Host)
	if err != nil || u.Scheme != "https" || u.Port() == "" {
		t.Fatalf("API server address %q: want https://host:port (%v)", c.Config.Host, err)
	}
	return []string{envServiceHost + "=" + u.Hostname(), envServicePort + "=" + u.Port()}
}

// podProcess is a binary running as a pod's container would.
type podProcess struct {
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan struct{}
	err  error // the exit status, once done is closed
}

// startPodProcess starts binary with args and env (and nothing else of the
// test's environment) in a private mount namespace with creds where a pod
// has its service-account files. Its output goes to out. It skips the test
// when the system refuses a mount namespace, and stops the process when the
// test ends.
func startPodProcess(t *testing.T, binary string, args, env []string, creds podCredentials, out *testenv.SyncBuffer) *podProcess {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	files := process.PodFiles{Namespace: creds.Namespace, Token: creds.TokenFile, CA: creds.CAFile}
	if err := process.WithPodFiles(t.Context(), cmd, files); err != nil {
		if errors.Is(err, process.ErrNoMountNamespace) {
			t.Skipf("cannot give the process a pod's service-account files: %v", err)
		}
		t.Fatal(err)
	}
	// A crashed test binary must not leave the operator running
	// (StartCmd: Pdeathsig from a thread that lasts).
	if err := supervisor.StartCmd(cmd); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	p := &podProcess{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends the process with SIGTERM, as the kubelet would, and kills it
// when it has not exited after a grace period.
func (p *podProcess) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30s of SIGTERM; killing it", p.cmd.Args[0])
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has ended, and its error.
func (p *podProcess) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// runPodProcess runs binary to completion as startPodProcess starts it and
// returns its error; it fails the test when it takes more than timeout.
func runPodProcess(t *testing.T, binary string, args, env []string, creds podCredentials, out *testenv.SyncBuffer, timeout time.Duration) error {
	t.Helper()
	p := startPodProcess(t, binary, args, env, creds, out)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s %s did not finish within %s; output ends:\n%s", binary, strings.Join(args, " "), timeout, tail(out.String(), 3000))
		return nil
	}
}

// freePort returns a port that is free on every interface now, for a flag
// that takes an address and a process whose chosen port the test cannot
// read back. It is below the kernel's ephemeral range (internal/freeport),
// so no ":0" listener or outgoing connection of another test can take it
// before the process binds it.
func freePort(t *testing.T) string {
	t.Helper()
	p, err := freeport.Pick("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
