package freeport

import (
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func TestPickIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	// Linux always has the range; elsewhere Pick falls back to a port the
	// kernel chooses, which must still be free and not skipped.
	if low == 0 && runtime.GOOS == "linux" {
		t.Fatalf("cannot read the ephemeral port range from %s", rangeFile)
	}
	seen := map[int]bool{}
	for range 20 {
		p, err := Pick("127.0.0.1", func(p int) bool { return seen[p] })
		if err != nil {
			t.Fatal(err)
		}
		if low-floor >= 1000 && (p < floor || p >= low) {
			t.Errorf("port %d is outside [%d, %d): it could be given to a \":0\" listener or an outgoing connection", p, floor, low)
		}
		if seen[p] {
			t.Errorf("port %d returned although skip refused it", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}

func TestPickSkipsPortsInUse(t *testing.T) {
	held, err := Pick("127.0.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The random source offers the held port first, then a skipped one,
	// then one that is free.
	offers := []int{held, held + 1, held + 2}
	i := 0
	next := func(int) int { p := offers[i%len(offers)] - floor; i++; return p }
	p, err := pick("127.0.0.1", held+1000, func(p int) bool { return p == held+1 }, next, claimAll)
	if err != nil {
		t.Fatal(err)
	}
	if p != held+2 {
		t.Errorf("pick returned %d; want %d (the held port %d is in use, %d is skipped)", p, held+2, held, held+1)
	}
}

func TestPickFallsBackWithoutRoom(t *testing.T) {
	p, err := pick("127.0.0.1", floor+10, nil, func(int) int { t.Fatal("no random port without room below the range"); return 0 }, claimAll)
	if err != nil || p == 0 {
		t.Fatalf("pick = %d, %v; want a port the kernel chose", p, err)
	}
}

// claimAll reserves nothing and refuses nothing.
func claimAll(int) bool { return true }

func TestPickDoesNotReturnAReservedPortAgain(t *testing.T) {
	first, err := Pick("127.0.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r := reservations{dir: t.TempDir(), ttl: time.Minute, now: func() time.Time { return now }}
	// The random source offers the same port to every pick, then the
	// next one: as two processes' picks of one moment may.
	offers := func() func(int) int {
		i := 0
		return func(int) int { i++; return first - floor + min(i-1, 1) }
	}
	a, err := pick("127.0.0.1", first+1000, nil, offers(), r.claim)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pick("127.0.0.1", first+1000, nil, offers(), r.claim)
	if err != nil {
		t.Fatal(err)
	}
	if a != first || b == a {
		t.Errorf("two picks returned %d and %d; want %d and another port (nothing has bound %d yet)", a, b, first, first)
	}
	// Once the reservation is older than the TTL, the port may be
	// picked again.
	now = now.Add(time.Minute + time.Second)
	c, err := pick("127.0.0.1", first+1000, nil, offers(), r.claim)
	if err != nil {
		t.Fatal(err)
	}
	if c != first {
		t.Errorf("after the reservation expired, pick returned %d; want %d again", c, first)
	}
}
