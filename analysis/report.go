package analysis

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/stats"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/mdtext"
)

// renderReport writes report.md: the tables (snapshot take and client pause with
// the normal p50; restart phases; client latency per restart window), overall percentiles with
// n, the nodes' final state hashes, warnings, plots and the definitions behind every figure.
func renderReport(s *Summary) string {
	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	title := s.Playbook
	if title == "" {
		title = "(playbook unknown)"
	}
	pf("# Run %s — %s (%s)\n\n", mdtext.Inline(s.RunID), mdtext.Inline(title), mdtext.Inline(s.Status))
	if s.Error != "" {
		pf("**Run error:**\n\n%s\n", mdtext.Block(s.Error))
	}
	if s.StatusReason != "" {
		pf("**Failed:** %s.\n\n", mdtext.Inline(s.StatusReason))
	}
	if du := s.Durability; du != nil && du.Lost > 0 {
		pf("**Acknowledged orders lost: %d of %d** (%s, sync level %s) — see [Durability](#durability).\n\n", du.Lost, du.Acked, du.Faults, syncCell(du.SyncLevel))
	}
	pf("**Run settings:** %s\n\n", settingsLine(s))
	if l := s.Traps.line(); l != "" {
		pf("%s\n\n", l)
	}
	if len(s.Warnings) > 0 {
		pf("**%d warning(s)** — see [Warnings](#warnings).\n\n", len(s.Warnings))
	}
	for _, na := range s.NotApplied {
		pf("**%s = %s had no effect: not applied** (%s).\n\n", mdtext.Inline(na.Setting), mdtext.Inline(na.Value), mdtext.Inline(na.Reason))
	}

	nodes := slices.Sorted(maps.Keys(s.Nodes))
	for _, r := range s.Snapshots {
		for n := range r.TakeMs {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}

	pf("## Snapshots\n\n")
	if len(s.Snapshots) == 0 {
		pf("No snapshot action in this run.\n\n")
	} else {
		pf("| # | at | index |")
		for _, n := range nodes {
			pf(" take %s |", n)
		}
		pf(" client pause | pause window | normal p50 |\n|---|---|---|")
		for range nodes {
			pf("---|")
		}
		pf("---|---|---|\n")
		for i, r := range s.Snapshots {
			idx := "—"
			if r.Index != nil {
				idx = fmt.Sprint(*r.Index)
			}
			pf("| %d | %s | %s |", i+1, fmtS(r.AtS), idx)
			for _, n := range nodes {
				if v, ok := r.TakeMs[n]; ok {
					pf(" %s |", fmtMs(v))
				} else {
					pf(" — |")
				}
			}
			pf(" %s | %s – %s | %s |\n", pauseCell(r), fmtS(r.PauseFromS), fmtS(r.PauseToS), usCell(r.NormalP50Us))
		}
		pf("\nTake: the time the node's book stood still writing the snapshot, as the engine reports it "+
			"(last_snapshot.take_ms); — means that node reported no take for that snapshot. A node that was down or "+
			"catching up at the action takes the snapshot when its replay reaches it: listed, but it does not stretch the window. "+
			"Client pause: the worst latency of any post-warm-up probe whose intended send time lies in the pause window "+
			"[snapshot action, last node finished + 1 s]; probes sent before the action are left out, since their wait began "+
			"before the snapshot did. A probe lost in that window counts as waiting "+
			"until the end of load, which makes the pause a lower bound (≥). "+
			"Normal p50: post-warm-up probes outside every snapshot window [action − 1 s, last node finished + 1 s] and every fault window "+
			"(see Probes overall; n = %d).\n\n", s.Normal.N)
	}

	writeForces(pf, s)
	writeClientConn(pf, s)

	if len(s.StepDowns) > 0 {
		pf("## Step-downs\n\n")
		head, rule := "| # | at | from | to |", "|---|---|---|---|"
		for _, f := range StepDownFigures {
			head, rule = head+" "+f.Label+" |", rule+"---|"
		}
		pf("%s probes | lost | normal p50 |\n%s---|---|---|\n", head, rule)
		for i, r := range s.StepDowns {
			p50 := "—"
			if r.NormalP50Us != nil {
				p50 = fmtMs(*r.NormalP50Us / 1e3)
			}
			pf("| %d | %s | %s | %s |", i+1, fmtS(r.AtS), r.From, orDash(r.To))
			for _, f := range StepDownFigures {
				pf(" %s |", f.Cell(r))
			}
			pf(" %d | %d | %s |\n", r.WindowProbes, r.WindowLost, p50)
		}
		pf("\nNew leader after: from the step-down request to the next node reporting itself leader (as its change stream or the 20 ms polls reported it). " +
			"Worst probe: the worst latency of any post-warm-up probe whose intended send time lies in [request − 1 s, new leader + 1 s]; " +
			"it is what clients saw of the hand-off, the election and their reconnect to the new leader included (a failover's client gap, below, is the longest silence between replies). ¹ A snapshot window overlaps this one. " +
			"Service gap, detection, election, client learns: the hand-off as the step-down guide measures it (Hand-offs, below).\n\n")
	}

	if len(s.Failovers) > 0 {
		writeFailovers(pf, s)
		writeHandOffs(pf, s)
	}

	if len(s.Bursts) > 0 {
		pf("## Micro-bursts\n\n")
		writeBursts(pf, s)
	}

	pf("## Restarts\n\n")
	if len(s.Restarts) == 0 {
		pf("No kill action in this run.\n\n")
	} else {
		head, rule := "| # | node | killed | relaunched | starting | restoring | joining | replaying | catching-up |", "|---|---|---|---|---|---|---|---|---|"
		for _, f := range RestartFigures {
			head, rule = head+" "+f.Label+" |", rule+"---|"
		}
		pf("%s\n%s\n", head, rule)
		for i, r := range s.Restarts {
			relaunched := "never"
			if r.RelaunchS != nil {
				relaunched = fmt.Sprintf("%s (%s down)", fmtS(*r.RelaunchS), fmtMs((*r.RelaunchS-r.KillS)*1e3))
			}
			pf("| %d | %s | %s | %s |", i+1, r.Node, fmtS(r.KillS), relaunched)
			for _, ph := range []string{engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseJoining, engine.PhaseReplaying, engine.PhaseCatchingUp} {
				v, ok := r.PhasesMs[ph]
				switch {
				case r.RelaunchS == nil || !ok:
					pf(" — |")
				case r.OpenPhase == ph:
					pf(" ≥ %s (open) |", fmtMs(v))
				default:
					pf(" %s |", fmtMs(v))
				}
			}
			for _, f := range RestartFigures {
				pf(" %s |", f.Cell(r))
			}
			pf("\n")
		}
		pf("\nPhases run from entering a phase to entering the next, as the engine reported them (its change " +
			"stream: the reference engine checks every 5 ms; an engine without one is polled every 20 ms); " +
			"starting counts from the relaunch action, so it includes process start. — : not observed.\n\n")

		pf("### Client latency around restarts\n\n")
		pf("| window | span | n | p50 | p90 | p99 | max | lost |\n|---|---|---|---|---|---|---|---|\n")
		au := s.Restarts[0].Windows.AllUp
		auSpan := fmt.Sprintf("%s – %s", fmtS(au.FromS), fmtS(au.ToS))
		if au.ExcludedS > 0 {
			auSpan += fmt.Sprintf(", less %s of snapshot windows", fmtMs(au.ExcludedS*1e3))
			if au.DrainS > 0 {
				auSpan += fmt.Sprintf(" (%s of it the drain after them)", fmtMs(au.DrainS*1e3))
			}
		}
		pf("| all up | %s | %s |\n", auSpan, windowCells(au.Stats))
		footnote := false
		for i, r := range s.Restarts {
			ws := []struct {
				name string
				w    *Window
			}{{"one down", &r.Windows.OneDown}, {"rejoining", r.Windows.Rejoining}}
			for _, x := range ws {
				if x.w == nil {
					continue
				}
				mark := ""
				if x.w.OverlapsSnapshot {
					mark, footnote = "¹", true
				}
				if x.w.UnplannedLeaderChange {
					mark += " ⚠ unplanned leader change"
				}
				pf("| #%d %s %s%s | %s | %s |\n", i+1, r.Node, x.name, mark, windowSpan(*x.w, s.Settings.LoadS), windowCells(x.w.Stats))
			}
		}
		pf("\nWindows by intended send time: all up = [warm-up end, first kill) minus the snapshot windows and the drain after each "+
			"(until latency is back at its median of the 5 s before the snapshot, at most 10 s); "+
			"one down = [kill, relaunch); rejoining = [relaunch, ready), or to the end of load if the node never "+
			"became ready (open). n counts answered probes; lost ones are counted apart. "+
			"p90 is shown from n ≥ %d, p99 from n ≥ %d, p99.9 from n ≥ %d.", minNForP90, minNForP99, minNForP999)
		if footnote {
			pf(" ¹ A snapshot window overlaps this one: its figures include that snapshot's pause.")
		}
		pf("\n\n")
	}

	if du := s.Durability; du != nil {
		pf("## Durability\n\n")
		pf("Every order the load generator was told was accepted (loadgen/acked.bin), checked against the orders each server holds at the end (<node>/orders.json). Lost: held by fewer than a majority. Checked against: %s.\n\n", checkCell(du.Check))
		pf("| fault | sync level | acked | lost | unchecked |\n| --- | --- | --- | --- | --- |\n")
		pf("| %s | %s | %d | %d | %d |\n\n", du.Faults, syncCell(du.SyncLevel), du.Acked, du.Lost, du.Unchecked)
		pf("| server | held | lost | unknown (in its restored snapshot) |\n| --- | --- | --- | --- |\n")
		for _, n := range slices.Sorted(maps.Keys(du.Nodes)) {
			nd := du.Nodes[n]
			if nd.Missing {
				pf("| %s | no answer | | |\n", mdtext.Inline(n))
				continue
			}
			pf("| %s | %d | %d | %d |\n", mdtext.Inline(n), nd.Held, nd.Lost, nd.Unknown)
		}
		pf("\n")
		if len(du.LostIDs) > 0 {
			pf("First lost order ids: %v\n\n", du.LostIDs)
		}
	}
	pf("## Probes overall\n\n")
	pf("| n | lost | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n")
	pf("| %d | %d | %s | %s | %s | %s | %s |\n\n", s.Probes.N, s.Probes.Lost, usCell(s.Probes.P50Us), pctCell(s.Probes.P90Us, s.Probes.N, minNForP90),
		pctCell(s.Probes.P99Us, s.Probes.N, minNForP99), pctCell(s.Probes.P999Us, s.Probes.N, minNForP999), usCell(s.Probes.MaxUs))
	pf("Post-warm-up probes only; %d probe(s) sent before the warm-up ended (%s) are excluded from every figure.\n\n",
		s.WarmupProbes, fmtS(s.Settings.WarmupS))
	pf("%s", normalSection(s))
	pf("%s", telemetrySection(s))
	pf("%s", pressureSection(s))
	pf("%s", excursionsSection(s))
	pf("%s", windowsSection(s))

	pf("%s", setupSection(s))

	pf("## Nodes\n\n")
	if len(s.Nodes) == 0 {
		pf("No server node status found.\n\n")
	} else {
		pf("| node | role | phase | applied index | orders | state hash | hash of |\n|---|---|---|---|---|---|---|\n")
		for _, n := range slices.Sorted(maps.Keys(s.Nodes)) {
			f := s.Nodes[n]
			if f.StatusMissing {
				pf("| %s | — | — | — | — | (no status.json) | — |\n", mdtext.Inline(n))
				continue
			}
			orders := engine.NotSupported
			if f.Orders != nil {
				orders = strconv.Itoa(*f.Orders)
			}
			pf("| %s | %s | %s | %d | %s | %s | %s |\n", mdtext.Inline(n), mdtext.Inline(orDash(f.Role)), mdtext.Inline(orDash(f.Phase)), f.AppliedIndex, orders,
				mdtext.CodeCell(orDash(f.StateHash)), hashOf(f))
		}
		pf("\n%s\n\n", agreementLine(s.StateHashes))
	}
	switch {
	case s.LeaderAtLoadStart == "" && len(s.LeaderChanges) == 0:
	case len(s.LeaderChanges) == 0:
		pf("Leader: %s at load start, no leader change during the load.\n\n", s.LeaderAtLoadStart)
	default:
		var ch []string
		for _, l := range s.LeaderChanges {
			ch = append(ch, fmt.Sprintf("%s at %s", l.Node, fmtS(l.AtS)))
		}
		pf("Leader: %s at load start; became leader: %s.\n\n", orDash(s.LeaderAtLoadStart), strings.Join(ch, ", "))
	}
	if n := len(s.UnplannedLeaderChanges); n > 0 {
		var ch []string
		for _, l := range s.UnplannedLeaderChanges {
			ch = append(ch, fmt.Sprintf("%s at %s", l.Node, fmtS(l.AtS)))
		}
		pf("**Unplanned leader changes: %d** (%s): no step_down, kill or partition of the leader asked for them; "+
			"figures whose window holds one are marked ⚠ (see Warnings).\n\n", n, strings.Join(ch, ", "))
	}
	if len(s.LeaderChanges) > 0 || len(s.Failovers) > 0 {
		pf("Leader changes are attributed to actions by this rule: %s.\n\n", s.LeaderWindow.Rule)
	}
	if len(s.AgentCPU) > 0 {
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(s.AgentCPU)) {
			c := s.AgentCPU[n]
			parts = append(parts, fmt.Sprintf("%s %.2f %% (max %.1f %%)", n, c.MeanPct, c.MaxPct))
		}
		pf("Rig overhead — the agent's CPU share per node, mean over the run (percent of one core, "+
			"from its own OS samples): %s.\n\n", strings.Join(parts, " · "))
	}

	if len(s.Stages) > 0 || s.Book != nil {
		pf("## Stages\n\n")
		writeStages(&b, s)
	}

	pf("## Warnings\n\n")
	if len(s.Warnings) == 0 {
		pf("None.\n\n")
	}
	for _, w := range s.Warnings {
		pf("- %s\n", mdtext.Inline(w))
	}
	if len(s.Warnings) > 0 {
		pf("\n")
	}

	if len(s.Plots) > 0 {
		pf("## Plots\n\n")
		for _, p := range s.Plots {
			pf("![%s](%s)\n\n", mdtext.Inline(plotTitle(p)), mdtext.Path(p))
		}
	}

	pf("## Definitions\n\n")
	pf("- Times are seconds from the load_start event; the end of load is the load_end event. Probes sent before warm-up end are excluded from every figure.\n")
	pf("- Latency runs from each probe's intended send time (open loop): a probe that could not even be sent during a pause is charged the pause.\n")
	pf("- Percentiles are nearest-rank over answered probes, with their n; p90 needs n ≥ %d, p99 n ≥ %d and p99.9 n ≥ %d, else n/a.\n", minNForP90, minNForP99, minNForP999)
	pf("- A load average above the CPU count at start or end is flagged: timings from a contended box are upper bounds.\n")
	return b.String()
}

// writeStages: where the run's time went, against the estimate `rig validate` made for it, and
// where its book came from.
func writeStages(b *strings.Builder, s *Summary) {
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(s.Stages) > 0 {
		pf("| stage | estimate | actual | actual / estimate | estimate from |\n|---|---|---|---|---|\n")
		var est, act float64
		for _, st := range s.Stages {
			est += st.EstimateS
			a, ratio := "—", "—"
			if st.ActualS != nil {
				act += *st.ActualS
				a = fmtS(*st.ActualS)
				if st.EstimateS > 0 {
					ratio = fmt.Sprintf("%.2f", *st.ActualS/st.EstimateS)
				}
			}
			pf("| %s | %s | %s | %s | %s |\n", st.Name, fmtS(st.EstimateS), a, ratio, orDash(st.From))
		}
		pf("| **total** | %s | %s | | |\n\n", fmtS(est), fmtS(act))
	}
	if s.OverheadS != nil {
		pf("Overhead (everything but the timeline: start-up, preload, settle, stop, collection): %s.\n\n", fmtS(*s.OverheadS))
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

func pauseCell(r SnapshotRow) string {
	if r.ClientPauseMs == nil {
		return "— (no probe)"
	}
	if r.UnplannedLeaderChange {
		r.UnplannedLeaderChange = false
		return pauseCell(r) + " ⚠ unplanned leader change"
	}
	if r.PauseLowerBound {
		return fmt.Sprintf("≥ %s (%d lost)", fmtMs(*r.ClientPauseMs), r.WindowLost)
	}
	if r.WindowLost > 0 {
		return fmt.Sprintf("%s (%d lost)", fmtMs(*r.ClientPauseMs), r.WindowLost)
	}
	return fmtMs(*r.ClientPauseMs)
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

func windowCells(st Stats) string {
	return fmt.Sprintf("%d | %s | %s | %s | %s | %d", st.N, usCell(st.P50Us), pctCell(st.P90Us, st.N, minNForP90), pctCell(st.P99Us, st.N, minNForP99), usCell(st.MaxUs), st.Lost)
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

// writeFailovers is the table of leader changes measured as events (failover.go), with the
// run's pooled figures under it.
func writeFailovers(pf func(string, ...any), s *Summary) {
	pf("## Failovers\n\n")
	head, rule := "| # | at | fault | from | to |", "|---|---|---|---|---|"
	for _, f := range FailoverFigures {
		head, rule = head+" "+f.Label+" |", rule+"---|"
	}
	pf("%s lost |\n%s---|\n", head, rule)
	for i, r := range s.Failovers {
		pf("| %d | %s | %s | %s | %s |", i+1, fmtS(r.AtS), r.Action, orDash(r.From), orDash(r.To))
		for _, f := range FailoverFigures {
			pf(" %s |", f.Cell(r))
		}
		pf(" %d |\n", r.Lost)
	}
	if p := s.FailoverPooled; p != nil && len(s.Failovers) > 1 {
		pf("\nPooled over %d faults (mean ± stdev [95 %% CI], n):\n\n", len(s.Failovers))
		for _, x := range p {
			ci := fmt.Sprintf(" [no interval below n = %d]", stats.MinCI)
			if x.CILo != nil {
				ci = fmt.Sprintf(" [%s – %s]", x.Format(*x.CILo), x.Format(*x.CIHi))
			}
			pf("* %s: %s ± %s%s, n = %d\n", x.Label, x.Format(x.Mean), x.Format(x.Stdev), ci, x.N)
		}
	}
	for i, r := range s.Failovers {
		if r.DetectedBy == DetectedByLeader {
			pf("\nFailover %d: no node was seen as a candidate before %s led (it stood and won between two observations of its state): detection is the election's time, an upper bound.\n", i+1, r.To)
		}
	}
	pf("\nFrom the fault (a step_down, or a kill of the leader): detection is the first node to become a candidate, "+
		"election a node reporting itself leader (another node, or the old leader once it was down or had stopped leading: relaunched, it may win again); client gap is from the last reply before the new leader was known to the first after it "+
		"(client clock: intended send + latency); back to normal ends the first whole second after that reply whose p99 is within %.0f %% of "+
		"the median per-second p99 of the %d s before the fault. — : did not happen before the next fault or the end of load.\n\n",
		normalMargin*100, normalBaselineS)
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
		pf("| node | asked | throughput | 4 KiB IOPS | sync after 4 KiB | + per MiB | load avg |\n|---|---|---|---|---|---|---|\n")
		for _, n := range slices.Sorted(maps.Keys(s.DiskModels)) {
			r := s.DiskModels[n]
			pf("| %s | %s | %.1f MB/s | %.0f | %s | %s | %s |\n", mdtext.Inline(n), r.Asked, r.Achieved.ThroughputBps/1e6, r.Achieved.IOPS,
				r.Achieved.SyncLatency.Round(10*time.Microsecond), r.Achieved.SyncPerMiB.Round(10*time.Microsecond), loadCell(r.LoadAvg))
		}
		pf("\n")
	}
	if len(s.DiskChecks) > 0 {
		pf("Data volumes, fio against what was provisioned (docs/infra.md):\n\n")
		pf("| node | volume | provisioned | sequential write | 4 KiB IOPS | fdatasync mean / p99 | held to it | load avg |\n|---|---|---|---|---|---|---|---|\n")
		for _, n := range slices.Sorted(maps.Keys(s.DiskChecks)) {
			c := s.DiskChecks[n]
			held := "no (provisioning unknown)"
			if c.Compared {
				held = "yes"
			}
			if c.Error != "" {
				held = "**short**: " + c.Error
			}
			prov := orDash(c.Provisioned.Type)
			if c.Provisioned.ThroughputMiBps > 0 || c.Provisioned.IOPS > 0 {
				prov += fmt.Sprintf(" %d MiB/s, %d IOPS", c.Provisioned.ThroughputMiBps, c.Provisioned.IOPS)
			}
			m := c.Measured
			pf("| %s | %s | %s | %.0f MB/s | %.0f | %.0f / %.0f µs | %s | %.2f |\n", mdtext.Inline(n), mdtext.Inline(c.Volume), mdtext.Inline(prov), m.SeqWriteMBps, m.RandWriteIOPS, m.SyncMeanUs, m.SyncP99Us, held, m.LoadAvg)
		}
		pf("\n")
	}
	if len(s.LinkRTTs) > 0 {
		under := map[[2]string]linkproxy.PairProbe{}
		for _, p := range s.LinkRTTsLoad {
			under[[2]string{p.From, p.To}] = p
		}
		pf("Round trips through each routed pair's proxy, median [min–max] of the probe's pings (docs/playbooks.md, Zones):\n\n")
		pf("| from | to | asked | before load | under load |\n|---|---|---|---|---|\n")
		rtt := func(p linkproxy.PairProbe) string {
			if p.Error != "" {
				return "error: " + p.Error
			}
			return fmt.Sprintf("%s [%s–%s]", p.Probe.Median.Round(10*time.Microsecond), p.Probe.Min.Round(10*time.Microsecond), p.Probe.Max.Round(10*time.Microsecond))
		}
		for _, p := range s.LinkRTTs {
			u := "—"
			if q, ok := under[[2]string{p.From, p.To}]; ok {
				u = rtt(q)
			}
			pf("| %s | %s | %s | %s | %s |\n", mdtext.Inline(p.From), mdtext.Inline(p.To), p.Probe.Set, rtt(p), u)
		}
		pf("\n")
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
