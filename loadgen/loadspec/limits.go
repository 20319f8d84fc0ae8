package loadspec

import (
	"strings"
	"time"
)

// Sending defaults and limits a playbook is checked against before any load generator runs.
const (
	// A preload batch is one raft entry, and at sync level > 0 every append waits for a sync on
	// each node, so a batch is made big enough (~1 MiB) for the sync to be paid by 32K orders
	// rather than 1,000, and enough batches are in flight that the leader's append, the
	// followers' appends and the book's apply of different batches overlap. BenchmarkPreload
	// (package loadgen) measures it (docs/constants.md, "Preload batch").
	DefaultBatch    = 32768
	DefaultInFlight = 8

	DefaultProbePrice = 1 // an IOC buy at 1 crosses no ask the preload rests (asks sit above Mid)
	// MaxSpin bounds a probe stream's busy-wait before each probe is due (loadgen's precise
	// sender sleeps in nanosleep up to this window before a send).
	MaxSpin = 2 * time.Millisecond

	// DefaultBurstSize is the datagram size when a burst does not set one: 170 bytes, the size
	// of a typical market-data message.
	DefaultBurstSize = 170
	// MaxSenders bounds the burst senders of one load generator (each is a socket and a 64 MiB
	// retransmit ring).
	MaxSenders = 16
)

// StartLinePrefix begins the line `rig loadgen probe` prints on stdout when its schedule starts,
// followed by the start (RFC 3339, ns): the controller learns it from the stream as it happens,
// rather than by asking until it is there.
const StartLinePrefix = "probe schedule started at "

// StartLine is that line for start (without the newline).
func StartLine(start time.Time) string {
	return StartLinePrefix + start.UTC().Format(time.RFC3339Nano)
}

// ParseStartLine returns the start a StartLine carries.
func ParseStartLine(line string) (time.Time, bool) {
	v, ok := strings.CutPrefix(strings.TrimSpace(line), StartLinePrefix)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}
