package process

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/marketplane/marketplane/internal/freeport"
)

// Listen flags: the bind-address flags of the kubebuilder layout that
// openMCP providers and Marketplane's own providers (pkg/providerapp) use.
// In a cluster every pod has its own network namespace, so every replica
// of every provider can keep the default ports; local processes share the
// loopback interface, so the process deployer gives each run process free
// ports of its own.
const (
	// metricsFlag is passed by the contract when metrics are on
	// (--metrics-bind-address=:<port>); the process deployer passes
	// --metrics-bind-address=0 when they are off.
	metricsFlag = "--metrics-bind-address"
	// healthProbeFlag is added to every run process unless its command
	// line sets it already: kubebuilder providers listen on :8081 by
	// default, so the second local provider would fail with "address
	// already in use".
	healthProbeFlag = "--health-probe-bind-address"
	// pprofFlag is off by default in the kubebuilder layout and only
	// rewritten when the provider's spec passes it (in runCommand), since
	// a binary that does not define a flag exits with "unknown flag".
	pprofFlag = "--pprof-bind-address"
)

// listenFlags are the flags whose address the deployer assigns, with the
// word used for them in logs and status messages.
var listenFlags = []struct{ flag, what string }{
	{metricsFlag, "metrics"},
	{healthProbeFlag, "health probe"},
	{pprofFlag, "pprof"},
}

// loopbackHost is where run processes listen: a local process is not
// scraped or probed from other hosts, so it does not listen on their
// interfaces.
const loopbackHost = "127.0.0.1"

// endpoint is an address a run process was told to listen on.
type endpoint struct {
	// what names the endpoint ("metrics", "health probe", "pprof").
	what string
	addr string
}

func (e endpoint) String() string { return e.what + " " + e.addr }

// flagValue returns the name and value of a flag argument in the forms
// "--name=value" and "-name=value" (the Go flag package accepts both), or
// the name alone for "--name" and "-name", whose value is the next
// argument.
func flagValue(arg string) (name, value string, hasValue bool) {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
		return "", "", false
	}
	name, value, hasValue = strings.Cut(arg, "=")
	if !strings.HasPrefix(name, "--") {
		name = "-" + name // "-name" is the same flag as "--name"
	}
	return name, value, hasValue
}

// hasFlag reports whether args set flag, in any form.
func hasFlag(args []string, flag string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		name, _, _ := flagValue(a)
		return name == flag
	})
}

// assignListenAddresses returns args with the address of every listen flag
// that has the form host:port replaced by 127.0.0.1:<port>, port taken
// from free (one per flag, shared by repeated occurrences), and the
// endpoints it assigned, in the order of listenFlags. Values that are not
// host:port, such as "0" or "" (off), are left alone. The host is always
// loopback: a provider that asks for all interfaces (":8081") or a
// specific one would, as a local process, listen on the host's interfaces.
func assignListenAddresses(args []string, free func() (int, error)) ([]string, []endpoint, error) {
	out := slices.Clone(args)
	addrs := map[string]string{}
	rewrite := func(flag, value string) (string, error) {
		if _, _, err := net.SplitHostPort(value); err != nil {
			// Not host:port (e.g. "0" to disable): leave it.
			return value, nil
		}
		if a, ok := addrs[flag]; ok {
			return a, nil
		}
		port, err := free()
		if err != nil {
			return "", fmt.Errorf("free port for %s: %w", flag, err)
		}
		a := net.JoinHostPort(loopbackHost, strconv.Itoa(port))
		addrs[flag] = a
		return a, nil
	}
	isListen := func(name string) bool {
		return slices.ContainsFunc(listenFlags, func(f struct{ flag, what string }) bool { return f.flag == name })
	}
	for i := 0; i < len(out); i++ {
		name, value, hasValue := flagValue(out[i])
		if !isListen(name) {
			continue
		}
		if !hasValue {
			if i+1 == len(out) {
				break // a flag without value: the provider will say so
			}
			i++
			a, err := rewrite(name, out[i])
			if err != nil {
				return nil, nil, err
			}
			out[i] = a
			continue
		}
		a, err := rewrite(name, value)
		if err != nil {
			return nil, nil, err
		}
		prefix, _, _ := strings.Cut(out[i], "=")
		out[i] = prefix + "=" + a
	}
	var eps []endpoint
	for _, f := range listenFlags {
		if a, ok := addrs[f.flag]; ok {
			eps = append(eps, endpoint{what: f.what, addr: a})
		}
	}
	return out, eps, nil
}

// portPool hands out free loopback ports and remembers those it handed
// out until they are released, so that two processes starting at the same
// time never get the same port. The ports lie below the kernel's ephemeral
// range (internal/freeport): a port the kernel chose as free could be given
// to another program's ":0" listener or outgoing connection before the
// process binds it, which made run processes exit with "address already in
// use" on busy machines.
type portPool struct {
	mu    sync.Mutex
	taken map[int]bool
}

// get returns a free port on loopback, not handed out before and not
// released since.
func (p *portPool) get() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taken == nil {
		p.taken = map[int]bool{}
	}
	port, err := freeport.Pick(loopbackHost, func(port int) bool { return p.taken[port] })
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", loopbackHost, err)
	}
	p.taken[port] = true
	return port, nil
}

// release returns the ports of eps to the pool, once the process that was
// told to listen on them has exited.
func (p *portPool) release(eps []endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range eps {
		if _, port, err := net.SplitHostPort(e.addr); err == nil {
			n, _ := strconv.Atoi(port)
			delete(p.taken, n)
		}
	}
}

// describeEndpoints says where a run process listens, for a status message
// or a log: "metrics 127.0.0.1:40001, health probe 127.0.0.1:40002".
func describeEndpoints(eps []endpoint) string {
	s := make([]string, len(eps))
	for i, e := range eps {
		s[i] = e.String()
	}
	return strings.Join(s, ", ")
}
