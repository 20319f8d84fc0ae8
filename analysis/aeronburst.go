package analysis

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/bufferchain"
	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/rundir"
)

// TransportAeron is a burst sent through an engine's own client (Aeron's ingress), as BurstUDP's
// Transport says it.
const TransportAeron = "aeron"

// Aeron's system counters (docs/engines.md, "Micro-bursts through Aeron") that a burst's row
// keeps per node, by the names GET /transport gives them.
const (
	CounterNaksSent       = "nak_messages_sent"
	CounterNaksReceived   = "nak_messages_received"
	CounterRetransmits    = "retransmits_sent"
	CounterLossGapFills   = "loss_gap_fills"
	CounterFCUnderRuns    = "flow_control_under_runs"
	CounterFCOverRuns     = "flow_control_over_runs"
	CounterSenderFCLimits = "sender_flow_control_limits"
	CounterBackPressure   = "publication_back_pressure_events"
	CounterShortSends     = "short_sends"
	CounterHeartbeatsSent = "heartbeats_sent"
	CounterErrors         = "errors"
)

// AeronCounterNames are the counters kept, in the order the report names them.
var AeronCounterNames = []string{CounterNaksSent, CounterNaksReceived, CounterRetransmits, CounterLossGapFills,
	CounterFCUnderRuns, CounterFCOverRuns, CounterSenderFCLimits, CounterBackPressure, CounterShortSends,
	CounterHeartbeatsSent, CounterErrors}

// BurstAeron is what Aeron's media drivers counted over one burst, per node (the servers' from
// GET /transport samples around the burst, the sending client's from its own driver) and summed.
type BurstAeron struct {
	Nodes map[string]map[string]int64 `json:"nodes"` // node (or "<client>/sender") -> counter -> delta
	Sum   map[string]int64            `json:"sum"`
	// Refused is how many offers the sending client's ingress publication refused for back
	// pressure (each retried at once).
	Refused int64 `json:"offers_back_pressured"`
	// Settings are the servers' transport settings in effect (receiver window, SO_RCVBUF asked
	// and granted, term length, net.core.rmem_max), from the sample before the burst.
	Settings map[string]map[string]int64 `json:"settings,omitempty"`
}

// aeronRow is a burst of a series sent through the engine's own client.
func (d *runData) aeronRow(st rundir.BurstStats, b rundir.BurstResult) BurstRow {
	u := &BurstUDP{Transport: TransportAeron, Burst: b.Burst, Size: st.Size, Senders: st.Senders, Receiver: st.Target,
		Received: uint64(b.Answered), PeakPerMs: b.AnsweredPeakPerMs, AbsorbMs: nsToMs(b.DrainNs),
		P50Ms: nsToMs(b.P50LatencyNs), MaxMs: nsToMs(b.MaxLatencyNs),
		Aeron: &BurstAeron{Nodes: map[string]map[string]int64{}, Sum: map[string]int64{}, Refused: b.BackPressured}}
	if b.Answered >= 100 {
		p99 := nsToMs(b.P99LatencyNs)
		u.P99Ms = &p99
	}
	if len(b.ClientCounters) > 0 {
		u.Aeron.Nodes["client"] = keep(b.ClientCounters)
	}
	return BurstRow{AtS: d.off(b.Due.UnixNano()), Sent: b.Sent, PeakPerMs: b.PeakPerMs, SendMs: nsToMs(b.SendNs),
		AbsorbMs: u.AbsorbMs, MaxLatencyMs: u.MaxMs, Answered: b.Answered, Planned: st.Messages * st.Senders, UDP: u}
}

// keep is the kept counters of all.
func keep(all map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, n := range AeronCounterNames {
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return out
}

// aeronServerFigures adds the servers' counters around each Aeron burst (the TransportFile
// beside each series' figures) and judges every Aeron burst.
func (d *runData) aeronServerFigures(s *Summary, rows map[uint32]int) {
	files, _ := filepath.Glob(filepath.Join(d.dir, "*", rundir.LoadgenDir, "bursts-*", rundir.TransportFile))
	for _, f := range files {
		b, err := untrusted.ReadFileUpTo(f, rundir.TransportFile, rundir.MaxJSONBytes)
		var ts rundir.TransportSamples
		if err != nil || json.Unmarshal(b, &ts) != nil {
			continue
		}
		for node, samples := range ts.Nodes {
			for k := 0; k+1 < len(samples); k++ {
				i, ok := rows[ts.FirstBurst+uint32(k)]
				if !ok {
					continue
				}
				u := s.Bursts[i].UDP
				before, after := samples[k], samples[k+1]
				if before.Time.IsZero() || after.Time.IsZero() { // the server did not answer then
					continue
				}
				delta := map[string]int64{}
				for _, n := range AeronCounterNames {
					if v, ok := after.Counters[n]; ok {
						delta[n] = v - before.Counters[n]
					}
				}
				u.Aeron.Nodes[node] = delta
				// The NIC's rx drops between the same samples, the largest over the nodes as above.
				if n := d.nicDrops(node, before.Time.UnixNano(), after.Time.UnixNano()); n != nil && (u.NICRxDrops == nil || *n > *u.NICRxDrops) {
					u.NICRxDrops = n
				}
				// On one machine every node reads the same kernel counter: the largest growth is
				// the receiving node's (a remote node's own counter otherwise).
				u.RcvbufErrors = max(u.RcvbufErrors, uint64(max(after.UDPRcvbufErrors-before.UDPRcvbufErrors, 0)))
				u.InErrors = max(u.InErrors, uint64(max(after.UDPInErrors-before.UDPInErrors, 0)))
				if len(before.Settings) > 0 {
					if u.Aeron.Settings == nil {
						u.Aeron.Settings = map[string]map[string]int64{}
					}
					u.Aeron.Settings[node] = before.Settings
				}
			}
		}
	}
	for _, i := range rows {
		r := &s.Bursts[i]
		u := r.UDP
		for _, c := range u.Aeron.Nodes {
			for n, v := range c {
				u.Aeron.Sum[n] += v
			}
		}
		u.Naks = uint64(max(u.Aeron.Sum[CounterNaksSent], 0))
		u.Gaps = uint64(max(u.Aeron.Sum[CounterLossGapFills], 0))
		u.Repaired = uint64(max(u.Aeron.Sum[CounterRetransmits], 0))
		r.Lost = max(r.Sent-int(u.Received), 0)
		r.NotSent = max(r.Planned-r.Sent, 0)
		u.Fail = aeronFailures(r)
		u.Pass = len(u.Fail) == 0
	}
}

// aeronFailures lists what fails an Aeron burst by the micro-burst guide's criteria: zero UDP
// receive-buffer errors, p99 below MaxBurstP99Ms, no loss-gap fill or back-pressure events,
// and nothing unanswered.
func aeronFailures(r *BurstRow) []string {
	u := r.UDP
	var f []string
	if u.Received == 0 {
		return []string{"nothing answered"}
	}
	if u.RcvbufErrors > 0 {
		f = append(f, fmt.Sprintf("%d UDP receive-buffer errors", u.RcvbufErrors))
	}
	if u.P99Ms != nil && *u.P99Ms >= MaxBurstP99Ms {
		f = append(f, fmt.Sprintf("p99 %s >= %g ms", fmtMs(*u.P99Ms), MaxBurstP99Ms))
	} else if u.P99Ms == nil && u.MaxMs >= MaxBurstP99Ms {
		f = append(f, fmt.Sprintf("max %.3g ms >= %g ms (too few messages for a p99)", u.MaxMs, MaxBurstP99Ms))
	}
	if u.NICRxDrops != nil && *u.NICRxDrops > 0 {
		f = append(f, fmt.Sprintf("%d NIC rx drops", *u.NICRxDrops))
	}
	if g := u.Aeron.Sum[CounterLossGapFills]; g > 0 {
		f = append(f, fmt.Sprintf("%d loss-gap fills", g))
	}
	if bp := u.Aeron.Sum[CounterBackPressure]; bp > 0 {
		f = append(f, fmt.Sprintf("%d back-pressure events", bp))
	}
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("%d of %d never answered", r.Lost, r.Sent))
	}
	return f
}

// writeAeronBursts is the report's table of bursts through Aeron's ingress.
func writeAeronBursts(pf func(string, ...any), rows []BurstRow) {
	pf("| # | at | size × senders | sent | answered | peak / 1 ms | absorbed in | p50 | p99 | max | rcvbuf errors | NAKs sent | retransmits | loss-gap fills | back pressure | FC under / over | result |\n")
	pf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	passed := 0
	for _, b := range rows {
		u := b.UDP
		p99 := "—"
		if u.P99Ms != nil {
			p99 = fmtMs(*u.P99Ms)
		}
		result := "pass"
		if u.Pass {
			passed++
		} else {
			result = "**fail**: " + strings.Join(u.Fail, "; ")
		}
		sum := u.Aeron.Sum
		errs := fmt.Sprint(u.RcvbufErrors)
		if u.NICRxDrops != nil {
			errs += fmt.Sprintf(" (+%d NIC)", *u.NICRxDrops)
		}
		pf("| %d | %s | %d B × %d | %d | %d | %d | %s | %s | %s | %s | %s | %d | %d | %d | %d (%d offers refused) | %d / %d | %s |\n",
			u.Burst, fmtS(b.AtS), u.Size, u.Senders, b.Sent, u.Received, u.PeakPerMs, fmtMs(u.AbsorbMs), fmtMs(u.P50Ms), p99, fmtMs(u.MaxMs),
			errs, sum[CounterNaksSent], sum[CounterRetransmits], sum[CounterLossGapFills], sum[CounterBackPressure], u.Aeron.Refused,
			sum[CounterFCUnderRuns], sum[CounterFCOverRuns], result)
	}
	pf("\n%d of %d bursts through Aeron's ingress pass (zero UDP receive-buffer errors, p99 below %g ms, no loss-gap fill or back-pressure events). "+
		"Each message went from the client node's own media driver into the cluster's ingress, offered in a loop with no pacing; latency runs "+
		"from its intended send time (its first offer) to the service's reply, peak / 1 ms counts replies, absorbed in is first send to last reply. "+
		"Counters are the media drivers' (every server's and the sender's own) over the burst, as AeronStat reads them; rcvbuf errors is the "+
		"growth of /proc/net/snmp RcvbufErrors on the receiving node (+ the NIC's rx drops from ethtool -S between the same samples, where the node has them).", passed, len(rows), MaxBurstP99Ms)
	if len(rows) > 0 && rows[0].UDP.Aeron.Settings != nil {
		s := rows[0].UDP.Aeron.Settings
		nodes := make([]string, 0, len(s))
		for n := range s {
			nodes = append(nodes, n)
		}
		slices.Sort(nodes)
		set := s[nodes[0]]
		pf(" In effect on %s: receiver window %s, SO_RCVBUF asked %s, granted %s (the kernel's grant after the rmem_max clamp, doubled, as getsockopt reports it), term length %s, net.core.rmem_max %s.",
			nodes[0], fmtBytes(set["aeron.rcv.initial.window.length"]), fmtBytes(set["aeron.socket.so_rcvbuf"]), fmtBytes(set["so_rcvbuf_granted"]),
			fmtBytes(set["aeron.term.buffer.length"]), fmtBytes(set["net.core.rmem_max"]))
	}
	if b := rows[len(rows)-1]; b.PeakPerMs > 0 {
		ch := bufferchain.Minimums(float64(b.PeakPerMs), bufferchain.WireSize(b.UDP.Size, true), time.Duration(max(b.SendMs, 1)*float64(time.Millisecond)), 0)
		pf(" The guide's buffer chain for the last burst (sent at up to %d messages per ms for %s, %d B a message framed): SO_RCVBUF at least P × S × burst ms = %.1f MiB;"+
			" the flow-control window bounds what is in flight, so a window below that is absorbed by back pressure on the sender instead.",
			b.PeakPerMs, fmtMs(b.SendMs), ch.Wire, float64(ch.SoRcvbuf)/(1<<20))
	}
	pf("\n\n")
}
