// Package freeport picks a loopback TCP address that is free to bind, for the tests' helpers
// (internal/testaddr) and for the benches that start an engine's processes on this machine.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports below this are left alone (well-known and registered services' usual homes).
const lowest = 10000

var (
	mu     sync.Mutex
	handed = make(map[int]bool) // ports this process handed out: never twice
)

// Loopback returns a 127.0.0.1 address whose port was free a moment ago (the listener is
// closed before returning, so the caller, or a process it starts, can bind it).
//
// The port is taken outside the kernel's ephemeral range (net.ipv4.ip_local_port_range) where
// it can: a port from there (what binding port 0 gives) can be taken meanwhile as the source
// port of any outgoing connection, a raft peer's dial say, and the bind then fails with
// "address already in use". Outside it only another listener can take it, and a random pick
// among some 20,000 ports makes that rare between parallel processes. It is checked free for
// TCP only: a caller that binds it for UDP too (an engine's UDP ingress on its client port)
// could still find it taken there, as rarely.
func Loopback() (string, error) {
	lo, _ := ephemeralRange()
	mu.Lock()
	defer mu.Unlock()
	if span := lo - lowest; span > 1000 {
		for range 200 {
			p := lowest + rand.IntN(span) // below lo, so outside the ephemeral range
			if handed[p] {
				continue
			}
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			ln.Close()
			handed[p] = true
			return ln.Addr().String(), nil
		}
	}
	// No room below the ephemeral range (a machine that made it nearly every port): the
	// kernel's pick.
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("find a free loopback port: %w", err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		ln.Close()
		if !handed[addr.Port] {
			handed[addr.Port] = true
			return addr.String(), nil
		}
	}
}

// ephemeralRange reads the kernel's range of source ports for outgoing connections (Linux's
// default where it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}
