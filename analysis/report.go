package analysis

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/rundir"

	"github.com/rig-dev/rig/internal/mdtext"
)

// writeStages: where the run's time went, against the estimate `rig validate` made for it, and
// where its book came from.
func writeStages(b *strings.Builder, s *Summary) {
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(s.Stages) > 0 {
		// The stages, then their total (which has no ratio or source of its own).
		type stage struct {
			rundir.StageTime
			total bool
		}
		var rows []stage
		var est, act float64
		for _, st := range s.Stages {
			rows = append(rows, stage{StageTime: st})
			est += st.EstimateS
			if st.ActualS != nil {
				act += *st.ActualS
			}
		}
		rows = append(rows, stage{StageTime: rundir.StageTime{Name: "**total**", EstimateS: est, ActualS: &act}, total: true})
		writeTable(b, []Column[stage]{
			col("stage", func(st stage) string { return st.Name }),
			col("estimate", func(st stage) string { return fmtS(st.EstimateS) }),
			col("actual", func(st stage) string {
				if st.ActualS == nil {
					return "—"
				}
				return fmtS(*st.ActualS)
			}),
			col("actual / estimate", func(st stage) string {
				switch {
				case st.total:
					return ""
				case st.ActualS == nil || st.EstimateS <= 0:
					return "—"
				}
				return fmt.Sprintf("%.2f", *st.ActualS/st.EstimateS)
			}),
			col("estimate from", func(st stage) string {
				if st.total {
					return ""
				}
				return orDash(st.From)
			}),
		}, rows)
	}
	if parts := overheadParts(s); len(parts) > 0 {
		pf("%s (the timeline is the playbook's duration; the rest is start-up, preload, settle, stop and collection).\n\n", strings.Join(parts, " · "))
	}
	if bk := s.Book; bk != nil {
		switch {
		case bk.Reused:
			by := "an earlier run"
			if bk.BuiltBy != "" {
				by = "run " + bk.BuiltBy
			}
			pf("Book: %s resting orders **reused** — stored book %s (first built by %s) installed in every server's snapshots folder, not preloaded; state hash %s.\n\n",
				fmtCount(bk.Orders), mdtext.Code(bk.Key), mdtext.Inline(by), mdtext.Code(orDash(bk.StateHash)))
		case bk.Stored:
			pf("Book: %s resting orders preloaded through the log; stored as %s (state hash %s, written in %s) for later runs with the same book.\n\n",
				fmtCount(bk.Orders), mdtext.Code(bk.Key), mdtext.Code(orDash(bk.StateHash)), fmtS(bk.StoreS))
		default:
			pf("Book: %s resting orders preloaded through the log (book %s); not stored: %s.\n\n", fmtCount(bk.Orders), mdtext.Code(bk.Key), mdtext.Inline(orDash(bk.NotStored)))
		}
	}
}

func plotTitle(rel string) string {
	switch rel {
	case PlotLatency:
		return "Probe latency over time, with event markers"
	case PlotRestarts:
		return "Restart phases from relaunch"
	case PlotNodes:
		return "Engine phase per node over the run"
	case PlotDisk:
		return "Disk write throughput per server, with event markers"
	case PlotHandOff:
		return "Leader hand-offs: the client and each server on one clock, the service gap marked"
	}
	return rel
}

func settingsLine(s *Summary) string {
	st := s.Settings
	var parts []string
	parts = append(parts, fmt.Sprintf("%d server node(s)", st.ServerNodes))
	if st.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", st.CPUs))
	}
	if len(st.LoadAvgStart) > 0 || len(st.LoadAvgEnd) > 0 {
		parts = append(parts, fmt.Sprintf("load average %s at start, %s at end (1 min)", loadCell(st.LoadAvgStart), loadCell(st.LoadAvgEnd)))
	}
	if st.LoadS > 0 {
		parts = append(parts, fmt.Sprintf("load %s, warm-up %s", fmtS(st.LoadS), fmtS(st.WarmupS)))
	} else {
		parts = append(parts, "the load never started")
	}
	if st.ProbeRate > 0 {
		rate := fmt.Sprintf("%g probes/s measured", st.ProbeRate)
		if st.PlannedProbeRate != nil {
			rate += fmt.Sprintf(" (%g/s planned)", *st.PlannedProbeRate)
		}
		parts = append(parts, rate)
	}
	if st.PreloadOrders != nil {
		parts = append(parts, "book "+fmtCount(*st.PreloadOrders)+" orders")
	}
	if st.SyncLevel != nil {
		parts = append(parts, fmt.Sprintf("sync level %d", *st.SyncLevel))
	}
	if st.SnapshotBlock != nil && *st.SnapshotBlock > 0 {
		parts = append(parts, "snapshot block "+fmtBytes(*st.SnapshotBlock))
	}
	if st.EncodeThreads != nil && *st.EncodeThreads > 0 {
		parts = append(parts, fmt.Sprintf("encode ×%d", *st.EncodeThreads))
	}
	if len(st.NotAsAsked) > 0 {
		parts = append(parts, "**not as asked: "+strings.Join(st.NotAsAsked, "; ")+"**")
	}
	return strings.Join(parts, " · ")
}

func loadCell(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v[0])
}

func windowSpan(w Window, loadS float64) string {
	switch {
	case w.Open && w.ToS >= loadS:
		return fmt.Sprintf("%s – end (%s, open)", fmtS(w.FromS), fmtMs((w.ToS-w.FromS)*1e3))
	case w.Open:
		return fmt.Sprintf("%s – %s (%s, open: cut by the next kill)", fmtS(w.FromS), fmtS(w.ToS), fmtMs((w.ToS-w.FromS)*1e3))
	}
	return fmt.Sprintf("%s – %s (%s)", fmtS(w.FromS), fmtS(w.ToS), fmtMs((w.ToS-w.FromS)*1e3))
}

// pctCell shows a tail percentile, or why it is not shown.
func pctCell(v *float64, n, minN int) string {
	switch {
	case n == 0:
		return "—"
	case v == nil || n < minN:
		return fmt.Sprintf("n/a (n<%d)", minN)
	}
	return usCell(v)
}

func usCell(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmtMs(*v / 1e3)
}

// fmtMs prints a duration given in milliseconds with a unit that keeps 2-3 significant digits.
func fmtMs(ms float64) string {
	switch a := max(ms, -ms); {
	case a < 1:
		return fmt.Sprintf("%.0f µs", ms*1e3)
	case a < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case a < 100:
		return fmt.Sprintf("%.1f ms", ms)
	case a < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case a < 10000:
		return fmt.Sprintf("%.2f s", ms/1e3)
	default:
		return fmt.Sprintf("%.1f s", ms/1e3)
	}
}

// fmtS prints an offset in seconds.
func fmtS(s float64) string { return fmt.Sprintf("%.1f s", s) }

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func fmtCount(n int64) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dM", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dK", n/1e3)
	}
	return fmt.Sprint(n)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// setupSection is the disk and the links the run had, asked beside read back: the disk model's
// probe, fio on a stack's volume, and every routed pair's round trip before and under load.
func setupSection(s *Summary) string {
	if len(s.DiskModels) == 0 && len(s.DiskChecks) == 0 && len(s.LinkRTTs) == 0 && s.Placement == nil {
		return ""
	}
	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pf("## Disk and links, asked and read back\n\n")
	if p := s.Placement; p != nil {
		var parts []string
		if p.Stack != "" {
			parts = append(parts, "stack placement "+p.Stack)
		}
		for _, n := range slices.Sorted(maps.Keys(p.AZ)) {
			parts = append(parts, n+" in "+p.AZ[n])
		}
		for _, z := range slices.Sorted(maps.Keys(p.Zones.Zones)) {
			parts = append(parts, fmt.Sprintf("zone %s: %s", z, strings.Join(p.Zones.Zones[z], ", ")))
		}
		if len(p.Zones.Zones) > 0 {
			parts = append(parts, "between zones "+p.Zones.Between.String()+" each way")
		}
		pf("Placement: %s.\n\n", mdtext.Inline(strings.Join(parts, " · ")))
	}
	if len(s.DiskModels) > 0 {
		pf("Disk model under each server's data, probed before load (docs/disks.md):\n\n")
		type model struct {
			node string
			diskmodel.Record
		}
		var rows []model
		for _, n := range slices.Sorted(maps.Keys(s.DiskModels)) {
			rows = append(rows, model{n, s.DiskModels[n]})
		}
		writeTable(&b, []Column[model]{
			col("node", func(r model) string { return mdtext.Inline(r.node) }),
			col("asked", func(r model) string { return r.Asked.String() }),
			col("throughput", func(r model) string { return fmt.Sprintf("%.1f MB/s", r.Achieved.ThroughputBps/1e6) }),
			col("4 KiB IOPS", func(r model) string { return fmt.Sprintf("%.0f", r.Achieved.IOPS) }),
			col("sync after 4 KiB", func(r model) string { return r.Achieved.SyncLatency.Round(10 * time.Microsecond).String() }),
			col("+ per MiB", func(r model) string { return r.Achieved.SyncPerMiB.Round(10 * time.Microsecond).String() }),
			col("writes", func(r model) string {
				if r.Achieved.Passthrough {
					return "by the kernel (passthrough)"
				}
				return "through the model"
			}),
			col("load avg", func(r model) string { return loadCell(r.LoadAvg) }),
		}, rows)
		if slices.ContainsFunc(rows, func(r model) bool { return r.Achieved.Passthrough }) {
			pf("With passthrough the kernel makes the writes on the backing files, so the model costs what the bare folder does; its fsyncs still hold sync_latency, and the bytes an fsync flushed are the file's growth since its previous one (short by what rewrote bytes already there).\n\n")
		}
	}
	if len(s.DiskChecks) > 0 {
		pf("Data volumes, fio against what was provisioned (docs/infra.md):\n\n")
		type check struct {
			node string
			disk.VolumeCheck
		}
		var rows []check
		for _, n := range slices.Sorted(maps.Keys(s.DiskChecks)) {
			rows = append(rows, check{n, s.DiskChecks[n]})
		}
		writeTable(&b, []Column[check]{
			col("node", func(c check) string { return mdtext.Inline(c.node) }),
			col("volume", func(c check) string { return mdtext.Inline(c.Volume) }),
			col("provisioned", func(c check) string {
				prov := orDash(c.Provisioned.Type)
				if c.Provisioned.ThroughputMiBps > 0 || c.Provisioned.IOPS > 0 {
					prov += fmt.Sprintf(" %d MiB/s, %d IOPS", c.Provisioned.ThroughputMiBps, c.Provisioned.IOPS)
				}
				return mdtext.Inline(prov)
			}),
			col("sequential write", func(c check) string { return fmt.Sprintf("%.0f MB/s", c.Measured.SeqWriteMBps) }),
			col("4 KiB IOPS", func(c check) string { return fmt.Sprintf("%.0f", c.Measured.RandWriteIOPS) }),
			col("fdatasync mean / p99", func(c check) string {
				return fmt.Sprintf("%.0f / %.0f µs", c.Measured.SyncMeanUs, c.Measured.SyncP99Us)
			}),
			col("held to it", func(c check) string {
				switch {
				case c.Error != "":
					return "**short**: " + c.Error
				case c.Compared:
					return "yes"
				}
				return "no (provisioning unknown)"
			}),
			col("load avg", func(c check) string { return fmt.Sprintf("%.2f", c.Measured.LoadAvg) }),
		}, rows)
	}
	if len(s.LinkRTTs) > 0 {
		under := map[[2]string]linkproxy.PairProbe{}
		for _, p := range s.LinkRTTsLoad {
			under[[2]string{p.From, p.To}] = p
		}
		pf("Round trips through each routed pair's proxy, median [min–max] of the probe's pings (docs/playbooks.md, Zones):\n\n")
		rtt := func(p linkproxy.PairProbe) string {
			if p.Error != "" {
				return "error: " + p.Error
			}
			return fmt.Sprintf("%s [%s–%s]", p.Probe.Median.Round(10*time.Microsecond), p.Probe.Min.Round(10*time.Microsecond), p.Probe.Max.Round(10*time.Microsecond))
		}
		writeTable(&b, []Column[linkproxy.PairProbe]{
			col("from", func(p linkproxy.PairProbe) string { return mdtext.Inline(p.From) }),
			col("to", func(p linkproxy.PairProbe) string { return mdtext.Inline(p.To) }),
			col("asked", func(p linkproxy.PairProbe) string { return p.Probe.Set.String() }),
			col("before load", rtt),
			col("under load", func(p linkproxy.PairProbe) string {
				if q, ok := under[[2]string{p.From, p.To}]; ok {
					return rtt(q)
				}
				return "—"
			}),
		}, s.LinkRTTs)
	}
	return b.String()
}

// hashOf says what a node's state hash is of: the state or a snapshot's bytes, at which position.
func hashOf(f NodeFinal) string {
	switch {
	case f.StateHash == "":
		return "—"
	case f.StateHashOfSnapshot:
		return fmt.Sprintf("snapshot bytes at %d", f.StateHashAt)
	}
	return fmt.Sprintf("state at %d", f.StateHashAt)
}

// agreementLine is the Nodes section's verdict on the final state hashes.
func agreementLine(a Agreement) string {
	switch a.Result {
	case AgreementAgree:
		of := "state"
		if a.OfSnapshot {
			of = "snapshot bytes"
		}
		return fmt.Sprintf("Final state hashes agree on every node: yes (%s at log position %d).", of, a.Position)
	case AgreementDiffer:
		return "Final state hashes agree on every node: **no** — " + mdtext.Inline(a.Reason) + "."
	}
	return "Final state hashes agree on every node: not checked — " + mdtext.Inline(orDash(a.Reason)) + "."
}
