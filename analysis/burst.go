package analysis

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// BurstRow is one micro-burst: B messages sent back to back. For a TCP burst the figures are
// the load generator's; for a UDP burst (UDP set) AbsorbMs, MaxLatencyMs and Lost are the
// receiver's, and UDP holds everything the receiver saw.
type BurstRow struct {
	AtS          float64 `json:"at_s"` // the burst's due time
	Sent         int     `json:"sent"`
	Lost         int     `json:"lost"`
	PeakPerMs    int     `json:"peak_per_ms"`    // most messages sent in any 1 ms window (summed over the load generators)
	SendMs       float64 `json:"send_ms"`        // first to last send
	AbsorbMs     float64 `json:"absorb_ms"`      // first send to last reply (UDP: first to last received)
	MaxLatencyMs float64 `json:"max_latency_ms"` // worst message, from the burst's due time (UDP: from its send stamp)
	// Planned is the burst's size as asked; NotSent how many of those were never sent; Answered
	// how many sent got a reply (UDP: how many the receiver got). With nothing answered,
	// absorption and latency mean nothing (the report shows n/a).
	Planned  int `json:"planned,omitempty"`
	NotSent  int `json:"not_sent"`
	Answered int `json:"answered"`

	UDP *BurstUDP `json:"udp,omitempty"`
}

// BurstUDP is a UDP burst as its receiver saw it (the engine's /status?udp=1, docs/wire.md),
// judged by rig's criteria for absorbing a burst: no receive-buffer errors or drops, p99 below
// 1 ms, no loss repair, nothing lost.
type BurstUDP struct {
	Transport     string   `json:"transport,omitempty"` // TransportAeron: through the engine's own client (Aeron holds its figures); empty: rig's UDP ingress
	Burst         uint32   `json:"burst"`               // number in the datagrams
	Size          int      `json:"size"`                // bytes per datagram
	Senders       int      `json:"senders"`
	Receiver      string   `json:"receiver"` // server that received it (the leader)
	Received      uint64   `json:"received"` // unique datagrams
	PeakPerMs     int      `json:"peak_per_ms"`
	AbsorbMs      float64  `json:"absorb_ms"` // first to last received
	P50Ms         float64  `json:"p50_ms"`
	P99Ms         *float64 `json:"p99_ms,omitempty"` // from 100 messages
	MaxMs         float64  `json:"max_ms"`
	Gaps          uint64   `json:"gaps"`
	Naks          uint64   `json:"naks"`
	Repaired      uint64   `json:"repaired"`
	RepairMaxMs   float64  `json:"repair_max_ms"`
	SocketDrops   uint64   `json:"socket_drops"`           // SO_RXQ_OVFL growth over the burst
	RcvbufErrors  uint64   `json:"rcvbuf_errors"`          // /proc/net/snmp Udp RcvbufErrors growth over the burst (whole node)
	InErrors      uint64   `json:"in_errors,omitempty"`    // /proc/net/snmp Udp InErrors growth over the burst (Aeron bursts)
	NICRxDrops    *uint64  `json:"nic_rx_drops,omitempty"` // ethtool -S rx drops over the burst's OS samples (AWS)
	RcvbufAsked   int      `json:"rcvbuf_asked"`
	RcvbufGranted int      `json:"rcvbuf_granted"`
	RmemMax       int      `json:"rmem_max"`
	Pass          bool     `json:"pass"`
	Fail          []string `json:"fail,omitempty"` // why not

	Aeron *BurstAeron `json:"aeron,omitempty"`
}

// MaxBurstP99Ms is a burst's latency bound: a burst whose p99 reaches it fails.
const MaxBurstP99Ms = 1.0

// burstRows reads the bursts from the load generators' stats (the probe process's, in the
// manifest, and any other client node's bursts.json) and, for UDP bursts, the receivers' figures
// from the servers' final status.
func (d *runData) burstRows(s *Summary) {
	var series []rundir.BurstStats
	if d.man.Loadgen != nil {
		series = d.man.Loadgen.Bursts
	}
	for _, f := range d.glob(rundir.RemoteBurstsGlob) {
		var st rundir.BurstStats
		b, err := d.run.ReadFile(f, rundir.BurstStatsFile, rundir.MaxJSONBytes)
		if err == nil && json.Unmarshal(b, &st) == nil {
			series = append(series, st)
		}
		d.warnOutside(err)
	}
	udp := map[uint32]int{}   // burst number -> row
	aeron := map[uint32]int{} // burst number -> row
	for _, st := range series {
		for _, b := range st.Bursts {
			if st.Transport == TransportAeron {
				row := d.aeronRow(st, b)
				if i, ok := aeron[b.Burst]; ok { // the same burst from another client node
					r := &s.Bursts[i]
					r.Sent += row.Sent
					r.Answered += row.Answered
					r.Planned += row.Planned
					r.PeakPerMs += row.PeakPerMs
					r.UDP.Senders += row.UDP.Senders
					r.AbsorbMs = max(r.AbsorbMs, row.AbsorbMs)
					r.MaxLatencyMs = max(r.MaxLatencyMs, row.MaxLatencyMs)
					r.UDP.Aeron.Reply.merge(row.UDP.Aeron.Reply)
					r.UDP.Aeron.Refused += row.UDP.Aeron.Refused
					continue
				}
				aeron[b.Burst] = len(s.Bursts)
				s.Bursts = append(s.Bursts, row)
				continue
			}
			if st.Transport == "udp" {
				if i, ok := udp[b.Burst]; ok { // the same burst from another load generator
					r := &s.Bursts[i]
					r.Sent += b.Sent
					r.Planned += st.Messages * st.Senders
					r.PeakPerMs += b.PeakPerMs
					r.SendMs = max(r.SendMs, nsToMs(b.SendNs))
					r.UDP.Senders += st.Senders
					continue
				}
				udp[b.Burst] = len(s.Bursts)
				s.Bursts = append(s.Bursts, BurstRow{AtS: d.off(b.Due.UnixNano()), Sent: b.Sent, PeakPerMs: b.PeakPerMs,
					SendMs: nsToMs(b.SendNs), Planned: st.Messages * st.Senders,
					UDP: &BurstUDP{Burst: b.Burst, Size: st.Size, Senders: st.Senders}})
				continue
			}
			row := BurstRow{
				AtS: d.off(b.Due.UnixNano()), Sent: b.Sent, Lost: b.Lost, PeakPerMs: b.PeakPerMs,
				SendMs: nsToMs(b.SendNs), AbsorbMs: nsToMs(b.DrainNs), MaxLatencyMs: nsToMs(b.MaxLatencyNs),
				Answered: b.Answered, Planned: st.Messages,
			}
			if st.Messages > b.Sent {
				row.NotSent = st.Messages - b.Sent
			}
			s.Bursts = append(s.Bursts, row)
		}
	}
	for _, i := range udp {
		d.receiverFigures(&s.Bursts[i])
	}
	d.aeronServerFigures(s, aeron)
	sort.SliceStable(s.Bursts, func(i, j int) bool { return s.Bursts[i].AtS < s.Bursts[j].AtS })
}

// receiverFigures fills a UDP burst from the server that received it and judges it.
func (d *runData) receiverFigures(r *BurstRow) {
	u := r.UDP
	var got *engine.UDPBurst
	for _, n := range d.nodes {
		st := d.statuses[n]
		if st == nil || st.UDP == nil {
			continue
		}
		for i := range st.UDP.Bursts {
			if b := &st.UDP.Bursts[i]; b.Burst == u.Burst && (got == nil || b.Received > got.Received) {
				got, u.Receiver = b, n
				u.RcvbufAsked, u.RcvbufGranted, u.RmemMax = st.UDP.RcvbufAsked, st.UDP.RcvbufGranted, st.UDP.RmemMax
			}
		}
	}
	if got != nil {
		u.Received, u.PeakPerMs, u.AbsorbMs = got.Received, got.PeakPerMs, got.AbsorbMs
		u.P50Ms, u.MaxMs = got.LatencyP50Us/1e3, got.LatencyMaxUs/1e3
		if got.Received >= 100 {
			p99 := got.LatencyP99Us / 1e3
			u.P99Ms = &p99
		}
		u.Gaps, u.Naks, u.Repaired, u.RepairMaxMs = got.Gaps, got.Naks, got.Repaired, got.RepairMaxMs
		u.SocketDrops, u.RcvbufErrors = got.SocketDrops, got.RcvbufErrors
		u.NICRxDrops = d.nicDrops(u.Receiver, got.First.UnixNano(), got.Last.UnixNano())
		r.AbsorbMs, r.MaxLatencyMs = got.AbsorbMs, u.MaxMs
	}
	r.Lost = max(r.Sent-int(u.Received), 0)
	r.Answered = int(u.Received)
	r.NotSent = max(r.Planned-r.Sent, 0)
	u.Fail = burstFailures(r, got != nil && got.Closed)
	u.Pass = len(u.Fail) == 0
}

// burstFailures lists what fails a UDP burst by BurstUDP's criteria.
func burstFailures(r *BurstRow, closed bool) []string {
	u := r.UDP
	var f []string
	if u.Received == 0 {
		return []string{"no receiver saw it"}
	}
	if u.RcvbufErrors > 0 {
		f = append(f, fmt.Sprintf("%d UDP receive-buffer errors", u.RcvbufErrors))
	}
	if u.SocketDrops > 0 {
		f = append(f, fmt.Sprintf("%d datagrams dropped by the full socket buffer", u.SocketDrops))
	}
	if u.NICRxDrops != nil && *u.NICRxDrops > 0 {
		f = append(f, fmt.Sprintf("%d NIC rx drops", *u.NICRxDrops))
	}
	switch {
	case u.P99Ms != nil && *u.P99Ms >= MaxBurstP99Ms:
		f = append(f, fmt.Sprintf("p99 %.3g ms >= %g ms", *u.P99Ms, MaxBurstP99Ms))
	case u.P99Ms == nil && u.MaxMs >= MaxBurstP99Ms:
		f = append(f, fmt.Sprintf("max %.3g ms >= %g ms (too few messages for a p99)", u.MaxMs, MaxBurstP99Ms))
	}
	if u.Gaps > 0 {
		f = append(f, fmt.Sprintf("loss repair: %d gaps, %d NAKs, up to %.3g ms", u.Gaps, u.Naks, u.RepairMaxMs))
	}
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("%d of %d never received", r.Lost, r.Sent))
	}
	if !closed {
		f = append(f, "still open at the end of the run")
	}
	return f
}

// nicDrops sums a node's ENA rx drops over the OS samples whose interval overlaps [from, to]
// (nil when the node's samples have no NIC counters: not an AWS ENA node).
func (d *runData) nicDrops(node string, from, to int64) *uint64 {
	var sum uint64
	seen := false
	for _, f := range d.glob(node + "/" + rundir.SamplesDir + "/*" + rundir.SamplesExt) {
		samples := d.samples(f)
		for _, smp := range samples {
			if len(smp.NICs) == 0 {
				continue
			}
			seen = true
			end := smp.Time.UnixNano()
			start := end - int64(smp.Interval*1e9)
			if end < from || start > to {
				continue
			}
			for _, n := range smp.NICs {
				sum += n.RxDropsDelta
			}
		}
	}
	if !seen {
		return nil
	}
	return &sum
}

// udpIngress reads each server's UDP receive buffer, asked and granted, from its final status.
func (d *runData) udpIngress(s *Summary) {
	for _, n := range d.nodes {
		st := d.statuses[n]
		if st == nil || st.UDP == nil {
			continue
		}
		if s.UDPIngress == nil {
			s.UDPIngress = map[string]UDPIngress{}
		}
		u := st.UDP
		s.UDPIngress[n] = UDPIngress{Asked: u.RcvbufAsked, Granted: u.RcvbufGranted, RmemMax: u.RmemMax,
			Clamped: u.RcvbufAsked > 0 && u.RcvbufGranted < 2*u.RcvbufAsked}
	}
}

// notApplied names the settings that had no effect because they were never applied: every
// kernel tuning setting of a run whose tuning was skipped.
func (d *runData) notApplied(s *Summary) {
	reason := d.man.TuningSkipped
	for _, w := range d.man.Warnings { // run folders from before the manifest said it
		if r, ok := strings.CutPrefix(w, "tuning skipped: "); ok && reason == "" {
			reason = r
		}
	}
	if reason == "" || !d.hasPB {
		return
	}
	for _, t := range d.pb.Tuning {
		s.NotApplied = append(s.NotApplied, NotApplied{Setting: "tuning." + t.Key, Value: t.Value, Reason: reason})
	}
}

// sampleFigures reads every node's OS samples: UDP receive-buffer drops, and how often the
// node's own load average exceeded its CPUs (the controller's load says nothing about a remote
// node's).
func (d *runData) sampleFigures(s *Summary) []string {
	var warn []string
	for _, f := range d.glob(rundir.SamplesGlob) {
		node := path.Base(path.Dir(path.Dir(f)))
		st, ok := readSampleFile(d.samples(f))
		if !ok {
			continue
		}
		if s.UDPRcvbufErrors == nil {
			s.UDPRcvbufErrors = map[string]uint64{}
		}
		s.UDPRcvbufErrors[node] += st.rcvbuf
		// On the local target every node is this machine: the run-level load warning says it once.
		if st.overloaded > 0 && d.man.Target != "local" {
			warn = append(warn, fmt.Sprintf("%s: load average above its %d CPUs in %d of %d OS samples (up to %.2f): timings from it are upper bounds", node, st.cpus, st.overloaded, st.n, st.maxLoad))
		}
	}
	return warn
}

type sampleFile struct {
	n, overloaded, cpus int
	rcvbuf              uint64
	maxLoad             float64
}

func readSampleFile(samples []rundir.Sample) (sampleFile, bool) {
	var out sampleFile
	for _, s := range samples {
		out.n++
		out.rcvbuf += s.UDP.RcvbufErrorsDelta
		out.cpus = max(out.cpus, s.CPUs)
		out.maxLoad = max(out.maxLoad, s.Load.Load1)
		if s.Load.Overloaded {
			out.overloaded++
		}
	}
	return out, out.n > 0
}

// writeBursts is the report's micro-burst section: TCP bursts as the load generator saw them,
// UDP bursts as their receiver did, each judged; each transport's table places the declared
// figures (BurstFigures) it shows, and any other its bursts have follows its own columns.
func writeBursts(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	var tcp, udp, aeron []BurstRow
	for _, b := range s.Bursts {
		if b.UDP != nil && b.UDP.Transport == TransportAeron {
			aeron = append(aeron, b)
		} else if b.UDP != nil {
			udp = append(udp, b)
		} else {
			tcp = append(tcp, b)
		}
	}
	if len(aeron) > 0 {
		writeAeronBursts(b, aeron)
	}
	if len(udp) > 0 {
		writeTable(b, figureTable(BurstFigures, udp, []Column[BurstRow]{
			col("#", func(b BurstRow) string { return fmt.Sprint(b.UDP.Burst) }),
			col("at", func(b BurstRow) string { return fmtS(b.AtS) }),
			col("size × senders", func(b BurstRow) string { return fmt.Sprintf("%d B × %d", b.UDP.Size, b.UDP.Senders) }),
			col("sent", func(b BurstRow) string { return fmt.Sprint(b.Sent) }),
			col("received", func(b BurstRow) string { return fmt.Sprint(b.UDP.Received) }),
			figCol(BurstFigures, "recv_peak", "peak / 1 ms"),
			figCol(BurstFigures, "absorb", ""),
			col("p50", func(b BurstRow) string { return fmtMs(b.UDP.P50Ms) }),
			figCol(BurstFigures, "recv_p99", "p99"),
			figCol(BurstFigures, "max", "max"),
			col("gaps", func(b BurstRow) string { return fmt.Sprint(b.UDP.Gaps) }),
			figCol(BurstFigures, "naks", ""),
			col("repair", func(b BurstRow) string {
				if b.UDP.Gaps == 0 {
					return "—"
				}
				return fmtMs(b.UDP.RepairMaxMs)
			}),
			figCol(BurstFigures, "burst_rcvbuf_errors", "rcvbuf errors"),
			showing(col("result", burstResult), "udp_pass"),
		}, "peak", "lost", "pass"), udp) // the sender's peak; sent against received; the receiver's verdict
		passed, tailOnly := 0, 0
		for _, b := range udp {
			u := b.UDP
			if u.Pass {
				passed++
			} else if len(u.Fail) == 1 && u.P99Ms != nil && *u.P99Ms >= MaxBurstP99Ms { // the p99 is the one failure
				tailOnly++
			}
		}
		pf("%d of %d UDP bursts pass (zero receive-buffer errors, p99 below %g ms, no loss repair). ", passed, len(udp), MaxBurstP99Ms)
		if tailOnly > 0 {
			pf("%d failed on p99 alone, with nothing dropped or repaired: the buffer held, and the tail is how promptly this host runs "+
				"the sender and the receive thread; `rig bench loadgen` prints a bare receiver's p99 for the same burst on the same host. ", tailOnly)
		}
		pf("Every figure is the receiver's (the leader's UDP ingress): peak / 1 ms is the most datagrams received in any 1 ms window, " +
			"absorbed in is first to last received, latency is in-order delivery minus the sender's send stamp (so a repaired gap shows in it), " +
			"rcvbuf errors is the growth of /proc/net/snmp RcvbufErrors over the burst on that node.")
		for _, n := range slices.Sorted(maps.Keys(s.UDPIngress)) {
			in := s.UDPIngress[n]
			if in.Asked == 0 {
				pf(" %s: SO_RCVBUF not set, the kernel gave %s.", n, fmtBytes(int64(in.Granted)))
				continue
			}
			pf(" %s: SO_RCVBUF asked %s, got %s", n, fmtBytes(int64(in.Asked)), fmtBytes(int64(in.Granted)))
			if in.Clamped {
				pf(": net.core.rmem_max (%s) clamps it", fmtBytes(int64(in.RmemMax)))
			}
			pf(".")
		}
		pf("\n\n")
	}
	if len(tcp) > 0 {
		writeTable(b, figureTable(BurstFigures, tcp, []Column[BurstRow]{
			numberCol[BurstRow](),
			col("at", func(b BurstRow) string { return fmtS(b.AtS) }),
			col("planned", func(b BurstRow) string {
				if b.Planned <= 0 {
					return "—"
				}
				return fmt.Sprint(b.Planned)
			}),
			col("sent", func(b BurstRow) string { return fmt.Sprint(b.Sent) }),
			col("not sent", func(b BurstRow) string { return fmt.Sprint(b.NotSent) }),
			col("answered", func(b BurstRow) string { return fmt.Sprint(b.Answered) }),
			figCol(BurstFigures, "lost", ""),
			figCol(BurstFigures, "peak", "peak / 1 ms"),
			col("send", func(b BurstRow) string { return fmtMs(b.SendMs) }),
			figCol(BurstFigures, "absorb", ""),
			figCol(BurstFigures, "max", "max latency"),
		}, "pass"), tcp) // lost says it
		pf("TCP bursts. Planned, sent, not sent, answered and lost are counted apart, as the load generator reported them. " +
			"Peak / 1 ms: the most messages the load generator sent in any 1 ms window. Absorbed in: first send to last reply. " +
			"Max latency counts from the burst's due time.\n\n")
	}
	if len(s.UDPRcvbufErrors) > 0 {
		pf("UDP receive-buffer errors over the whole run (/proc/net/snmp RcvbufErrors, OS samples):")
		for _, n := range sortedKeys(s.UDPRcvbufErrors) {
			pf(" %s %d;", n, s.UDPRcvbufErrors[n])
		}
		pf(" on the local target the nodes share one machine, so each counts every drop.\n\n")
	}
}

// burstResult is a UDP burst's verdict by its receiver's criteria, and why it failed.
func burstResult(b BurstRow) string {
	if b.UDP.Pass {
		return "pass"
	}
	return "**fail**: " + strings.Join(b.UDP.Fail, "; ")
}
