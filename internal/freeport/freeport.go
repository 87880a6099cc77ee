// Package freeport picks TCP ports for processes that are told a port
// rather than choosing one themselves. A port found with a listener on
// port 0 comes from the kernel's ephemeral range, the same range every
// other ":0" listener and every outgoing connection is given ports from;
// between the moment it is found free and the moment the process binds it,
// one of those can take it ("address already in use"). Pick chooses below
// that range instead, where only programs that name a port get one.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// floor is the lowest port Pick chooses: above the well-known and most
// registered service ports.
const floor = 10000

// rangeFile holds the kernel's ephemeral port range, "low high".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// attempts bounds the random tries of Pick.
const attempts = 200

// Pick returns a port that host (an IP address, or "" for all interfaces)
// can listen on now, below the kernel's ephemeral range, for which skip
// (may be nil) returns false. Where the range cannot be read, or leaves no
// room below it, it falls back to a port the kernel chooses.
func Pick(host string, skip func(int) bool) (int, error) {
	return pick(host, ephemeralLow(), skip, rand.IntN)
}

// pick is Pick with the range's low end and the random source given.
func pick(host string, low int, skip func(int) bool, intN func(int) int) (int, error) {
	if low-floor < 1000 {
		return kernelPort(host, skip)
	}
	for range attempts {
		p := floor + intN(low-floor)
		if skip != nil && skip(p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("close the probe of port %d: %w", p, err)
		}
		return p, nil
	}
	return 0, fmt.Errorf("no free port between %d and %d after %d tries", floor, low, attempts)
}

// ephemeralLow returns the lowest port of the kernel's ephemeral range, or
// 0 when it is not known.
func ephemeralLow() int {
	raw, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}

// kernelPort returns a port the kernel chooses as free and skip does not
// refuse. The listeners stay open until the search ends, so that the
// kernel does not offer the same port twice in one search.
func kernelPort(host string, skip func(int) bool) (port int, err error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			if cerr := l.Close(); cerr != nil && err == nil {
				port, err = 0, fmt.Errorf("close a probe: %w", cerr)
			}
		}
	}()
	for range attempts {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, l)
		if p := l.Addr().(*net.TCPAddr).Port; skip == nil || !skip(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port after %d tries", attempts)
}
