package analysis

import (
	"fmt"
	"strings"

	"github.com/rig-dev/rig/stats"
)

// Row kinds of what the run's client, hosts and engines' collectors saw: the load generator in
// each fault's window, each node's pressure stalls, each node's GC pauses. Their report.md
// tables are built from these declarations like every other row kind's.

// ClientFaultFigures are the load generator's figures in one fault's window (ClientFault).
var ClientFaultFigures = []RowFigure[ClientFault]{
	countFigure("dials", "dials", "dials", func(f ClientFault) int64 { return f.Dials }),
	countFigure("dial_failures", "failed dials", "dials", func(f ClientFault) int64 { return f.DialFailures }),
	countFigure("reconnects", "reconnects", "reconnects", func(f ClientFault) int64 { return f.Reconnects }),
	countFigure("resent", "resends", "messages", func(f ClientFault) int64 { return f.Resent }),
	countFigure("held", "probes held", "probes", func(f ClientFault) int64 { return f.Held }),
	{Figure: Figure{Key: "longest_hold", Label: "longest hold", Unit: "s", Dir: stats.LowerIsBetter}, Show: fmtSecs,
		Get: func(f ClientFault) (float64, bool) { return f.LongestHoldS, true }},
	countFigure("late", "late outside holds", "probes", func(f ClientFault) int64 { return f.LateConnected }),
}

// countFigure is a count of a row's, lower better, written bare.
func countFigure[R any](key, label, unit string, get func(R) int64) RowFigure[R] {
	return RowFigure[R]{Figure: Figure{Key: key, Label: label, Unit: unit, Dir: stats.LowerIsBetter}, Plain: true,
		Get: func(r R) (float64, bool) { return float64(get(r)), true }}
}

// ClientFaultRows are the load generator's fault windows, where it kept a timeline.
func ClientFaultRows(s *Summary) []ClientFault {
	if s.ClientConn == nil {
		return nil
	}
	return s.ClientConn.Faults
}

// writeClientFaults is report.md's table of the load generator in each fault's window.
func writeClientFaults(b *strings.Builder, rows []ClientFault) {
	writeTable(b, figureTable(ClientFaultFigures, rows, []Column[ClientFault]{
		col("fault", func(f ClientFault) string {
			if f.Node != "" {
				return f.Action + " " + f.Node
			}
			return f.Action
		}),
		col("window", func(f ClientFault) string { return fmtS(f.AtS) + " – " + fmtS(f.ToS) }),
	}), rows)
}

// HostPressureFigures are a node's pressure stalls over the measured window (HostPressure).
var HostPressureFigures = []RowFigure[HostPressure]{
	pressureFigure("cpu_some", "cpu some", func(h HostPressure) float64 { return h.CPUSome }),
	pressureFigure("cpu_full", "cpu full", func(h HostPressure) float64 { return h.CPUFull }),
	pressureFigure("io_some", "io some", func(h HostPressure) float64 { return h.IOSome }),
	pressureFigure("io_full", "io full", func(h HostPressure) float64 { return h.IOFull }),
	pressureFigure("memory_some", "memory some", func(h HostPressure) float64 { return h.MemSome }),
	pressureFigure("memory_full", "memory full", func(h HostPressure) float64 { return h.MemFull }),
}

func pressureFigure(key, label string, get func(HostPressure) float64) RowFigure[HostPressure] {
	return RowFigure[HostPressure]{Figure: Figure{Key: key, Label: label, Unit: "%", Dir: stats.LowerIsBetter},
		Show: func(v float64) string { return fmt.Sprintf("%.1f %%", v) },
		Get:  func(h HostPressure) (float64, bool) { return get(h), true }}
}

// writeHostPressure is report.md's table of each node's pressure stalls.
func writeHostPressure(b *strings.Builder, rows []HostPressure) {
	writeTable(b, figureTable(HostPressureFigures, rows, []Column[HostPressure]{
		col("node", func(h HostPressure) string { return h.Node }),
	}), rows)
}

// GCFigures are a node's GC pauses over the measured window (GCRow).
var GCFigures = []RowFigure[GCRow]{
	countFigure("pauses", "pauses", "pauses", func(r GCRow) int64 { return int64(r.Count) }),
	{Figure: Figure{Key: "longest", Label: "longest", Unit: "ms", Dir: stats.LowerIsBetter}, Get: func(r GCRow) (float64, bool) { return r.LongestMs, true }},
	{Figure: Figure{Key: "total", Label: "total", Unit: "ms", Dir: stats.LowerIsBetter}, Get: func(r GCRow) (float64, bool) { return r.TotalMs, true }},
}

// writeGCPauses is report.md's table of each node's GC pauses.
func writeGCPauses(b *strings.Builder, rows []GCRow) {
	writeTable(b, figureTable(GCFigures, rows, []Column[GCRow]{
		col("node", func(r GCRow) string { return r.Node }),
	}), rows)
}
