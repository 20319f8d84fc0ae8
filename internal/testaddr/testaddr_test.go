package testaddr

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeOutsideEphemeralRange: the ports handed out are never the kernel's picks for
// outgoing connections, never handed out twice, and bindable.
func TestFreeOutsideEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	if lo-lowest <= 1000 {
		t.Skipf("ephemeral range %d-%d leaves no room below it", lo, hi)
	}
	seen := map[string]bool{}
	for range 300 {
		a := Free(t)
		_, ps, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(ps)
		if p < lowest || (p >= lo && p <= hi) {
			t.Fatalf("Free gave %s: port inside the ephemeral range %d-%d or below %d", a, lo, hi, lowest)
		}
		if seen[a] {
			t.Fatalf("Free gave %s twice", a)
		}
		seen[a] = true
	}
	ln, err := net.Listen("tcp", Free(t))
	if err != nil {
		t.Fatalf("bind a free address: %v", err)
	}
	ln.Close()
}
