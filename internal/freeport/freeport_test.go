package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestLoopbackOutsideEphemeralRange: the ports handed out are never the kernel's picks for
// outgoing connections, never handed out twice, and bindable.
func TestLoopbackOutsideEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	if lo-lowest <= 1000 {
		t.Skipf("ephemeral range %d-%d leaves no room below it", lo, hi)
	}
	seen := map[string]bool{}
	for range 300 {
		a, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		_, ps, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(ps)
		if p < lowest || (p >= lo && p <= hi) {
			t.Fatalf("Loopback gave %s: port inside the ephemeral range %d-%d or below %d", a, lo, hi, lowest)
		}
		if seen[a] {
			t.Fatalf("Loopback gave %s twice", a)
		}
		seen[a] = true
	}
	a, err := Loopback()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("bind a free address: %v", err)
	}
	ln.Close()
}
