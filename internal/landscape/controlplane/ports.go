package controlplane

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// ErrPortInUse is wrapped by CheckPortFree's error.
var ErrPortInUse = errors.New("port in use")

// FreePort returns a loopback port that nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(n int) ([]int, error) {
	// Holding every listener until all are found keeps them distinct.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
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
