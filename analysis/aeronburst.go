package analysis

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
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
	// Reply is the burst end to end: each message from its first offer to the service's reply,
	// after the consensus module, the followers and the service.
	Reply BurstReply `json:"reply"`
	// Receive says where BurstUDP's receiver figures come from: the leader's burst probe, before
	// consensus; nil where no node had a probe (its receiver figures are then absent).
	Receive *BurstReceivePath `json:"receive,omitempty"`
}

// BurstReply is an Aeron burst's figures at the sender: replies, the most in any 1 ms, first
// send to last reply, and latency from each message's first offer (and the p99 from the burst's
// scheduled start, which counts the wait behind the messages ahead of it).
type BurstReply struct {
	Answered       int      `json:"answered"`
	PeakPerMs      int      `json:"peak_per_ms"`
	AbsorbMs       float64  `json:"absorb_ms"`
	P50Ms          float64  `json:"p50_ms"`
	P99Ms          *float64 `json:"p99_ms,omitempty"` // from 100 replies
	MaxMs          float64  `json:"max_ms"`
	FromStartP99Ms *float64 `json:"from_start_p99_ms,omitempty"`
}

// merge adds another client node's share of the same burst: counts add, percentiles take the
// worse node's (they do not add).
func (r *BurstReply) merge(o BurstReply) {
	r.Answered += o.Answered
	r.PeakPerMs += o.PeakPerMs
	r.AbsorbMs = max(r.AbsorbMs, o.AbsorbMs)
	r.P50Ms = max(r.P50Ms, o.P50Ms)
	r.MaxMs = max(r.MaxMs, o.MaxMs)
	r.P99Ms = worse(r.P99Ms, o.P99Ms)
	r.FromStartP99Ms = worse(r.FromStartP99Ms, o.FromStartP99Ms)
}

// worse is the larger of two optional figures.
func worse(a, b *float64) *float64 {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}

// BurstReceivePath is where an Aeron burst's receive-path figures were measured and its
// latency from the burst's scheduled start there.
type BurstReceivePath struct {
	Node           string   `json:"node"` // the node whose probe received the most of it: the leader
	FromStartP50Ms float64  `json:"from_start_p50_ms"`
	FromStartP99Ms *float64 `json:"from_start_p99_ms,omitempty"` // from 100 messages
	FromStartMaxMs float64  `json:"from_start_max_ms"`
}

// aeronRow is a burst of a series sent through the engine's own client.
func (d *runData) aeronRow(st rundir.BurstStats, b rundir.BurstResult) BurstRow {
	// The receiver figures (Received, PeakPerMs, AbsorbMs, P50Ms, P99Ms, MaxMs) are the leader's
	// probe's, added by aeronServerFigures; the sender's are the reply's.
	u := &BurstUDP{Transport: TransportAeron, Burst: b.Burst, Size: st.Size, Senders: st.Senders, Receiver: st.Target,
		Aeron: &BurstAeron{Nodes: map[string]map[string]int64{}, Sum: map[string]int64{}, Refused: b.BackPressured,
			Reply: BurstReply{Answered: b.Answered, PeakPerMs: b.AnsweredPeakPerMs, AbsorbMs: nsToMs(b.DrainNs),
				P50Ms: nsToMs(b.P50LatencyNs), MaxMs: nsToMs(b.MaxLatencyNs)}}}
	if b.Answered >= 100 {
		u.Aeron.Reply.P99Ms = valPtr(nsToMs(b.P99LatencyNs))
		if b.P99FromStartNs > 0 {
			u.Aeron.Reply.FromStartP99Ms = valPtr(nsToMs(b.P99FromStartNs))
		}
	}
	if len(b.ClientCounters) > 0 {
		u.Aeron.Nodes["client"] = keep(b.ClientCounters)
	}
	return BurstRow{AtS: d.off(b.Due.UnixNano()), Sent: b.Sent, PeakPerMs: b.PeakPerMs, SendMs: nsToMs(b.SendNs),
		AbsorbMs: nsToMs(b.DrainNs), MaxLatencyMs: nsToMs(b.MaxLatencyNs), Answered: b.Answered, Planned: st.Messages * st.Senders, UDP: u}
}

// receivePath sets u's receiver figures from a node's probe, if it received more of the burst
// than the node they came from so far (the leader receives the burst; a sample taken while it
// arrived holds part of it).
func receivePath(u *BurstUDP, node string, r engine.BurstReceive) {
	if r.Received <= 0 || (u.Aeron.Receive != nil && uint64(r.Received) <= u.Received) {
		return
	}
	u.Received, u.Receiver, u.PeakPerMs = uint64(r.Received), node, r.PeakPerMs
	u.AbsorbMs = nsToMs(r.LastUnixNs - r.FirstUnixNs)
	u.P50Ms, u.MaxMs, u.P99Ms = nsToMs(r.P50Ns), nsToMs(r.MaxNs), nil
	p := &BurstReceivePath{Node: node, FromStartP50Ms: nsToMs(r.FromStartP50Ns), FromStartMaxMs: nsToMs(r.FromStartMaxNs)}
	if r.Received >= 100 {
		u.P99Ms, p.FromStartP99Ms = valPtr(nsToMs(r.P99Ns)), valPtr(nsToMs(r.FromStartP99Ns))
	}
	u.Aeron.Receive = p
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
		if _, ok := rows[ts.FirstBurst]; !ok && len(ts.Nodes) > 0 {
			// The servers were sampled around the series, but its client left no figures: it
			// was stopped when the load ended before it wrote them, or it failed.
			n := 0
			for _, smp := range ts.Nodes {
				n = max(n, len(smp)-1)
			}
			d.warnf("%d burst(s) from burst %d on were sent through the engine's burst client, but it left no %s (%s): they are missing from the burst table; "+
				"the client waits up to 10 s after its last burst for the replies, so a run that ends sooner stops it before it writes (see burst-client-*-%d.log; want a longer duration)",
				n, ts.FirstBurst, rundir.BurstStatsFile, filepath.Dir(f), ts.FirstBurst)
		}
		for node, samples := range ts.Nodes {
			for _, smp := range samples {
				for _, r := range smp.BurstReceive {
					if i, ok := rows[r.Burst]; ok {
						receivePath(s.Bursts[i].UDP, node, r)
					}
				}
			}
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
		r.Lost = max(r.Sent-r.Answered, 0)
		r.NotSent = max(r.Planned-r.Sent, 0)
		u.Fail = aeronFailures(r)
		u.Pass = len(u.Fail) == 0
	}
}

// aeronFailures lists what fails an Aeron burst by the micro-burst guide's criteria: zero UDP
// receive-buffer errors, p99 below MaxBurstP99Ms on the receive path (the leader's probe, from
// each message's first offer; the reply's where no probe measured it, and the row says so), no
// loss-gap fill or back-pressure events, and nothing unanswered.
func aeronFailures(r *BurstRow) []string {
	u := r.UDP
	var f []string
	if r.Answered == 0 && u.Received == 0 {
		return []string{"nothing answered"}
	}
	if u.RcvbufErrors > 0 {
		f = append(f, fmt.Sprintf("%d UDP receive-buffer errors", u.RcvbufErrors))
	}
	p99, maxMs, what := u.P99Ms, u.MaxMs, "receive"
	if u.Aeron.Receive == nil {
		p99, maxMs, what = u.Aeron.Reply.P99Ms, u.Aeron.Reply.MaxMs, "reply (no receive-path probe)"
	}
	if p99 != nil && *p99 >= MaxBurstP99Ms {
		f = append(f, fmt.Sprintf("%s p99 %s >= %g ms", what, fmtMs(*p99), MaxBurstP99Ms))
	} else if p99 == nil && maxMs >= MaxBurstP99Ms {
		f = append(f, fmt.Sprintf("%s max %.3g ms >= %g ms (too few messages for a p99)", what, maxMs, MaxBurstP99Ms))
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

// writeAeronBursts is the report's table of bursts through Aeron's ingress: its own columns
// with the declared figures (BurstFigures) it shows placed among them.
func writeAeronBursts(b *strings.Builder, rows []BurstRow) {
	pf := pfTo(b)
	opt := func(v *float64) string {
		if v == nil {
			return "—"
		}
		return fmtMs(*v)
	}
	// The receive path's figures, where the leader's probe measured them.
	recv := func(f func(u *BurstUDP, p *BurstReceivePath) string) func(BurstRow) string {
		return func(b BurstRow) string {
			if p := b.UDP.Aeron.Receive; p != nil {
				return f(b.UDP, p)
			}
			return "—"
		}
	}
	leader := recv(func(u *BurstUDP, p *BurstReceivePath) string {
		return fmt.Sprintf("%s: %d, %d, %s", p.Node, u.Received, u.PeakPerMs, fmtMs(u.AbsorbMs))
	})
	writeTable(b, figureTable(BurstFigures, rows, []Column[BurstRow]{
		col("#", func(b BurstRow) string { return fmt.Sprint(b.UDP.Burst) }),
		col("at", func(b BurstRow) string { return fmtS(b.AtS) }),
		col("size × senders", func(b BurstRow) string { return fmt.Sprintf("%d B × %d", b.UDP.Size, b.UDP.Senders) }),
		col("sent", func(b BurstRow) string { return fmt.Sprint(b.Sent) }),
		col("answered", func(b BurstRow) string { return fmt.Sprint(b.Answered) }),
		showing(col("at the leader: received, peak / 1 ms, absorbed in", func(b BurstRow) string {
			if b.UDP.Aeron.Receive == nil {
				return "— (no probe)"
			}
			return leader(b)
		}), "recv_peak"),
		showing(col("receive p50 / p99 / max", recv(func(u *BurstUDP, _ *BurstReceivePath) string {
			return fmt.Sprintf("%s / %s / %s", fmtMs(u.P50Ms), opt(u.P99Ms), fmtMs(u.MaxMs))
		})), "recv_p99"),
		col("receive p99 from burst start", recv(func(_ *BurstUDP, p *BurstReceivePath) string { return opt(p.FromStartP99Ms) })),
		showing(col("reply p50 / p99 / max", func(b BurstRow) string {
			rp := b.UDP.Aeron.Reply
			return fmt.Sprintf("%s / %s / %s", fmtMs(rp.P50Ms), opt(rp.P99Ms), fmtMs(rp.MaxMs))
		}), "max"),
		col("reply p99 from burst start", func(b BurstRow) string { return opt(b.UDP.Aeron.Reply.FromStartP99Ms) }),
		figCol(BurstFigures, "burst_rcvbuf_errors", "rcvbuf errors"),
		figCol(BurstFigures, "naks", "NAKs sent"),
		figCol(BurstFigures, "aeron_retransmits", "retransmits"),
		figCol(BurstFigures, "aeron_loss_gap_fills", "loss-gap fills"),
		figCol(BurstFigures, "aeron_back_pressure", "back pressure"),
		col("FC under / over", func(b BurstRow) string {
			return fmt.Sprintf("%d / %d", b.UDP.Aeron.Sum[CounterFCUnderRuns], b.UDP.Aeron.Sum[CounterFCOverRuns])
		}),
		showing(col("result", burstResult), "udp_pass"),
		// The client's send peak, the reply's absorption (the table shows the leader's), sent
		// against answered, and the verdict by the receiver's criteria are shown otherwise.
	}, "peak", "absorb", "lost", "pass"), rows)
	passed, probed := 0, 0
	for _, b := range rows {
		if b.UDP.Pass {
			passed++
		}
		if b.UDP.Aeron.Receive != nil {
			probed++
		}
	}
	pf("%d of %d bursts through Aeron's ingress pass (zero UDP receive-buffer errors, p99 below %g ms on the receive path, no loss-gap fill or back-pressure events). "+
		"Each message went from the client node's own media driver into the cluster's ingress, offered in a loop with no pacing. "+
		"The receive path is the micro-burst guide's receiver: a plain subscription on the leader's own ingress stream beside the consensus module's "+
		"(rig.burst.probe), so before consensus; its latency runs from each message's first offer to its arrival there (the guide's send time), "+
		"and from the burst's scheduled start (which also counts the sender's queue ahead of it); absorbed in is first to last arrival. "+
		"The reply is the whole way: consensus on the log, the followers and the service, from first offer to the service's reply; answered counts replies. "+
		"Counters are the media drivers' (every server's and the sender's own) over the burst, as AeronStat reads them; rcvbuf errors is the "+
		"growth of /proc/net/snmp RcvbufErrors on the receiving node (+ the NIC's rx drops from ethtool -S between the same samples, where the node has them).", passed, len(rows), MaxBurstP99Ms)
	if probed < len(rows) {
		pf(" %d of %d bursts have no receive-path figures (no node was started with -D%s=true): their p99 criterion is judged on the reply.", len(rows)-probed, len(rows), "rig.burst.probe")
	}
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
