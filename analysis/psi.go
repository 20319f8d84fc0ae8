package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// Pressure stall information (/proc/pressure, recorded by the scheduler sampler beside the
// threads' run-queue waits): the time at least one task (some) or every non-idle task (full)
// was stalled on a CPU, on I/O or on memory. It is a node-level series: an excursion is named
// psi_cpu, psi_io or psi_memory where the stall's share above the run's usual level covers
// causeCoverShare of it (spans), and the run's
// stall shares are a run-level fact — on a 2-CPU local target, how long the host's CPUs were
// saturated explains much of what no engine thread's wait does.

// HostPressure is one node's pressure stall shares over the measured window (summary.json's
// host_pressure); on the local target one row for the machine (node HostNode).
type HostPressure struct {
	Node      string  `json:"node"`
	MeasuredS float64 `json:"measured_s"` // the part of [warm-up end, load end] the sampler covered
	CPUSome   float64 `json:"cpu_some_pct"`
	CPUFull   float64 `json:"cpu_full_pct"`
	IOSome    float64 `json:"io_some_pct"`
	IOFull    float64 `json:"io_full_pct"`
	MemSome   float64 `json:"memory_some_pct"`
	MemFull   float64 `json:"memory_full_pct"`
}

// psiResource is one pressure file: the cause it names and its some and full stall of a sample.
type psiResource struct {
	cause      CauseKind
	name       string
	some, full func(rundir.SchedPSI) uint64
}

var psiResources = []psiResource{
	{CausePSICPU, "cpu", func(p rundir.SchedPSI) uint64 { return p.CPUSomeUs }, func(p rundir.SchedPSI) uint64 { return p.CPUFullUs }},
	{CausePSIIO, "io", func(p rundir.SchedPSI) uint64 { return p.IOSomeUs }, func(p rundir.SchedPSI) uint64 { return p.IOFullUs }},
	{CausePSIMemory, "memory", func(p rundir.SchedPSI) uint64 { return p.MemSomeUs }, func(p rundir.SchedPSI) uint64 { return p.MemFullUs }},
}

// psiSeries is one node's scheduler samples that carry pressure figures, sorted by AtNs.
type psiSeries struct {
	node    string
	samples []rundir.SchedSample
}

// psiOf keeps, per node, the samples with pressure figures; on the local target every node's
// sampler reads the same /proc/pressure, so one node's series stands for the machine (HostNode).
func psiOf(byNode map[string][]rundir.SchedSample, local bool) []psiSeries {
	var out []psiSeries
	for _, node := range sortedKeys(byNode) {
		var ss []rundir.SchedSample
		for _, smp := range byNode[node] {
			if smp.PSI != nil {
				ss = append(ss, smp)
			}
		}
		if len(ss) == 0 {
			continue
		}
		slices.SortFunc(ss, func(a, b rundir.SchedSample) int { return cmp.Compare(a.AtNs, b.AtNs) })
		if local {
			return []psiSeries{{node: HostNode, samples: ss}}
		}
		out = append(out, psiSeries{node: node, samples: ss})
	}
	return out
}

// stallSpan is a sample's stall over its interval at the share stall/interval: where in the
// interval it fell is not known (as for the run-queue waits, rundir.SchedSample.Spans).
func stallSpan(smp rundir.SchedSample, us uint64) wspan {
	if smp.IntervalNs <= 0 {
		return wspan{}
	}
	return wspan{span{smp.AtNs - smp.IntervalNs, smp.AtNs}, min(float64(us)*1e3/float64(smp.IntervalNs), 1)}
}

// hostPressure is each series' stall shares over [warm-up end, load end], the part of it the
// sampler covered (a sample ending in it counts whole).
func (d *runData) hostPressure(ps []psiSeries) []HostPressure {
	var out []HostPressure
	for _, s := range ps {
		var from, to int64
		var sum [6]uint64
		for _, smp := range s.samples {
			if smp.AtNs <= d.warmupEnd || (d.loadEnd > 0 && smp.AtNs > d.loadEnd) {
				continue
			}
			if from == 0 {
				from = max(smp.AtNs-smp.IntervalNs, d.warmupEnd)
			}
			to = smp.AtNs
			for i, r := range psiResources {
				sum[2*i] += r.some(*smp.PSI)
				sum[2*i+1] += r.full(*smp.PSI)
			}
		}
		if to <= from {
			continue
		}
		pct := func(us uint64) float64 { return math.Round(1000*float64(us)*1e3/float64(to-from)) / 10 }
		out = append(out, HostPressure{Node: s.node, MeasuredS: math.Round(float64(to-from)/1e6) / 1e3,
			CPUSome: pct(sum[0]), CPUFull: pct(sum[1]), IOSome: pct(sum[2]), IOFull: pct(sum[3]), MemSome: pct(sum[4]), MemFull: pct(sum[5])})
	}
	return out
}

// SourcePSI is the pressure stalls' source in the tables of where the time went.
const SourcePSI = "psi"

// spans are the series' stalls as cause spans: per sample and resource, the some stall over the
// sample's interval at its share (stallSpan), with the full stall beside it for the evidence.
// A stall explains an interval only by what it stood above its run's usual level (base, the
// median sample's share): on a host saturated all run long a stall is in every interval, and
// naming it in each would explain none. So a span covers its share above base, and names
// psi_cpu, psi_io or psi_memory where that covers causeCoverShare of an interval.
func (s psiSeries) spans(base []float64) []causeSpan {
	var out []causeSpan
	for i := range s.samples {
		smp := &s.samples[i]
		var x *spanExtra
		for ri, r := range psiResources {
			c := stallSpan(*smp, r.some(*smp.PSI))
			if c.w <= 0 {
				continue
			}
			if x == nil {
				x = &spanExtra{psi: smp}
			}
			sp := causeSpan{at: c.from, dur: c.to - c.from, cause: string(r.cause), source: SourcePSI, w: c.w, counted: true, level: true, x: x}
			if above := c.w - base[ri]; above > 0 {
				sp.cover, sp.names = above, r.cause
			}
			out = append(out, sp)
		}
	}
	return out
}

// usual is each resource's usual stall share over [from, to]: the median of its samples' some
// shares (0 where none was taken there).
func (s psiSeries) usual(from, to int64) []float64 {
	out := make([]float64, len(psiResources))
	for ri, r := range psiResources {
		var ws []float64
		for _, smp := range s.samples {
			if smp.AtNs <= from || (to > 0 && smp.AtNs > to) {
				continue
			}
			ws = append(ws, stallSpan(smp, r.some(*smp.PSI)).w)
		}
		if len(ws) > 0 {
			out[ri] = stats.Median(ws)
		}
	}
	return out
}

// share is the some stall share of resource name.
func (h HostPressure) share(name string) float64 {
	switch name {
	case "cpu":
		return h.CPUSome
	case "io":
		return h.IOSome
	}
	return h.MemSome
}

// pressureSection is report.md's run-level pressure stall fact.
func pressureSection(s *Summary) string {
	if len(s.HostPressure) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Host pressure\n\n")
	for _, h := range s.HostPressure {
		who := h.Node + "'s"
		if h.Node == HostNode {
			who = "The host's"
		}
		fmt.Fprintf(&b, "%s CPUs were saturated %.1f %% of the run (some task waiting for a CPU, over %s measured).\n", who, h.CPUSome, fmtS(h.MeasuredS))
	}
	b.WriteString("\n")
	writeHostPressure(&b, s.HostPressure)
	b.WriteString("Pressure stall information (/proc/pressure) over [warm-up end, load end]: some = at least one task stalled on the resource, full = every non-idle task at once. " +
		"An excursion is named psi_cpu, psi_io or psi_memory where the some stall's share above the run's usual level (its median sample's) covers at least half of it; on the local target every node is this machine (host).\n\n")
	return b.String()
}
