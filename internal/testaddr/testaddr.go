// Package testaddr hands tests a free TCP address on loopback, or an echo service on one.
package testaddr

import (
	"io"
	"net"
	"testing"

	"github.com/rig-dev/rig/internal/freeport"
)

// Free returns a 127.0.0.1 address whose port was free a moment ago, outside the kernel's
// ephemeral range where it can (internal/freeport says why).
func Free(t testing.TB) string {
	t.Helper()
	a, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Echo serves, until the test ends, an echo on host (any free port) and returns its address: a
// stand-in for a service behind a link (an engine's raft or client port).
func Echo(t testing.TB, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}
