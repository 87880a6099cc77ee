package testenv

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// holdPort listens on a loopback port until the test ends and returns it.
func holdPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// takePort makes s serve on the loopback port.
func takePort(s *envtest.APIServer, port int) {
	s.Address, s.Port = "127.0.0.1", strconv.Itoa(port)
}

// setConfigureAttempt sets the package's start hook for one test.
func setConfigureAttempt(t *testing.T, f func(int, *envtest.APIServer)) {
	t.Helper()
	configureAttempt = f
	t.Cleanup(func() { configureAttempt = nil })
}

// TestStartRetriesOnFreshPorts makes the first start attempt's API server
// port one that is taken, as another process may take it between envtest's
// choice and the API server's bind: envtest's own retries keep the taken
// port and all fail; New starts again on a newly picked one.
func TestStartRetriesOnFreshPorts(t *testing.T) {
	SkipIfShort(t)
	taken := holdPort(t)
	var attempts []int
	setConfigureAttempt(t, func(attempt int, s *envtest.APIServer) {
		attempts = append(attempts, attempt)
		if attempt == 1 {
			takePort(s, taken)
		}
	})
	c := Start(t, WithName("retry"))
	if len(attempts) != 2 {
		t.Errorf("start attempts %v; want [1 2]: the first on the taken port, the second on a fresh one", attempts)
	}
	if got := c.Config.Host; strings.HasSuffix(got, ":"+strconv.Itoa(taken)) {
		t.Errorf("the cluster serves on %s, the taken port", got)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		t.Fatalf("the started API server does not answer: %v", err)
	}
}

// TestStartReportsAPIServerOutput takes the port of every attempt: New
// fails, and the error says why in the API server's own words.
func TestStartReportsAPIServerOutput(t *testing.T) {
	SkipIfShort(t)
	taken := holdPort(t)
	setConfigureAttempt(t, func(_ int, s *envtest.APIServer) { takePort(s, taken) })
	c, err := New(WithName("taken"))
	if err == nil {
		_ = c.Stop()
		t.Fatal("New started an API server on a taken port")
	}
	msg := err.Error()
	for _, want := range []string{`"taken"`, "attempt 1", "attempt 3", "address already in use"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}
