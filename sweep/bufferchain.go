package sweep

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/internal/bufferchain"
	"github.com/rig-dev/rig/internal/units"
)

// ChainFactor is how close the predicted SO_RCVBUF minimum must come to the measured threshold.
const ChainFactor = 2

// chainShape is a burst as the buffer chain sees it: everything that decides the guide's
// minimum, and the receiver window, which decides what the sender may put in flight.
type chainShape struct {
	messages int64 // per sender
	senders  int
	size     int
	aeron    bool
	window   int64
}

// chainSetting is one socket buffer a shape ran at: in effect (after the clamp), as granted.
type chainSetting struct {
	buf, granted int64
	errors       uint64
	bursts       int
}

// burstBuffer is the receive buffer in effect for a burst and what the kernel granted: the
// receiver's read-back grant when there is one (the kernel's doubling taken off), else the ask
// under rmem_max.
func burstBuffer(u *analysis.BurstUDP) (buf, granted, window int64) {
	asked, granted, rmem := int64(u.RcvbufAsked), int64(u.RcvbufGranted), int64(u.RmemMax)
	if u.Aeron != nil {
		set := u.Aeron.Settings[u.Receiver]
		if set == nil {
			for _, n := range slices.Sorted(maps.Keys(u.Aeron.Settings)) {
				set = u.Aeron.Settings[n]
				break
			}
		}
		asked, granted, rmem = set[bufferchain.SettingSoRcvbuf], set[bufferchain.SettingGranted], set[bufferchain.TuningRmemMax]
		window = set[bufferchain.SettingWindow]
	}
	switch {
	case granted > 0:
		return granted / 2, granted, window
	case asked > 0 && rmem > 0:
		return bufferchain.Effective(asked, rmem), bufferchain.Granted(asked, rmem), window
	}
	return 0, 0, window
}

// chainPoints gathers, per burst shape, the socket buffers the sweep ran it at and their errors.
func chainPoints(runs []*RunData) ([]chainShape, map[chainShape][]chainSetting) {
	var order []chainShape
	out := map[chainShape][]chainSetting{}
	for _, r := range runs {
		if r.Summary == nil {
			continue
		}
		for _, b := range r.Summary.Bursts {
			u := b.UDP
			if u == nil || u.Senders < 1 || b.Planned < 1 {
				continue
			}
			buf, granted, window := burstBuffer(u)
			if buf <= 0 {
				continue // the run did not read its buffer back
			}
			sh := chainShape{messages: int64(b.Planned / u.Senders), senders: u.Senders, size: u.Size, aeron: u.Transport == analysis.TransportAeron, window: window}
			if _, ok := out[sh]; !ok {
				order = append(order, sh)
			}
			k := slices.IndexFunc(out[sh], func(s chainSetting) bool { return s.buf == buf })
			if k < 0 {
				out[sh] = append(out[sh], chainSetting{buf: buf, granted: granted})
				k = len(out[sh]) - 1
			}
			out[sh][k].errors += u.RcvbufErrors
			out[sh][k].bursts++
		}
	}
	for _, sh := range order {
		slices.SortFunc(out[sh], func(a, b chainSetting) int { return cmp.Compare(a.buf, b.buf) })
	}
	return order, out
}

// bufferChain sets the guide's predicted SO_RCVBUF minimum against the threshold the sweep
// measured: the smallest socket buffer in effect whose bursts had no receive-buffer error.
func (r *Report) bufferChain(b *strings.Builder) {
	order, points := chainPoints(r.Set.Runs)
	if len(order) == 0 {
		return
	}
	pf := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	mem := func(v int64) string { return units.FormatMemory(float64(v)) }
	pf("## Buffer chain: predicted against measured\n\n")
	pf("| burst | P / ms | S | predicted SO_RCVBUF ≥ | SO_RCVBUF in effect (granted): rcvbuf errors over its bursts | measured threshold | within %d× |\n", ChainFactor)
	pf("|---|---|---|---|---|---|---|\n")
	for _, sh := range order {
		ch := bufferchain.Predict(bufferchain.Burst{Messages: sh.messages, Senders: sh.senders, Size: sh.size, Aeron: sh.aeron})
		var pts []bufferchain.Point
		var tried []string
		for _, s := range points[sh] {
			pts = append(pts, bufferchain.Point{Buffer: s.buf, Errors: s.errors})
			tried = append(tried, fmt.Sprintf("%s (%s): %d over %d", mem(s.buf), mem(s.granted), s.errors, s.bursts))
		}
		br := bufferchain.Measure(pts)
		measured := "none without errors"
		switch {
		case br.Passed > 0 && br.Failed > 0:
			measured = fmt.Sprintf("above %s, at most %s", mem(br.Failed), mem(br.Passed))
		case br.Passed > 0:
			measured = "at most " + mem(br.Passed)
		case br.Failed > 0:
			measured = "above " + mem(br.Failed)
		}
		ok, why := br.Within(ch.SoRcvbuf, ChainFactor)
		verdict := "no"
		if ok {
			verdict = "yes"
		}
		if why == "" {
			why = fmt.Sprintf("predicted / measured %.2g", float64(ch.SoRcvbuf)/float64(br.Passed))
		}
		shape := fmt.Sprintf("%s × %d B × %d sender(s)", units.FormatCount(sh.messages), sh.size, sh.senders)
		if sh.window > 0 {
			shape += ", window " + mem(sh.window)
		}
		pf("| %s | %s | %d B | %s | %s | %s | %s: %s |\n", shape, units.FormatCount(int64(ch.PerMs)), ch.Wire, mem(ch.SoRcvbuf),
			strings.Join(tried, "; "), measured, verdict, why)
	}
	pf("\nPredicted: the micro-burst guide's SO_RCVBUF ≥ P × S × %s, with P every sender's burst arriving within %s and S a message on the wire "+
		"(through Aeron: the message, Aeron's %d B frame header and the cluster's %d B session header, %d B aligned; else the datagram), as the plan prints it. "+
		"Measured: the smallest socket buffer in effect (the receiver's grant read back, halved: Linux grants min(asked, net.core.rmem_max) × 2) whose bursts "+
		"had no UDP receive-buffer error, every round pooled; the threshold lies above the largest setting below it that had errors. "+
		"Where the sweep's settings cannot bracket the threshold within %d×, the row says why.\n\n",
		units.FormatDuration(bufferchain.BurstWindow), units.FormatDuration(bufferchain.BurstWindow),
		bufferchain.AeronFrameHeader, bufferchain.ClusterSessionHeader, bufferchain.AeronFrameAlignment, ChainFactor)
}
