// Package freeport picks TCP ports for processes that are told a port
// rather than choosing one themselves. A port found with a listener on
// port 0 comes from the kernel's ephemeral range, the same range every
// other ":0" listener and every outgoing connection is given ports from;
// between the moment it is found free and the moment the process binds it,
// one of those can take it ("address already in use"). Pick chooses below
// that range instead, where only programs that name a port get one, and
// reserves what it returns for a while, so that Pick in another process
// does not return it again before it is bound (a landscape binds its ports
// after its turn to start, minutes later on a loaded machine).
package freeport

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// floor is the lowest port Pick chooses: above the well-known and most
// registered service ports.
const floor = 10000

// rangeFile holds the kernel's ephemeral port range, "low high".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// attempts bounds the random tries of Pick.
const attempts = 200

// ReserveFor is how long a port Pick returned stays reserved: longer than
// a landscape waits to start (8 minutes under test).
const ReserveFor = 10 * time.Minute

// Pick returns a port that host (an IP address, or "" for all interfaces)
// can listen on now, below the kernel's ephemeral range, for which skip
// (may be nil) returns false, and that no Pick of this user returned in
// the last ReserveFor. Where the range cannot be read, or leaves no room
// below it, it falls back to a port the kernel chooses.
func Pick(host string, skip func(int) bool) (int, error) {
	r := reservations{dir: Dir(), ttl: ReserveFor, now: time.Now}
	return pick(host, ephemeralLow(), skip, rand.IntN, r.claim)
}

// Dir is the directory of the reservations: one file per port, shared by
// every process of the user.
func Dir() string {
	return filepath.Join(os.TempDir(), "marketplane-ports-"+strconv.Itoa(os.Getuid()))
}

// pick is Pick with the range's low end, the random source and the
// reservation (claim reports whether the port was free to reserve and is
// now reserved) given.
func pick(host string, low int, skip func(int) bool, intN func(int) int, claim func(int) bool) (int, error) {
	if low-floor < 1000 {
		return kernelPort(host, skip)
	}
	for range attempts {
		p := floor + intN(low-floor)
		if skip != nil && skip(p) || !claim(p) {
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

// reservations are files named after ports in dir; one younger than ttl
// reserves its port.
type reservations struct {
	dir string
	ttl time.Duration
	now func() time.Time
}

// claim reserves port unless a reservation younger than ttl holds it. A
// directory that cannot be used reserves nothing and refuses nothing: the
// listen probe still checks the port.
func (r reservations) claim(port int) bool {
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return true
	}
	path := filepath.Join(r.dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			return f.Close() == nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return true
		}
		info, err := os.Stat(path)
		if err != nil || r.now().Sub(info.ModTime()) < r.ttl {
			return false
		}
		// Stale: remove it and try once more. Two picks that find one
		// stale file at the same moment could both win; the random
		// choice among thousands of ports keeps that rare.
		_ = os.Remove(path)
	}
	return false
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
