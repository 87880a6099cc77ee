package testenv

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to an address, and
// can cut them: while it is down, open connections are closed and new ones
// are closed as soon as they are accepted, as when the network to a server,
// or the server, fails. Tests use it to make an API server unreachable and
// reachable again without restarting it, so that its address, certificates
// and data stay the same. Stalled, it keeps connections open but passes
// nothing on, as a server too loaded to answer in time.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	// flowing is closed while bytes pass; Stall replaces it with an open
	// one, which Up or Down closes.
	flowing chan struct{}
	wg      sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port) on a free loopback port;
// it stops when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(p.flowing)
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.Down()
		p.wg.Wait()
	})
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Kubeconfig returns c's kubeconfig with the API server reached through p.
func (p *Proxy) Kubeconfig(c *Cluster) []byte {
	u, err := url.Parse(c.Config.Host)
	if err != nil || u.Host == "" {
		return c.Kubeconfig
	}
	return []byte(strings.ReplaceAll(string(c.Kubeconfig), "//"+u.Host, "//"+p.Addr()))
}

// Down cuts every open connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	p.flow()
}

// Stall holds every byte in either direction, on open connections and on
// new ones, until Up: requests through the proxy get no answer (nor
// refusal) and time out on the client.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default:
	}
}

// Up forwards new connections again, and what a stall held.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	p.flow()
}

// flow ends a stall. The caller holds p.mu.
func (p *Proxy) flow() {
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// gate returns a channel that is closed while bytes may pass.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flowing
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.conns[in] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(in) })
	}
}

func (p *Proxy) forward(in net.Conn) {
	defer p.forget(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = out.Close()
		return
	}
	p.conns[out] = struct{}{}
	p.mu.Unlock()
	defer p.forget(out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.copyUntilClosed(out, in)
	}()
	p.copyUntilClosed(in, out)
	<-done
}

// copyUntilClosed copies from src to dst, holding what it read while the
// proxy is stalled, until either side ends (a cut connection ends it with
// an error) and then closes both, so that the other direction ends too.
func (p *Proxy) copyUntilClosed(dst, src net.Conn) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
