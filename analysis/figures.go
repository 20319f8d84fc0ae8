package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/stats"
)

// Figure is one figure a row type declares, once: its stable key (summary.json's pooled
// figures, the sweep's metric keys and plot files, rig compare), its label (report.md's column,
// the sweep's row), its unit, which way is better, and whether it is a headline (tested against
// the baseline and plotted against each axis). MeanCI pools it as mean ± stdev with its 95 % CI
// (a gap that varies run to run around a timeout) rather than median [min–max].
type Figure struct {
	Key      string
	Label    string
	Unit     string
	Dir      stats.Direction
	Headline bool
	MeanCI   bool
}

// Format writes a value of the figure in report.md: milliseconds as the report writes every
// duration (µs below 1 ms, s from 1 s), anything else with its unit.
func (f Figure) Format(v float64) string {
	switch f.Unit {
	case "ms":
		return fmtMs(v)
	case "s":
		return fmtS(v)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if a := math.Abs(v); a != math.Trunc(a) {
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if f.Unit == "" {
		return s
	}
	return s + " " + f.Unit
}

// RowFigure is a Figure read from one row of type R; ok is false where the row has none. Marks,
// if set, are what report.md writes before and after a row's value (a bound, a footnote); None,
// if set, what it writes for a row without one (else "—"). Plain writes the bare number (a count
// whose column head says what it counts). NoColumn: report.md's table shows the figure in
// another form (per node, or as a table of its own), so it has no column there; it is pooled,
// in the sweep, rig compare and the history index all the same. Show, if set, writes a value in
// report.md where Format would not say it as the table does (a share to whole percent, bytes).
type RowFigure[R any] struct {
	Figure
	Get      func(R) (v float64, ok bool)
	Marks    func(R) (before, after string)
	None     func(R) string
	Show     func(v float64) string
	Plain    bool
	NoColumn bool
}

// Cell is a row's value of f as report.md writes it.
func (f RowFigure[R]) Cell(r R) string {
	v, ok := f.Get(r)
	if !ok {
		if f.None != nil {
			return f.None(r)
		}
		return "—"
	}
	s := f.Format(v)
	switch {
	case f.Show != nil:
		s = f.Show(v)
	case f.Plain:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	if f.Marks != nil {
		before, after := f.Marks(r)
		s = before + s + after
	}
	return s
}

// Values reads f from every row that has it.
func (f RowFigure[R]) Values(rows []R) []float64 {
	var out []float64
	for _, r := range rows {
		if v, ok := f.Get(r); ok {
			out = append(out, v)
		}
	}
	return out
}

// ms reads an optional figure in milliseconds.
func ms[R any](get func(R) *float64) func(R) (float64, bool) {
	return func(r R) (float64, bool) {
		if p := get(r); p != nil {
			return *p, true
		}
		return 0, false
	}
}

// Pooled is one run's rows pooled, figure by figure, in the order the row type declares them:
// summary.json writes it as an object keyed "<key>_<unit>".
type Pooled []PooledFigure

// PooledFigure is one figure pooled over a run's rows.
type PooledFigure struct {
	Figure
	stats.Sample
}

// pool describes every figure of figs over rows.
func pool[R any](figs []RowFigure[R], rows []R) Pooled {
	out := make(Pooled, 0, len(figs))
	for _, f := range figs {
		out = append(out, PooledFigure{Figure: f.Figure, Sample: stats.Describe(f.Values(rows))})
	}
	return out
}

// name is the figure's name in summary.json: its key and unit, the unit's "/" read as "per",
// "%" as "pct" and its spaces as "_" (peak_per_ms, naks_per_burst, covered_pct).
func (p PooledFigure) name() string {
	if p.Unit == "" {
		return p.Key
	}
	return p.Key + "_" + unitName.Replace(p.Unit)
}

var unitName = strings.NewReplacer("/", "per_", "%", "pct", " ", "_")

// MarshalJSON writes the figures in their declared order.
func (p Pooled) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.name())
		v, err := json.Marshal(f.Sample)
		if err != nil {
			return nil, fmt.Errorf("pooled %s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decode reads pooled figures back by name, against figs, the declared figures of their kind.
func (p *Pooled) decode(b []byte, figs []Figure) error {
	var m map[string]stats.Sample
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = (*p)[:0]
	for _, f := range figs {
		pf := PooledFigure{Figure: f}
		if s, ok := m[pf.name()]; ok {
			pf.Sample = s
			*p = append(*p, pf)
			delete(m, pf.name())
		}
	}
	for _, k := range sortedKeys(m) {
		*p = append(*p, PooledFigure{Figure: Figure{Key: k}, Sample: m[k]})
	}
	return nil
}

// Get is the pooled figure of key.
func (p Pooled) Get(key string) (stats.Sample, bool) {
	for _, f := range p {
		if f.Key == key {
			return f.Sample, true
		}
	}
	return stats.Sample{}, false
}

// HandOffFigures are a leader hand-off's figures as the step-down guide defines them
// (handoff.go), declared once: the step-down table's (StepDownFigures) and every hand-off's.
// The service gap is the guide's metric of record.
var HandOffFigures = []RowFigure[HandOffTimes]{
	{Figure: Figure{Key: "service_gap", Label: "service gap", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true, MeanCI: true}, Get: ms(func(r HandOffTimes) *float64 { return r.ServiceGapMs }),
		Marks: func(r HandOffTimes) (before, after string) {
			if r.ServiceGapFrom == GapFromProbes {
				after = "²"
			}
			return "", after
		}},
	{Figure: Figure{Key: "detect", Label: "detection", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r HandOffTimes) *float64 { return r.DetectMs })},
	{Figure: Figure{Key: "elect", Label: "election", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r HandOffTimes) *float64 { return r.ElectMs })},
	{Figure: Figure{Key: "client_learn", Label: "client learns", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r HandOffTimes) *float64 { return r.ClientLearnMs })},
}

// StepDownFigures are a step-down's figures: report.md's columns, the sweep's step-down table,
// its plots and rig compare. The worst probe latency in the step-down's window (summary.json
// keeps its older names, gap and client_gap_ms) is beside the hand-off's figures; a failover's
// client gap is another measure, the longest silence between replies (FailoverFigures).
var StepDownFigures = append([]RowFigure[StepDownRow]{
	{Figure: Figure{Key: "new_leader", Label: "new leader after", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r StepDownRow) *float64 { return r.NewLeaderMs })},
	{Figure: Figure{Key: "gap", Label: "worst probe", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true, MeanCI: true}, Get: ms(func(r StepDownRow) *float64 { return r.ClientGapMs }),
		Marks: func(r StepDownRow) (before, after string) {
			if r.GapLowerBound {
				before = "≥ "
			}
			if r.OverlapSnapshot {
				after += "¹"
			}
			if r.UnplannedLeaderChange {
				after += " ⚠ unplanned leader change"
			}
			return before, after
		}},
}, lift(HandOffFigures, func(r StepDownRow) HandOffTimes { return r.HandOffTimes })...)

// lift declares figures of a part (S) as figures of the rows that hold it (R).
func lift[R, S any](figs []RowFigure[S], part func(R) S) []RowFigure[R] {
	out := make([]RowFigure[R], 0, len(figs))
	for _, f := range figs {
		g := RowFigure[R]{Figure: f.Figure, Get: func(r R) (float64, bool) { return f.Get(part(r)) }, Show: f.Show, Plain: f.Plain, NoColumn: f.NoColumn}
		if f.Marks != nil {
			g.Marks = func(r R) (string, string) { return f.Marks(part(r)) }
		}
		if f.None != nil {
			g.None = func(r R) string { return f.None(part(r)) }
		}
		out = append(out, g)
	}
	return out
}

// RestartFigures are a relaunch's figures beside its phases and latency windows.
var RestartFigures = []RowFigure[RestartRow]{
	{Figure: Figure{Key: "launch_to_ready", Label: "launch → ready", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, Get: ms(func(r RestartRow) *float64 { return r.LaunchToReadyMs }),
		None: func(r RestartRow) string {
			if r.RelaunchS == nil {
				return "—"
			}
			return fmt.Sprintf("never ready (still %s at the end)", r.OpenPhase)
		}},
}

// BurstFigures are a micro-burst's figures; a UDP burst's receiver figures are absent from a
// TCP burst. report.md's burst table of each transport places those it shows (writeBursts).
var BurstFigures = []RowFigure[BurstRow]{
	{Figure: Figure{Key: "peak", Label: "peak", Unit: "/ms", Dir: stats.Neutral}, Plain: true, Get: func(b BurstRow) (float64, bool) { return float64(b.PeakPerMs), true }},
	{Figure: Figure{Key: "absorb", Label: "absorbed in", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, Get: func(b BurstRow) (float64, bool) {
		return b.AbsorbMs, b.Answered > 0 // nothing answered: no absorption to speak of
	}, None: func(BurstRow) string { return "n/a (nothing answered)" }},
	{Figure: Figure{Key: "max", Label: "worst message", Unit: "ms", Dir: stats.LowerIsBetter}, Get: func(b BurstRow) (float64, bool) {
		return b.MaxLatencyMs, b.Answered > 0
	}, None: func(BurstRow) string { return "n/a" }},
	{Figure: Figure{Key: "lost", Label: "lost", Unit: "messages", Dir: stats.LowerIsBetter}, Plain: true, Get: func(b BurstRow) (float64, bool) { return float64(b.Lost), true }},
	// UDP bursts: the receiver's figures and the verdict by BurstUDP's criteria.
	{Figure: Figure{Key: "recv_peak", Label: "peak at receiver", Unit: "/ms", Dir: stats.Neutral}, Plain: true, Get: udpFig(func(u *BurstUDP) float64 { return float64(u.PeakPerMs) })},
	{Figure: Figure{Key: "recv_p99", Label: "p99 at receiver", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, Get: func(b BurstRow) (float64, bool) {
		if b.UDP == nil || b.UDP.P99Ms == nil {
			return 0, false
		}
		return *b.UDP.P99Ms, true
	}},
	{Figure: Figure{Key: "burst_rcvbuf_errors", Label: "rcvbuf errors per burst", Unit: "datagrams", Dir: stats.LowerIsBetter}, Plain: true,
		Get: udpFig(func(u *BurstUDP) float64 { return float64(u.RcvbufErrors) }),
		Marks: func(b BurstRow) (before, after string) {
			if b.UDP != nil && b.UDP.NICRxDrops != nil {
				after = fmt.Sprintf(" (+%d NIC)", *b.UDP.NICRxDrops)
			}
			return "", after
		}},
	{Figure: Figure{Key: "naks", Label: "NAKs", Unit: "per burst", Dir: stats.LowerIsBetter}, Plain: true, Get: udpFig(func(u *BurstUDP) float64 { return float64(u.Naks) })},
	// Bursts through Aeron's ingress: the media drivers' own counters, summed over the nodes.
	{Figure: Figure{Key: "aeron_retransmits", Label: "Aeron retransmits", Unit: "per burst", Dir: stats.LowerIsBetter}, Plain: true, Get: aeronFig(CounterRetransmits)},
	{Figure: Figure{Key: "aeron_loss_gap_fills", Label: "Aeron loss-gap fills", Unit: "per burst", Dir: stats.LowerIsBetter}, Plain: true, Get: aeronFig(CounterLossGapFills)},
	{Figure: Figure{Key: "aeron_back_pressure", Label: "Aeron back-pressure events", Unit: "per burst", Dir: stats.LowerIsBetter}, Plain: true, Get: aeronFig(CounterBackPressure),
		Marks: func(b BurstRow) (before, after string) {
			if b.UDP != nil && b.UDP.Aeron != nil {
				after = fmt.Sprintf(" (%d offers refused)", b.UDP.Aeron.Refused)
			}
			return "", after
		}},
	{Figure: Figure{Key: "udp_pass", Label: "passed (receiver criteria)", Unit: "share", Dir: stats.HigherIsBetter}, Get: udpFig(func(u *BurstUDP) float64 {
		if u.Pass {
			return 1
		}
		return 0
	})},
	{Figure: Figure{Key: "pass", Label: "passed (nothing lost)", Unit: "share", Dir: stats.HigherIsBetter}, Get: func(b BurstRow) (float64, bool) {
		if b.Lost == 0 {
			return 1, true
		}
		return 0, true
	}},
}

// aeronFig is one of Aeron's counters over a burst through its ingress; other bursts have none.
func aeronFig(counter string) func(BurstRow) (float64, bool) {
	return func(b BurstRow) (float64, bool) {
		if b.UDP == nil || b.UDP.Aeron == nil {
			return 0, false
		}
		return float64(b.UDP.Aeron.Sum[counter]), true
	}
}

// udpFig is a UDP burst's receiver figure; TCP bursts have none.
func udpFig(f func(*BurstUDP) float64) func(BurstRow) (float64, bool) {
	return func(b BurstRow) (float64, bool) {
		if b.UDP == nil {
			return 0, false
		}
		return f(b.UDP), true
	}
}
