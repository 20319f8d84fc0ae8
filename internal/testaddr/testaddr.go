// Package testaddr hands tests a free TCP address on loopback.
package testaddr

import (
	"net"
	"testing"
)

// Free returns a 127.0.0.1 address whose port was free a moment ago (the listener is closed
// before returning, so the caller can bind it).
func Free(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
