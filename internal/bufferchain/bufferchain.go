// Package bufferchain holds the micro-burst guide's buffer chain: the smallest kernel socket
// buffer, flow-control window and term buffer a burst needs to arrive without a drop, and the
// clamp Linux applies to a socket's asked receive buffer. The plan prints these minimums beside
// the settings a run will have; the sweep report sets them against what the runs measured.
package bufferchain

import (
	"math"
	"time"
)

// Aeron's framing of a message offered into a cluster's ingress: every message is a data frame
// (its 32 B header) holding the cluster's session message header (32 B) and the payload, the
// frame padded to 32 B.
const (
	AeronFrameHeader     = 32
	ClusterSessionHeader = 32
	AeronFrameAlignment  = 32
)

// The guide's premises, used where a playbook cannot say: a burst arrives within about 1 ms,
// a receiver may stall for as long as a burst lasts ("set the stall headroom to your burst
// duration"), and a round trip inside one zone is about 100 µs.
const (
	BurstWindow = time.Millisecond
	SameZoneRTT = 100 * time.Microsecond
)

// The engine settings that hold the chain's links, by the names the engines declare them:
// Aeron's system properties, and the reference engine's UDP ingress buffer.
const (
	SettingSoRcvbuf  = "aeron.socket.so_rcvbuf"
	SettingUDPRcvbuf = "udp_rcvbuf"
	SettingWindow    = "aeron.rcv.initial.window.length"
	SettingTerm      = "aeron.term.buffer.length"
	// SettingGranted is the receive buffer the kernel granted, as the engine reads it back.
	SettingGranted = "so_rcvbuf_granted"
	// TuningRmemMax is the kernel's ceiling on what a socket may ask for.
	TuningRmemMax = "net.core.rmem_max"
	// KernelRmemDefault is what an unset net.core.rmem_max / rmem_default is on a stock kernel.
	KernelRmemDefault = 212992
)

// Burst is one burst as the receiver takes it.
type Burst struct {
	Messages int64 // per sender
	Senders  int   // bursting at once into one receiver
	Size     int   // payload bytes per message
	// Aeron: the messages go through Aeron's ingress (framed, several to a datagram); false:
	// one UDP datagram of Size bytes each.
	Aeron bool
	// RTT is the round trip between sender and receiver; 0: SameZoneRTT.
	RTT time.Duration
}

// Chain is the guide's minimums for a burst, and how they were derived.
type Chain struct {
	PerMs    float64       // P: messages per ms at wire speed, the whole burst within BurstWindow
	Wire     int64         // S: bytes a message takes on the wire (Aeron: framed and aligned)
	RTT      time.Duration // as used for the window
	SoRcvbuf int64         // SO_RCVBUF ≥ P × S × burst ms
	Window   int64         // flow-control window ≥ P × S × RTT ms
	Term     int64         // term buffer ≥ 2 × P × S × max stall ms (the stall: BurstWindow)
}

// WireSize is S: the bytes a message of size takes on the wire.
func WireSize(size int, aeron bool) int64 {
	if !aeron {
		return int64(size)
	}
	n := int64(AeronFrameHeader + ClusterSessionHeader + size)
	return (n + AeronFrameAlignment - 1) / AeronFrameAlignment * AeronFrameAlignment
}

// Predict is the guide's chain for b: P is every sender's burst arriving within BurstWindow (the
// guide's "50K in ~1 ms" per sender), S its WireSize.
func Predict(b Burst) Chain {
	return Minimums(float64(b.Messages)*float64(max(b.Senders, 1))/ms(BurstWindow), WireSize(b.Size, b.Aeron), BurstWindow, b.RTT)
}

// Minimums is the guide's chain for P messages per ms of S bytes each over a burst of burst
// (also the stall the term must ride out), at a round trip rtt (0: SameZoneRTT).
func Minimums(perMs float64, wire int64, burst, rtt time.Duration) Chain {
	if rtt <= 0 {
		rtt = SameZoneRTT
	}
	c := Chain{PerMs: perMs, Wire: wire, RTT: rtt}
	ps := perMs * float64(wire)
	c.SoRcvbuf = ceil(ps * ms(burst))
	c.Window = ceil(ps * ms(rtt))
	c.Term = ceil(2 * ps * ms(burst))
	return c
}

// Granted is what Linux gives a socket that asks for asked bytes of receive buffer under
// rmemMax: min(asked, rmem_max) doubled (the kernel's bookkeeping half).
func Granted(asked, rmemMax int64) int64 { return min(asked, rmemMax) * 2 }

// Effective is the asked buffer after the clamp, the figure the guide's SO_RCVBUF minimum is
// set against (Granted without the kernel's doubling).
func Effective(asked, rmemMax int64) int64 { return min(asked, rmemMax) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ceil(v float64) int64 { return int64(math.Ceil(v)) }

// Point is one SO_RCVBUF setting a sweep ran a burst shape at: the buffer in effect (Effective)
// and the receive-buffer errors its bursts had, summed.
type Point struct {
	Buffer int64
	Errors uint64
}

// Bracket is where a sweep's settings put the SO_RCVBUF threshold: the smallest setting whose
// bursts had no receive-buffer error (Passed) and the largest below it that had some (Failed).
// A zero Passed: every setting had errors; a zero Failed: none below the smallest passing one.
type Bracket struct {
	Passed, Failed int64
	// Inverted is a setting with errors above Passed (the runs disagree with a threshold).
	Inverted int64
}

// Measure brackets the threshold from points (any order; points of one setting pool).
func Measure(points []Point) Bracket {
	errs := map[int64]uint64{}
	for _, p := range points {
		errs[p.Buffer] += p.Errors
	}
	var b Bracket
	for buf, e := range errs {
		if e == 0 && (b.Passed == 0 || buf < b.Passed) {
			b.Passed = buf
		}
	}
	for buf, e := range errs {
		switch {
		case e == 0:
		case b.Passed == 0 || buf < b.Passed:
			b.Failed = max(b.Failed, buf)
		default:
			b.Inverted = max(b.Inverted, buf)
		}
	}
	return b
}

// Within says whether predicted is within factor of the measured threshold: of Passed when the
// settings bracket it closely enough to say (Passed no more than factor × Failed), and false
// with the reason otherwise.
func (b Bracket) Within(predicted int64, factor float64) (bool, string) {
	switch {
	case b.Passed == 0:
		return false, "all settings below: every setting had receive-buffer errors, so the threshold is above the largest"
	case b.Inverted > 0:
		return false, "the runs disagree: a setting above the smallest without errors had errors"
	case b.Failed == 0:
		if float64(predicted) <= float64(b.Passed)*factor {
			return true, "all settings above: even the smallest had no receive-buffer errors, so the threshold is at or below it, as predicted"
		}
		return false, "all settings above: even the smallest had no receive-buffer errors, so the threshold is at or below it, far below the prediction"
	case float64(b.Passed) > factor*float64(b.Failed):
		in := float64(predicted) > float64(b.Failed) && float64(predicted) <= float64(b.Passed)
		s := "the settings are too far apart to pin the threshold within the factor: it lies above the largest with errors and at or below the smallest without"
		if in {
			return false, s + "; the prediction lies between them"
		}
		return false, s + "; the prediction lies outside them"
	}
	r := float64(predicted) / float64(b.Passed)
	return r <= factor && r >= 1/factor, ""
}
