package analysis

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/mdtext"
)

// section writes one part of report.md, or nothing where the run has none of it.
type section func(b *strings.Builder, s *Summary)

// reportSections are report.md's parts, in order.
var reportSections = []section{
	headSection,
	snapshotsSection,
	writeForces,
	writeClientConn,
	stepDownsSection,
	failoversSection,
	handOffsSection,
	burstsSection,
	kindRowsSection,
	restartsSection,
	durabilitySection,
	probesSection,
	asText(normalSection),
	asText(telemetrySection),
	asText(pressureSection),
	asText(excursionsSection),
	asText(windowsSection),
	asText(setupSection),
	nodesSection,
	leadersSection,
	agentCPUSection,
	stagesSection,
	warningsSection,
	plotsSection,
	definitionsSection,
}

// renderReport writes report.md, section by section (reportSections).
func renderReport(s *Summary) string {
	var b strings.Builder
	for _, sec := range reportSections {
		sec(&b, s)
	}
	return b.String()
}

// asText is a section written as a string.
func asText(f func(*Summary) string) section {
	return func(b *strings.Builder, s *Summary) { b.WriteString(f(s)) }
}

// printf is a section written through a printf.
func printf(f func(pf func(string, ...any), s *Summary)) section {
	return func(b *strings.Builder, s *Summary) { f(pfTo(b), s) }
}

func pfTo(b *strings.Builder) func(string, ...any) {
	return func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
}

// headSection is the title and what must be read first: the run's error, a failed verdict, lost
// orders, the settings, the traps, how many warnings, settings that had no effect.
func headSection(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
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
}

// snapshotsSection: each snapshot's take per node beside its declared figures (SnapshotFigures).
func snapshotsSection(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	pf("## Snapshots\n\n")
	if len(s.Snapshots) == 0 {
		pf("No snapshot action in this run.\n\n")
		return
	}
	nodes := slices.Sorted(maps.Keys(s.Nodes))
	for _, r := range s.Snapshots {
		for n := range r.TakeMs {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	lead := []Column[SnapshotRow]{
		numberCol[SnapshotRow](),
		col("at", func(r SnapshotRow) string { return fmtS(r.AtS) }),
		col("index", func(r SnapshotRow) string {
			if r.Index == nil {
				return "—"
			}
			return fmt.Sprint(*r.Index)
		}),
	}
	for _, n := range nodes {
		lead = append(lead, col("take "+n, func(r SnapshotRow) string {
			if v, ok := r.TakeMs[n]; ok {
				return fmtMs(v)
			}
			return "—"
		}))
	}
	writeTable(b, cols(lead, figureCols(SnapshotFigures), []Column[SnapshotRow]{
		col("pause window", func(r SnapshotRow) string { return fmtS(r.PauseFromS) + " – " + fmtS(r.PauseToS) }),
		col("normal p50", func(r SnapshotRow) string { return usCell(r.NormalP50Us) }),
	}), s.Snapshots)
	pf("Take: the time the node's book stood still writing the snapshot, as the engine reports it "+
		"(last_snapshot.take_ms); — means that node reported no take for that snapshot. A node that was down or "+
		"catching up at the action takes the snapshot when its replay reaches it: listed, but it does not stretch the window. "+
		"Client pause: the worst latency of any post-warm-up probe whose intended send time lies in the pause window "+
		"[snapshot action, last node finished + 1 s]; probes sent before the action are left out, since their wait began "+
		"before the snapshot did. A probe lost in that window counts as waiting "+
		"until the end of load, which makes the pause a lower bound (≥). "+
		"Normal p50: post-warm-up probes outside every snapshot window [action − 1 s, last node finished + 1 s] and every fault window "+
		"(see Probes overall; n = %d).\n\n", s.Normal.N)
}

// stepDownsSection: each step-down's declared figures (StepDownFigures) and its probes.
func stepDownsSection(b *strings.Builder, s *Summary) {
	if len(s.StepDowns) == 0 {
		return
	}
	b.WriteString("## Step-downs\n\n")
	writeTable(b, cols([]Column[StepDownRow]{
		numberCol[StepDownRow](),
		col("at", func(r StepDownRow) string { return fmtS(r.AtS) }),
		col("from", func(r StepDownRow) string { return r.From }),
		col("to", func(r StepDownRow) string { return orDash(r.To) }),
	}, figureCols(StepDownFigures), []Column[StepDownRow]{
		col("probes", func(r StepDownRow) string { return fmt.Sprint(r.WindowProbes) }),
		col("lost", func(r StepDownRow) string { return fmt.Sprint(r.WindowLost) }),
		col("normal p50", func(r StepDownRow) string { return usCell(r.NormalP50Us) }),
	}), s.StepDowns)
	b.WriteString("New leader after: from the step-down request to the next node reporting itself leader (as its change stream or the 20 ms polls reported it). " +
		"Worst probe: the worst latency of any post-warm-up probe whose intended send time lies in [request − 1 s, new leader + 1 s]; " +
		"it is what clients saw of the hand-off, the election and their reconnect to the new leader included (a failover's client gap, below, is the longest silence between replies). ¹ A snapshot window overlaps this one. " +
		"Service gap, detection, election, client learns: the hand-off as the step-down guide measures it (Hand-offs, below).\n\n")
}

// failoversSection is the table of leader changes measured as events (failover.go), with the
// run's pooled figures under it.
func failoversSection(b *strings.Builder, s *Summary) {
	if len(s.Failovers) == 0 {
		return
	}
	pf := pfTo(b)
	pf("## Failovers\n\n")
	writeTable(b, cols([]Column[FailoverRow]{
		numberCol[FailoverRow](),
		col("at", func(r FailoverRow) string { return fmtS(r.AtS) }),
		col("fault", func(r FailoverRow) string { return r.Action }),
		col("from", func(r FailoverRow) string { return orDash(r.From) }),
		col("to", func(r FailoverRow) string { return orDash(r.To) }),
	}, figureCols(FailoverFigures), []Column[FailoverRow]{
		col("lost", func(r FailoverRow) string { return fmt.Sprint(r.Lost) }),
	}), s.Failovers)
	if p := s.RowPooled[string(actions.ShapeFailover)]; p != nil && len(s.Failovers) > 1 {
		pf("Pooled over %d faults (mean ± stdev [95 %% CI], n):\n\n", len(s.Failovers))
		writePooled(b, p)
		pf("\n")
	}
	for i, r := range s.Failovers {
		if r.DetectedBy == DetectedByLeader {
			pf("Failover %d: no node was seen as a candidate before %s led (it stood and won between two observations of its state): detection is the election's time, an upper bound.\n\n", i+1, r.To)
		}
	}
	pf("From the fault (a step_down, or a kill of the leader): detection is the first node to become a candidate, "+
		"election a node reporting itself leader (another node, or the old leader once it was down or had stopped leading: relaunched, it may win again); client gap is from the last reply before the new leader was known to the first after it "+
		"(client clock: intended send + latency); back to normal ends the first whole second after that reply whose p99 is within %.0f %% of "+
		"the median per-second p99 of the %d s before the fault. — : did not happen before the next fault or the end of load.\n\n",
		normalMargin*100, normalBaselineS)
}

// handOffsSection: every failover as the step-down guide measures a hand-off (handoff.go).
func handOffsSection(b *strings.Builder, s *Summary) {
	if len(s.Failovers) == 0 || len(s.HandOffs) == 0 {
		return
	}
	b.WriteString("## Hand-offs\n\n")
	writeTable(b, cols([]Column[HandOff]{
		numberCol[HandOff](),
		col("at", func(h HandOff) string { return fmtS(h.AtS) }),
		col("action", func(h HandOff) string { return h.Action }),
		col("from", func(h HandOff) string { return orDash(h.From) }),
		col("to", func(h HandOff) string { return orDash(h.To) }),
	}, figureCols(lift(HandOffFigures, func(h HandOff) HandOffTimes { return h.HandOffTimes })), []Column[HandOff]{
		col("detected by", func(h HandOff) string {
			if h.Detector == "" {
				return "—"
			}
			return h.Detector + " (" + h.DetectedAs + ")"
		}),
		col("answered by", func(h HandOff) string { return orDash(h.AnsweredBy) }),
	}), s.HandOffs)
	fmt.Fprintf(b, "From the action (the close), on one clock: service gap is the client's last reply served by the old leader → its first reply "+
		"from the new one, from the load generator's record of which server answered (² from the probes instead: the longest silence between "+
		"replies around the election, who answered unknown); detection is the first follower leaving its follow state (a candidate, or an "+
		"election state of its engine); election a node reporting itself leader; client learns is that election → the client's first reply "+
		"from the new leader (below zero: it answered before its agent saw the role change). Each node's states: %s.\n\n", PlotHandOff)
}

// burstsSection: each transport's bursts (burst.go, aeronburst.go), then the declared figures
// (BurstFigures) pooled over the run's bursts.
func burstsSection(b *strings.Builder, s *Summary) {
	if len(s.Bursts) == 0 {
		return
	}
	b.WriteString("## Micro-bursts\n\n")
	writeBursts(b, s)
	if p := s.RowPooled[string(actions.ShapeBurst)]; len(s.Bursts) > 1 && p != nil {
		fmt.Fprintf(b, "Pooled over %d bursts (median [min – max], or the one value all had; n: the bursts with the figure):\n\n", len(s.Bursts))
		writePooled(b, p)
		b.WriteString("\n")
	}
}

// restartPhases are the phases a restart's table shows, in the order an engine goes through them.
var restartPhases = []string{engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseJoining, engine.PhaseReplaying, engine.PhaseCatchingUp}

// restartsSection: each kill's phases and declared figures (RestartFigures), then client latency
// in the windows around the restarts (LatencyFigures).
func restartsSection(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	pf("## Restarts\n\n")
	if len(s.Restarts) == 0 {
		pf("No kill action in this run.\n\n")
		return
	}
	lead := []Column[RestartRow]{
		numberCol[RestartRow](),
		col("node", func(r RestartRow) string { return r.Node }),
		col("killed", func(r RestartRow) string { return fmtS(r.KillS) }),
		col("relaunched", func(r RestartRow) string {
			if r.RelaunchS == nil {
				return "never"
			}
			return fmt.Sprintf("%s (%s down)", fmtS(*r.RelaunchS), fmtMs((*r.RelaunchS-r.KillS)*1e3))
		}),
	}
	for _, ph := range restartPhases {
		lead = append(lead, col(ph, func(r RestartRow) string {
			v, ok := r.PhasesMs[ph]
			switch {
			case r.RelaunchS == nil || !ok:
				return "—"
			case r.OpenPhase == ph:
				return fmt.Sprintf("≥ %s (open)", fmtMs(v))
			}
			return fmtMs(v)
		}))
	}
	writeTable(b, cols(lead, figureCols(RestartFigures)), s.Restarts)
	pf("Phases run from entering a phase to entering the next, as the engine reported them (its change " +
		"stream: the reference engine checks every 5 ms; an engine without one is polled every 20 ms); " +
		"starting counts from the relaunch action, so it includes process start. — : not observed.\n\n")

	pf("### Client latency around restarts\n\n")
	type win struct {
		name, span string
		Window
	}
	au := s.Restarts[0].Windows.AllUp
	auSpan := fmt.Sprintf("%s – %s", fmtS(au.FromS), fmtS(au.ToS))
	if au.ExcludedS > 0 {
		auSpan += fmt.Sprintf(", less %s of snapshot windows", fmtMs(au.ExcludedS*1e3))
		if au.DrainS > 0 {
			auSpan += fmt.Sprintf(" (%s of it the drain after them)", fmtMs(au.DrainS*1e3))
		}
	}
	rows := []win{{"all up", auSpan, au}}
	footnote := false
	for i, r := range s.Restarts {
		for _, x := range []struct {
			name string
			w    *Window
		}{{"one down", &r.Windows.OneDown}, {"rejoining", r.Windows.Rejoining}} {
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
			rows = append(rows, win{fmt.Sprintf("#%d %s %s%s", i+1, r.Node, x.name, mark), windowSpan(*x.w, s.Settings.LoadS), *x.w})
		}
	}
	writeTable(b, cols([]Column[win]{
		col("window", func(w win) string { return w.name }),
		col("span", func(w win) string { return w.span }),
		col("n", func(w win) string { return fmt.Sprint(w.N) }),
	}, figureCols(lift(LatencyFigures, func(w win) Stats { return w.Stats }))), rows)
	pf("Windows by intended send time: all up = [warm-up end, first kill) minus the snapshot windows and the drain after each "+
		"(until latency is back at its median of the 5 s before the snapshot, at most 10 s); "+
		"one down = [kill, relaunch); rejoining = [relaunch, ready), or to the end of load if the node never "+
		"became ready (open). n counts answered probes; lost ones are counted apart. "+
		"p90 is shown from n ≥ %d, p99 from n ≥ %d, p99.9 from n ≥ %d.", minNForP90, minNForP99, minNForP999)
	if footnote {
		pf(" ¹ A snapshot window overlaps this one: its figures include that snapshot's pause.")
	}
	pf("\n\n")
}

// durabilitySection: every acknowledged order checked against what the servers hold.
func durabilitySection(b *strings.Builder, s *Summary) {
	du := s.Durability
	if du == nil {
		return
	}
	pf := pfTo(b)
	pf("## Durability\n\n")
	pf("Every order the load generator was told was accepted (loadgen/acked.bin), checked against the orders each server holds at the end (<node>/orders.json). Lost: held by fewer than a majority. Checked against: %s.\n\n", checkCell(du.Check))
	writeTable(b, []Column[*Durability]{
		col("fault", func(du *Durability) string { return du.Faults }),
		col("sync level", func(du *Durability) string { return syncCell(du.SyncLevel) }),
		col("acked", func(du *Durability) string { return fmt.Sprint(du.Acked) }),
		col("lost", func(du *Durability) string { return fmt.Sprint(du.Lost) }),
		col("unchecked", func(du *Durability) string { return fmt.Sprint(du.Unchecked) }),
	}, []*Durability{du})
	type server struct {
		name string
		NodeDurability
	}
	var servers []server
	for _, n := range slices.Sorted(maps.Keys(du.Nodes)) {
		servers = append(servers, server{n, du.Nodes[n]})
	}
	// A server that did not answer has no counts.
	count := func(f func(server) int) func(server) string {
		return func(sv server) string {
			if sv.Missing {
				return ""
			}
			return fmt.Sprint(f(sv))
		}
	}
	writeTable(b, []Column[server]{
		col("server", func(sv server) string { return mdtext.Inline(sv.name) }),
		col("held", func(sv server) string {
			if sv.Missing {
				return "no answer"
			}
			return fmt.Sprint(sv.Held)
		}),
		col("lost", count(func(sv server) int { return sv.Lost })),
		col("unknown (in its restored snapshot)", count(func(sv server) int { return sv.Unknown })),
	}, servers)
	if len(du.LostIDs) > 0 {
		pf("First lost order ids: %v\n\n", du.LostIDs)
	}
}

// probesSection: every post-warm-up probe's declared latency figures (LatencyFigures).
func probesSection(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	pf("## Probes overall\n\n")
	writeTable(b, cols([]Column[Stats]{col("n", func(st Stats) string { return fmt.Sprint(st.N) })}, figureCols(LatencyFigures)), []Stats{s.Probes})
	pf("Post-warm-up probes only; %d probe(s) sent before the warm-up ended (%s) are excluded from every figure.\n\n",
		s.WarmupProbes, fmtS(s.Settings.WarmupS))
}

// nodesSection: every server's final status and whether their state hashes agree.
func nodesSection(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	pf("## Nodes\n\n")
	if len(s.Nodes) == 0 {
		pf("No server node status found.\n\n")
		return
	}
	type node struct {
		name string
		NodeFinal
	}
	var rows []node
	for _, n := range slices.Sorted(maps.Keys(s.Nodes)) {
		rows = append(rows, node{n, s.Nodes[n]})
	}
	// A node without a status.json has a name and nothing else.
	known := func(f func(node) string) func(node) string {
		return func(n node) string {
			if n.StatusMissing {
				return "—"
			}
			return f(n)
		}
	}
	writeTable(b, []Column[node]{
		col("node", func(n node) string { return mdtext.Inline(n.name) }),
		col("role", known(func(n node) string { return mdtext.Inline(orDash(n.Role)) })),
		col("phase", known(func(n node) string { return mdtext.Inline(orDash(n.Phase)) })),
		col("applied index", known(func(n node) string { return fmt.Sprint(n.AppliedIndex) })),
		col("orders", known(func(n node) string {
			if n.Orders == nil {
				return engine.NotSupported
			}
			return strconv.Itoa(*n.Orders)
		})),
		col("state hash", func(n node) string {
			if n.StatusMissing {
				return "(no status.json)"
			}
			return mdtext.CodeCell(orDash(n.StateHash))
		}),
		col("hash of", known(func(n node) string { return hashOf(n.NodeFinal) })),
	}, rows)
	pf("%s\n\n", agreementLine(s.StateHashes))
}

// leadersSection: who led at load start, every leader change, the unplanned ones, and the rule
// that attributes them to actions.
func leadersSection(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	marks := func(ls []LeaderMark) string {
		var ch []string
		for _, l := range ls {
			ch = append(ch, fmt.Sprintf("%s at %s", l.Node, fmtS(l.AtS)))
		}
		return strings.Join(ch, ", ")
	}
	switch {
	case s.LeaderAtLoadStart == "" && len(s.LeaderChanges) == 0:
	case len(s.LeaderChanges) == 0:
		pf("Leader: %s at load start, no leader change during the load.\n\n", s.LeaderAtLoadStart)
	default:
		pf("Leader: %s at load start; became leader: %s.\n\n", orDash(s.LeaderAtLoadStart), marks(s.LeaderChanges))
	}
	if n := len(s.UnplannedLeaderChanges); n > 0 {
		pf("**Unplanned leader changes: %d** (%s): no step_down, kill or partition of the leader asked for them; "+
			"figures whose window holds one are marked ⚠ (see Warnings).\n\n", n, marks(s.UnplannedLeaderChanges))
	}
	if len(s.LeaderChanges) > 0 || len(s.Failovers) > 0 {
		pf("Leader changes are attributed to actions by this rule: %s.\n\n", s.LeaderWindow.Rule)
	}
}

// agentCPUSection: the rig's own overhead on each node.
func agentCPUSection(b *strings.Builder, s *Summary) {
	if len(s.AgentCPU) == 0 {
		return
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(s.AgentCPU)) {
		c := s.AgentCPU[n]
		parts = append(parts, fmt.Sprintf("%s %.2f %% (max %.1f %%)", n, c.MeanPct, c.MaxPct))
	}
	fmt.Fprintf(b, "Rig overhead — the agent's CPU share per node, mean over the run (percent of one core, "+
		"from its own OS samples): %s.\n\n", strings.Join(parts, " · "))
}

// stagesSection: where the run's time went (writeStages), shown when the run has stages, a book
// or any overhead figure (OverheadFigures).
func stagesSection(b *strings.Builder, s *Summary) {
	if len(s.Stages) == 0 && s.Book == nil && len(overheadParts(s)) == 0 {
		return
	}
	b.WriteString("## Stages\n\n")
	writeStages(b, s)
}

// overheadParts are the run's overhead figures with a value, as "label: value".
func overheadParts(s *Summary) []string {
	var parts []string
	for _, f := range OverheadFigures {
		if _, ok := f.Get(s); ok && !f.NoColumn {
			parts = append(parts, f.Label+": "+f.Cell(s))
		}
	}
	return parts
}

func warningsSection(b *strings.Builder, s *Summary) {
	b.WriteString("## Warnings\n\n")
	if len(s.Warnings) == 0 {
		b.WriteString("None.\n\n")
		return
	}
	for _, w := range s.Warnings {
		b.WriteString("- " + mdtext.Inline(w) + "\n")
	}
	b.WriteString("\n")
}

func plotsSection(b *strings.Builder, s *Summary) {
	if len(s.Plots) == 0 {
		return
	}
	b.WriteString("## Plots\n\n")
	for _, p := range s.Plots {
		fmt.Fprintf(b, "![%s](%s)\n\n", mdtext.Inline(plotTitle(p)), mdtext.Path(p))
	}
}

func definitionsSection(b *strings.Builder, _ *Summary) {
	pf := pfTo(b)
	pf("## Definitions\n\n")
	pf("- Times are seconds from the load_start event; the end of load is the load_end event. Probes sent before warm-up end are excluded from every figure.\n")
	pf("- Latency runs from each probe's intended send time (open loop): a probe that could not even be sent during a pause is charged the pause.\n")
	pf("- Percentiles are nearest-rank over answered probes, with their n; p90 needs n ≥ %d, p99 n ≥ %d and p99.9 n ≥ %d, else n/a.\n", minNForP90, minNForP99, minNForP999)
	pf("- A load average above the CPU count at start or end is flagged: timings from a contended box are upper bounds.\n")
}
