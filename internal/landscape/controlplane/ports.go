package controlplane

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/marketplane/marketplane/internal/freeport"
)

// ErrPortInUse is wrapped by CheckPortFree's error.
var ErrPortInUse = errors.New("port in use")

// FreePort returns a loopback port that nothing listens on right now,
// below the kernel's ephemeral range (internal/freeport): between now and
// the moment the landscape's process binds it, no other program's ":0"
// listener or outgoing connection can be given it.
func FreePort() (int, error) {
	p, err := freeport.Pick("127.0.0.1", nil)
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	return p, nil
}

// FreePorts returns n distinct free loopback ports, as FreePort does.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		p, err := freeport.Pick("127.0.0.1", func(p int) bool { return slices.Contains(ports, p) })
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// CheckPortFree returns an error wrapping ErrPortInUse and naming the port
// and its use when something listens on the loopback port.
func CheckPortFree(port int, use string) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%w: 127.0.0.1:%d (recorded for the %s) is taken by another process: stop that process, or run 'marketplane landscape down' to start afresh on new ports",
			ErrPortInUse, port, use)
	}
	return l.Close()
}

// PortMove is a recorded port that was taken by another process when a
// landscape resumed, and the port it uses instead.
type PortMove struct {
	// Use says what the port is for, e.g. "kube-apiserver of cluster
	// platform".
	Use string
	// From is the recorded port, To the new one.
	From, To int
}

// String describes the move for a progress line.
func (m PortMove) String() string {
	return fmt.Sprintf("127.0.0.1:%d (recorded for the %s) is taken by another process; using 127.0.0.1:%d instead", m.From, m.Use, m.To)
}

// MoveTakenPorts gives every recorded port of s that something listens on
// now a new free loopback port, and returns the moves. A cluster that moves
// keeps its service-account issuer (the URL of its first port), so tokens
// issued before stay valid; its kubeconfigs name the new port once the
// cluster starts again (StartCluster writes them). Resuming must not depend
// on ports staying free while a landscape is stopped: on a busy machine
// any program, or an outgoing connection, may take one in the meantime.
//
// A port can still be taken between this check and the start of its
// process; that start then fails with "address already in use", and the
// next resume moves it.
func MoveTakenPorts(s *State) ([]PortMove, error) {
	taken := s.Ports()
	newPort := func() (int, error) {
		for {
			p, err := FreePort()
			if err != nil {
				return 0, err
			}
			if _, recorded := taken[p]; !recorded {
				taken[p] = "moved"
				return p, nil
			}
		}
	}
	var moves []PortMove
	move := func(port *int, use string) error {
		if *port == 0 || CheckPortFree(*port, use) == nil {
			return nil
		}
		to, err := newPort()
		if err != nil {
			return fmt.Errorf("move %s: %w", use, err)
		}
		moves = append(moves, PortMove{Use: use, From: *port, To: to})
		*port = to
		return nil
	}
	if err := move(&s.Etcd.ClientPort, "etcd client port"); err != nil {
		return nil, err
	}
	if err := move(&s.Etcd.PeerPort, "etcd peer port"); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(s.Clusters)) {
		c := s.Clusters[name]
		old := c.Port
		if err := move(&c.Port, "kube-apiserver of cluster "+c.Name); err != nil {
			return nil, err
		}
		if c.Port != old && c.ServiceAccountIssuer == "" {
			c.ServiceAccountIssuer = apiServerURL(old)
		}
	}
	return moves, nil
}

// apiServerURL is the URL of an API server on a loopback port.
func apiServerURL(port int) string { return "https://127.0.0.1:" + strconv.Itoa(port) }
