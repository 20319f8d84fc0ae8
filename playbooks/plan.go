package playbooks

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/stats"
)

// Clone returns a deep copy: nothing in it shares memory with p.
func (p *Playbook) Clone() *Playbook {
	c := *p
	c.Tuning = append([]Setting(nil), p.Tuning...)
	c.Engine.Declared = slices.Clone(p.Engine.Declared)
	if p.Engine.Values != nil {
		c.Engine.Values = maps.Clone(p.Engine.Values)
	}
	if p.Placement.Zones != nil {
		c.Placement.Zones = map[string][]string{}
		for z, ms := range p.Placement.Zones {
			c.Placement.Zones[z] = slices.Clone(ms)
		}
	}
	if p.Timeline != nil {
		c.Timeline = make([]Action, len(p.Timeline))
		for i, a := range p.Timeline {
			a.Spec = actions.Clone(a.Spec)
			c.Timeline[i] = a
		}
	}
	if p.Matrix != nil {
		c.Matrix = make([]Axis, len(p.Matrix))
		for i, ax := range p.Matrix {
			c.Matrix[i] = Axis{Key: ax.Key, Values: append([]string(nil), ax.Values...)}
		}
	}
	return &c
}

// combinations lists every choice of one value per axis, the first axis varying slowest.
// No axes give one empty combination.
func combinations(axes []Axis) [][]string {
	out := [][]string{{}}
	for _, ax := range axes {
		var next [][]string
		for _, prefix := range out {
			for _, v := range ax.Values {
				next = append(next, append(append([]string(nil), prefix...), v))
			}
		}
		out = next
	}
	return out
}

// apply returns a copy of p with one combination's values set, and those values by path.
func (p *Playbook) apply(combo []string) (*Playbook, map[string]string, error) {
	c := p.Clone()
	var settings map[string]string
	for i, ax := range p.Matrix {
		f, err := resolveField(c, ax.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("matrix.%s: %w", ax.Key, err)
		}
		if err := f.set(c, combo[i]); err != nil {
			return nil, nil, fmt.Errorf("matrix.%s: %w", ax.Key, err)
		}
		if settings == nil {
			settings = map[string]string{}
		}
		settings[ax.Key] = combo[i]
	}
	return c, settings, nil
}

// formatSettings writes a run's matrix values in axis order: "preload.orders=5M sync_level=2".
func formatSettings(axes []Axis, settings map[string]string) string {
	parts := make([]string, 0, len(axes))
	for _, ax := range axes {
		if v, ok := settings[ax.Key]; ok {
			parts = append(parts, ax.Key+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// Plan expands the matrix and rounds into runs, interleaved: round 1 of every combination,
// then round 2, and so on, so drift over time spreads across all combinations alike. Each run
// holds its own deep copy of the playbook with its matrix values applied (and no matrix left).
// Index and Round count from 1.
func (p *Playbook) Plan() (*Plan, error) {
	if n := countRuns(p); n > maxRuns {
		return nil, fmt.Errorf("plan %s: %w", p.Name, Problems{{Pos: Pos{File: p.Source}, Path: "matrix",
			Msg: fmt.Sprintf("expands to %d runs or more; at most %d", n, maxRuns)}})
	}
	combos := combinations(p.Matrix)
	resolved := make([]*Playbook, len(combos))
	settings := make([]map[string]string, len(combos))
	var probs problems
	probs.file = p.Source
	for i, combo := range combos {
		c, s, err := p.apply(combo)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", p.Name, err)
		}
		for _, is := range crossFieldRules(c) {
			msg := is.msg
			if len(s) > 0 {
				msg += " (in the run with " + formatSettings(p.Matrix, s) + ")"
			}
			probs.add(Pos{File: p.Source}, is.path, "%s", msg)
		}
		c.Matrix, c.Rounds = nil, 1
		resolved[i], settings[i] = c, s
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	pl := &Plan{Playbook: p.Clone()}
	for round := 1; round <= max(p.Rounds, 1); round++ {
		for i := range combos {
			run := resolved[i]
			if round > 1 {
				run = run.Clone() // runs never share a playbook
			}
			var s map[string]string
			if settings[i] != nil {
				s = make(map[string]string, len(settings[i]))
				for k, v := range settings[i] {
					s[k] = v
				}
			}
			pl.Runs = append(pl.Runs, PlannedRun{Index: len(pl.Runs) + 1, Round: round, Settings: s, Playbook: run})
		}
	}
	return pl, nil
}

// Estimate is this run's stage-by-stage estimate from m (nil: the defaults) on target, with its
// book preloaded through the log.
func (p *Playbook) Estimate(m *estimate.Model, target string) estimate.Estimate {
	return p.estimate(m, target, false)
}

func (p *Playbook) estimate(m *estimate.Model, target string, bookReused bool) estimate.Estimate {
	if m == nil {
		m = estimate.NewModel(nil)
	}
	if target == "" {
		target = "local"
	}
	return m.Estimate(estimate.Run{Target: target, Engine: p.Engine.EstimateKey(), PreloadRate: p.Engine.PreloadRate, SyncLevel: p.Engine.SyncLevel(), Orders: p.Preload.Orders,
		Probes: int64(p.Load.ProbeRate * p.Duration.Seconds()), BookReused: bookReused, Duration: p.Duration})
}

// ExpectedDuration is the run's estimate on the local target with the default rates: start-up,
// preload, load, finish and analysis.
func (p *Playbook) ExpectedDuration() time.Duration { return p.Estimate(nil, "").Total }

// ReusesBook reports, per run, whether it will install a book an earlier run of the plan built:
// the runner stores each book after the first run that preloads it, and the book depends only on
// the preload's orders and instruments (every other setting is the load generator's default).
func (pl *Plan) ReusesBook() []bool {
	out := make([]bool, len(pl.Runs))
	seen := map[[2]int64]bool{}
	for i, r := range pl.Runs {
		pr := r.Playbook.Preload
		if pr.Orders == 0 || !r.Playbook.Engine.StoresBooks() {
			continue // only an engine that can install a stored book gets one
		}
		k := [2]int64{pr.Orders, int64(pr.Instruments)}
		if !seen[k] && pl.BookStored != nil && pl.BookStored(r.Playbook) {
			seen[k] = true
		}
		out[i], seen[k] = seen[k], true
	}
	return out
}

// Estimates are the runs' estimates from pl.Model on pl.Target, in run order.
func (pl *Plan) Estimates() []estimate.Estimate {
	reused := pl.ReusesBook()
	out := make([]estimate.Estimate, len(pl.Runs))
	for i, r := range pl.Runs {
		out[i] = r.Playbook.estimate(pl.Model, pl.Target, reused[i])
	}
	return out
}

// ExpectedDuration sums the runs' estimates.
func (pl *Plan) ExpectedDuration() time.Duration {
	var d time.Duration
	for _, e := range pl.Estimates() {
		d += e.Total
	}
	return d
}

// Print writes the plan for a person to read before anything is started.
func (pl *Plan) Print(w io.Writer) {
	p := pl.Playbook
	varied := map[string][]string{}
	for _, ax := range p.Matrix {
		varied[ax.Key] = ax.Values
	}
	// v shows a field's value, or the matrix values when the matrix sets it.
	v := func(path, base string) string {
		if vals, ok := varied[path]; ok {
			return "[" + strings.Join(vals, ", ") + "]"
		}
		return base
	}
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-10s %s\n", label, fmt.Sprintf(format, args...))
	}

	line("playbook", "%s (%s)", p.Name, p.Source)
	if p.Description != "" {
		for _, l := range strings.Split(strings.TrimSpace(p.Description), "\n") {
			line("", "%s", strings.TrimSpace(l))
		}
	}
	line("cluster", "%s server%s, %s client%s",
		v("cluster.servers", fmt.Sprint(p.Cluster.Servers)), pluralIf(varied, "cluster.servers", p.Cluster.Servers),
		v("cluster.clients", fmt.Sprint(p.Cluster.Clients)), pluralIf(varied, "cluster.clients", p.Cluster.Clients))
	e := p.Engine
	asked := e.Settings()
	var set []string
	var left int
	for _, st := range e.Table() {
		path := "engine." + st.Name
		c, ok := asked[st.Name]
		if _, vary := varied[path]; !ok && !vary {
			left++
			continue
		}
		shown := st.Show(c)
		if st.Name == driver.SyncLevel {
			if n, err := strconv.Atoi(c); err == nil {
				shown = fmt.Sprintf("%d (%s)", n, syncName(n))
			}
		}
		set = append(set, st.Name+" "+v(path, shown))
	}
	if left > 0 {
		set = append(set, fmt.Sprintf("%d more at the engine's default", left))
	}
	line("engine", "%s driver: %s", e.DriverName(), strings.Join(set, ", "))
	if e.Command != nil {
		line("", "command: %s, passing %s", e.Command.Binary, strings.Join(e.Command.Carries, ", "))
	}
	for _, w := range pl.CoresWarnings(pl.hostCPUs()) {
		line("cores", "WARNING: %s", w)
	}
	if s := pl.diskModelLine(varied); s != "" {
		line("disk", "%s", s)
	}
	if _, vary := varied["disk.volume"]; vary || p.DiskVolume != "" {
		line("disk", "engine data on the stack's data volume %s (disk.volume)", v("disk.volume", p.DiskVolume))
	}
	var tun []string
	seen := map[string]bool{}
	for _, s := range p.Tuning {
		seen[s.Key] = true
		tun = append(tun, s.Key+"="+v("tuning."+s.Key, s.Value))
	}
	for _, ax := range p.Matrix {
		if k, ok := strings.CutPrefix(ax.Key, "tuning."); ok && !seen[k] {
			tun = append(tun, k+"="+v(ax.Key, ""))
		}
	}
	if len(tun) == 0 {
		line("tuning", "none (kernel settings left as found)")
	} else {
		line("tuning", "%s", strings.Join(tun, ", "))
	}
	line("preload", "%s resting orders over %s instruments",
		v("preload.orders", units.FormatCount(p.Preload.Orders)), v("preload.instruments", fmt.Sprint(p.Preload.Instruments)))
	line("load", "%s probes, warm-up %s excluded, duration %s",
		v("load.probe_rate", units.FormatRate(p.Load.ProbeRate)), v("warmup", units.FormatDuration(p.Warmup)), v("duration", units.FormatDuration(p.Duration)))
	if pz := p.Placement; !pz.IsZero() {
		var zs []string
		for _, z := range slices.Sorted(maps.Keys(pz.Zones)) {
			zs = append(zs, z+": "+strings.Join(pz.Zones[z], ", "))
		}
		between := v(betweenPath+".delay", units.FormatDuration(pz.Between.Delay))
		if _, vary := varied[betweenPath+".jitter"]; vary || pz.Between.Jitter > 0 {
			between += " ± " + v(betweenPath+".jitter", units.FormatDuration(pz.Between.Jitter))
		}
		line("placement", "zones %s; %s each way between zones", strings.Join(zs, "; "), between)
		pairs, _, least, bound := p.linkProbe()
		if _, vary := varied[betweenPath+".delay"]; vary {
			line("", "its links probed before load and again under load: %d round trips on each of %d pairs, given up after %s a pair plus the round trips",
				linkproxy.DefaultProbeCount, pairs, units.FormatDuration(linkproxy.ProbeSlack))
		} else {
			line("", "its links probed before load and again under load: %d round trips on each of %d pairs, about %s, at most %s",
				linkproxy.DefaultProbeCount, pairs, units.FormatDuration(least), units.FormatDuration(bound))
		}
	}
	if len(p.Timeline) == 0 {
		line("timeline", "none (the probe stream alone)")
	}
	for i, a := range p.Timeline {
		at := v(fmt.Sprintf("timeline[%d].at", i), "+"+units.FormatDuration(a.At))
		line(firstLabel(i, "timeline"), "%-8s %s", at, describeAction(a, i, v, entryContext(p, a)))
	}
	for _, s := range pl.allDownLines() {
		line("", "%s", s)
	}
	for _, s := range pl.cpuCrowdLines() {
		line("", "%s", s)
	}
	if head := pl.bufferChainHead(); head != "" {
		line("buffers", "%s:", head)
		for _, s := range pl.bufferChainLines() {
			line("", "%s", s)
		}
	}
	if len(p.Matrix) == 0 {
		line("matrix", "none")
	}
	for i, ax := range p.Matrix {
		line(firstLabel(i, "matrix"), "%s: %s", ax.Key, strings.Join(ax.Values, ", "))
	}
	combos := len(pl.Runs) / max(p.Rounds, 1)
	line("runs", "%d = %d combination%s x %d round%s, rounds interleaved", len(pl.Runs), combos, plural(combos), p.Rounds, plural(p.Rounds))
	for i, s := range reachLines(combos, max(p.Rounds, 1)) {
		line(firstLabel(i, "verdicts"), "%s", s)
	}

	ests, reused := pl.Estimates(), pl.ReusesBook()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "  run\tround\tsettings\tbook")
	for _, st := range estimate.Stages {
		fmt.Fprintf(tw, "\t%s", st)
	}
	fmt.Fprintln(tw, "\ttotal (est.)")
	var total time.Duration
	sources := map[string][]string{}
	for i, r := range pl.Runs {
		s := formatSettings(p.Matrix, r.Settings)
		if s == "" {
			s = "-"
		}
		book := "built"
		switch {
		case r.Playbook.Preload.Orders == 0:
			book = "-"
		case reused[i]:
			book = "reused"
		}
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s", r.Index, r.Round, s, book)
		for _, st := range ests[i].Stages {
			fmt.Fprintf(tw, "\t%s", units.FormatDuration(st.D))
			if !slices.Contains(sources[st.Name], st.From) {
				sources[st.Name] = append(sources[st.Name], st.From)
			}
		}
		fmt.Fprintf(tw, "\t%s\n", units.FormatDuration(ests[i].Total))
		total += ests[i].Total
	}
	tw.Flush()
	target := pl.Target
	if target == "" {
		target = "local"
	}
	line("expected", "%s in total on %s: every stage of every run, from the stage times of earlier runs of", units.FormatDuration(total), target)
	line("", "the same engine on that target (%s in the results folder), its declared preload rate,", estimate.HistoryFile)
	line("", "or this machine's defaults (the reference engine's); a run whose book an")
	line("", "earlier run built installs the stored book instead of preloading (\"reused\"):")
	for _, st := range estimate.Stages {
		line("", "  %-9s %s", st, strings.Join(sources[st], "; "))
	}
}

// perRunHeadlines are the sweep report's headline figures every run gives one value of: the
// probes' p50 and p99 (sweep.Metrics). The timeline's headline figures (a snapshot's take, a
// step-down's gap) widen the family; they are left out, so the family is a lower bound.
const perRunHeadlines = 2

// reachLines say which verdicts the sweep's rounds can reach: the sweep report tests every
// combination but the baseline against it on each headline figure, corrected together by
// Benjamini–Hochberg, whose strongest difference passes only if its p ≤ Alpha/family; at n runs
// a side Mann–Whitney's p is never below stats.MinP(n, n). None for a lone combination.
func reachLines(combos, rounds int) []string {
	if combos < 2 {
		return nil
	}
	family := (combos - 1) * perRunHeadlines
	bound := stats.Alpha / float64(family)
	minP := stats.MinP(rounds, rounds)
	out := []string{
		fmt.Sprintf("at %d round%s (%d runs a side) Mann–Whitney's smallest two-sided p is %.3g; the report tests the %d other",
			rounds, plural(rounds), rounds, minP, combos-1),
		fmt.Sprintf("combination%s against the baseline on at least %d per-run headline figures (probes p50, p99): a Benjamini–Hochberg",
			plural(combos-1), perRunHeadlines),
		fmt.Sprintf("family of at least %d verdicts, whose strongest difference is called at q %.2g only if its p ≤ %.2g/%d = %.3g:",
			family, stats.Alpha, stats.Alpha, family, bound),
	}
	if minP <= bound {
		return append(out, "the rank test can reach it")
	}
	return append(out, fmt.Sprintf("the rank test cannot (a difference called there rests on Welch's interval alone, marked weak); at least %d rounds would",
		stats.RunsToReach(family)))
}

// diskModelLine is the disk model under the engine data and what its probe before load costs by
// the model's own arithmetic (diskmodel.ProbeTime) and is given up after (diskmodel.ProbeBound),
// the longest of the plan's runs; "" without a model.
func (pl *Plan) diskModelLine(varied map[string][]string) string {
	var axes []string
	for _, k := range diskKeys[1:] {
		if vals, ok := varied["disk."+k]; ok {
			axes = append(axes, fmt.Sprintf("disk.%s [%s]", k, strings.Join(vals, ", ")))
		}
	}
	p := pl.Playbook
	if p.Disk.Zero() && len(axes) == 0 {
		return ""
	}
	o := diskmodel.ProbeOptions{Repeats: diskmodel.ProbePasses}
	var pass, bound time.Duration
	for _, r := range pl.Runs {
		if d := r.Playbook.Disk; !d.Zero() {
			pass = max(pass, diskmodel.ProbeTime(d, diskmodel.ProbeOptions{}))
			bound = max(bound, diskmodel.ProbeBound(d, o))
		}
	}
	model := p.Disk.String()
	if len(axes) > 0 {
		model += ", with " + strings.Join(axes, ", ")
	}
	return fmt.Sprintf("model %s; its probe before load takes %s a pass by the model's arithmetic, %d passes, given up after %s",
		model, units.FormatDuration(pass.Round(time.Millisecond)), diskmodel.ProbePasses, units.FormatDuration(bound.Round(100*time.Millisecond)))
}

// allDownLines name every moment a run of the plan has every server down (allow_all_down).
func (pl *Plan) allDownLines() []string {
	return pl.eachRunLines(func(p *Playbook) []string {
		var out []string
		for _, ad := range p.AllDowns() {
			entries := make([]string, len(ad.Entries))
			for k, i := range ad.Entries {
				entries[k] = fmt.Sprintf("timeline[%d]", i)
			}
			back := "none back before the run ends"
			if ad.Until >= 0 {
				back = "the first back at +" + units.FormatDuration(ad.Until)
			}
			out = append(out, fmt.Sprintf("all %d servers down at +%s (%s; %s): nothing serves meanwhile, as allow_all_down allows",
				p.Cluster.Servers, units.FormatDuration(ad.At), strings.Join(entries, ", "), back))
		}
		return out
	})
}

// cpuCrowdLines name, on the local target (every node one host: this machine), the moment a run's
// CPU hogs ask for more busy threads at once than the machine has CPUs.
func (pl *Plan) cpuCrowdLines() []string {
	if pl.Target != "" && pl.Target != "local" {
		return nil
	}
	cpus := pl.LocalCPUs
	if cpus <= 0 {
		cpus = runtime.NumCPU()
	}
	return pl.eachRunLines(func(p *Playbook) []string {
		c, ok := p.CPUCrowd(cpus)
		if !ok {
			return nil
		}
		entries := make([]string, len(c.Entries))
		for k, i := range c.Entries {
			entries[k] = fmt.Sprintf("timeline[%d]", i)
		}
		nice := ""
		if c.Nice < 0 {
			nice = fmt.Sprintf(", down to nice %d (ahead of the engines)", c.Nice)
		}
		return []string{fmt.Sprintf("note: at +%s the CPU hogs %s spin %d threads at once%s on this machine's %d CPUs: the local target puts every node on it, so they crowd one another and every engine, not only the nodes they name",
			units.FormatDuration(c.At), strings.Join(entries, ", "), c.Threads, nice, cpus)}
	})
}

// eachRunLines are lines's lines for every combination of the plan (round 1), once each, with
// the runs a line holds in when not all of them.
func (pl *Plan) eachRunLines(lines func(p *Playbook) []string) []string {
	var order []string
	runs := map[string][]int{}
	combos := 0
	for _, r := range pl.Runs {
		if r.Round != 1 {
			continue
		}
		combos++
		for _, s := range lines(r.Playbook) {
			if _, ok := runs[s]; !ok {
				order = append(order, s)
			}
			runs[s] = append(runs[s], r.Index)
		}
	}
	for k, s := range order {
		if n := len(runs[s]); n < combos {
			order[k] = fmt.Sprintf("%s, in run%s %s", s, plural(n), strings.Trim(fmt.Sprint(runs[s]), "[]"))
		}
	}
	return order
}

func describeAction(a Action, i int, v func(path, base string) string, c actions.Context) string {
	if a.Spec == nil {
		return a.Kind
	}
	return a.Spec.Describe(entryView{a: a, path: fmt.Sprintf("timeline[%d].%s.", i, a.Kind), v: v, c: c})
}

func pathVaried(v func(path, base string) string, path string) (string, bool) {
	const probe = "\x00"
	s := v(path, probe)
	return s, s != probe
}

func isVaried(v func(path, base string) string, path string) bool {
	_, ok := pathVaried(v, path)
	return ok
}

func syncName(level int) string {
	switch level {
	case 0:
		return "no sync"
	case 1:
		return "fdatasync"
	case 2:
		return "fsync"
	}
	return "?"
}

func pluralIf(varied map[string][]string, path string, n int) string {
	if _, ok := varied[path]; ok {
		return "s"
	}
	return plural(n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// SortedSettings returns a run's matrix settings as "key=value" in key order, for names and logs.
func (r PlannedRun) SortedSettings() []string {
	keys := make([]string, 0, len(r.Settings))
	for k := range r.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + r.Settings[k]
	}
	return out
}

// SyncLevel is the durability level the estimate model keys on: the engine's sync_level, or 2
// (every write synced, the slowest) for an engine without one.
func (e Engine) SyncLevel() int {
	if n, ok := e.Int(driver.SyncLevel); ok {
		return int(n)
	}
	return 2
}

// firstLabel labels the first line of a list; the lines after it stand under it.
func firstLabel(i int, label string) string {
	if i == 0 {
		return label
	}
	return ""
}
