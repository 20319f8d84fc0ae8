package sweep

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// CompareOptions narrow each side of a comparison to the runs whose settings match.
type CompareOptions struct {
	BaseWhere      string // key=value pairs, as for Options.Baseline
	ContenderWhere string
	// Pool merges each side's combinations (after the filters) into one sample, e.g. every book
	// size at sync level 0 against every book size at sync level 2.
	Pool bool
}

// Pair is a baseline combination and the contender combination it is compared with.
type Pair struct {
	Label     string
	Base      *Group
	Contender *Group
}

// Row is one figure of one pair.
type Row struct {
	Pair   *Pair
	Metric Metric
	C      stats.Comparison
}

// Comparison is `rig compare`'s result.
type Comparison struct {
	Base, Contender *Set
	Pairs           []*Pair
	Unmatched       []string // combinations on one side only
	Env             []string // every environment difference, and every run whose load exceeded its CPUs
	Rows            []Row
	// Families are the verdicts corrected together (Metric.Family), in order of first row.
	Families []Family
}

// Family is one false-discovery family: its tested verdicts, and the differences among them
// before and after the Benjamini–Hochberg correction (stats.ControlFDR).
type Family struct {
	Name                  string
	Tested, Before, After int
}

// Compare compares the runs of two folders (each a run or a sweep), combination by combination.
// When each side, after its filter, holds one combination, those two are compared whatever
// their settings; otherwise combinations are paired by equal settings.
func Compare(base, contender *Set, opts CompareOptions) (*Comparison, error) {
	bg, err := filterGroups(base, opts.BaseWhere, "--base-where")
	if err != nil {
		return nil, err
	}
	cg, err := filterGroups(contender, opts.ContenderWhere, "--contender-where")
	if err != nil {
		return nil, err
	}
	c := &Comparison{Base: base, Contender: contender}
	if opts.Pool {
		bg, cg = []*Group{pool(bg)}, []*Group{pool(cg)}
	}
	// Combinations pair by their settings less the keys the filters chose on: sync 0 against
	// sync 2 pairs each book size with itself.
	ignore := map[string]bool{}
	for _, w := range []string{opts.BaseWhere, opts.ContenderWhere} {
		if sel, err := ParseSelector(w); err == nil && w != "" {
			for k := range sel {
				ignore[k] = true
			}
		}
	}
	key := func(g *Group) string {
		rest := map[string]string{}
		for k, v := range g.Settings {
			if !ignore[k] {
				rest[k] = v
			}
		}
		return Label(nil, rest)
	}
	if len(bg) == 1 && len(cg) == 1 {
		l := bg[0].Label
		if cg[0].Label != l {
			l = bg[0].Label + " → " + cg[0].Label
		}
		c.Pairs = []*Pair{{Label: l, Base: bg[0], Contender: cg[0]}}
	} else {
		// Paired by settings, not by label: a lone run folder has no axis order.
		byKey := map[string]*Group{}
		for _, g := range cg {
			byKey[key(g)] = g
		}
		for _, g := range bg {
			if o := byKey[key(g)]; o != nil {
				l := g.Label
				if o.Label != l {
					l = g.Label + " → " + o.Label
				}
				c.Pairs = append(c.Pairs, &Pair{Label: l, Base: g, Contender: o})
				delete(byKey, key(g))
			} else {
				c.Unmatched = append(c.Unmatched, "baseline only: "+g.Label)
			}
		}
		for _, g := range cg {
			if byKey[key(g)] != nil {
				c.Unmatched = append(c.Unmatched, "contender only: "+g.Label)
			}
		}
		if len(c.Pairs) == 0 {
			return nil, fmt.Errorf("no combination is on both sides (%s); narrow each side to one with --base-where and --contender-where",
				strings.Join(c.Unmatched, "; "))
		}
	}
	all := append(append([]*RunData(nil), base.Runs...), contender.Runs...)
	for _, p := range c.Pairs {
		for _, m := range Metrics(all) {
			bv, cv := p.Base.Values(m), p.Contender.Values(m)
			if len(bv) == 0 && len(cv) == 0 {
				continue
			}
			c.Rows = append(c.Rows, Row{Pair: p, Metric: m, C: stats.Compare(bv, cv, m.Dir)})
		}
	}
	byFamily := map[string][]*stats.Comparison{}
	for i := range c.Rows {
		f := c.Rows[i].Metric.Family()
		if byFamily[f] == nil {
			c.Families = append(c.Families, Family{Name: f})
		}
		byFamily[f] = append(byFamily[f], &c.Rows[i].C)
	}
	for i := range c.Families {
		f := &c.Families[i]
		cs := byFamily[f.Name]
		f.Tested = len(cs)
		f.Before, f.After = stats.ControlFDR(cs)
	}
	var pb, pc []*Group
	for _, p := range c.Pairs {
		pb, pc = append(pb, p.Base), append(pc, p.Contender)
	}
	c.Env = envDifferences(runsOf(pb), runsOf(pc))
	c.Env = append(c.Env, attemptDifferences("baseline", runsOf(pb))...)
	c.Env = append(c.Env, attemptDifferences("contender", runsOf(pc))...)
	return c, nil
}

func filterGroups(set *Set, where, flag string) ([]*Group, error) {
	groups := set.Groups()
	if where == "" {
		return groups, nil
	}
	sel, err := ParseSelector(where)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	var out []*Group
	for _, g := range groups {
		if sel.Match(g.Settings) {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		var labels []string
		for _, g := range groups {
			labels = append(labels, g.Label)
		}
		return nil, fmt.Errorf("%s %q matches no runs of %s; it has: %s", flag, where, set.Dir, strings.Join(labels, "; "))
	}
	return out, nil
}

// pool merges groups into one; its settings are those all of them share.
func pool(gs []*Group) *Group {
	p := &Group{Settings: map[string]string{}}
	for k, v := range gs[0].Settings {
		same := true
		for _, g := range gs[1:] {
			if g.Settings[k] != v {
				same = false
			}
		}
		if same {
			p.Settings[k] = v
		}
	}
	var labels []string
	for _, g := range gs {
		p.Runs = append(p.Runs, g.Runs...)
		labels = append(labels, g.Label)
	}
	p.Label = strings.Join(labels, " + ")
	if len(gs) > 1 {
		p.Label = "pooled: " + p.Label
	}
	return p
}

func runsOf(gs []*Group) []*RunData {
	var out []*RunData
	for _, g := range gs {
		out = append(out, g.Runs...)
	}
	return out
}

// env is what must match between two sides for a difference to be the settings' doing.
type env struct {
	instance, kernel, rig, config, cpus, target, placement map[string]bool
}

func newEnv() env {
	return env{map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{},
		map[string]bool{}}
}

// placementOf says where a run's nodes were: the stack's placement and each node's AZ, from the
// inventory, else from the AZ each node's agent read from the instance metadata; "" off AWS.
func placementOf(m *rundir.Manifest) string {
	var zones []string
	placement := ""
	if m.Inventory != nil {
		placement = m.Inventory.Placement
		for _, n := range m.Inventory.Nodes {
			az := n.AvailabilityZone
			if f, ok := m.Facts[n.Name]; az == "" && ok && f.Instance != nil {
				az = f.Instance.AvailabilityZone
			}
			if az != "" {
				zones = append(zones, n.Name+" "+az)
			}
		}
	}
	if placement == "" && len(zones) == 0 {
		return ""
	}
	if placement == "" {
		placement = "placement not recorded"
	}
	if len(zones) == 0 {
		return placement
	}
	return placement + " (" + strings.Join(zones, ", ") + ")"
}

func readEnv(runs []*RunData) (env, []string) {
	e := newEnv()
	var load []string
	for _, r := range runs {
		m := r.Manifest
		if m == nil {
			continue
		}
		rig := m.Rig.Version
		if m.Rig.Commit != "" {
			rig += " " + m.Rig.Commit[:min(12, len(m.Rig.Commit))]
		}
		if m.Rig.Modified {
			rig += " (modified)"
		}
		e.rig[rig] = true
		e.config[m.ConfigHash[:min(12, len(m.ConfigHash))]] = true
		e.cpus[fmt.Sprint(m.CPUs)] = true
		e.target[m.Target] = true
		if p := placementOf(m); p != "" {
			e.placement[p] = true
		}
		// The worst load average against its CPUs, on the controller or any node: one line a run.
		worst, worstCPUs, where := 0.0, 0, ""
		over := func(l float64, cpus int, w string) {
			if cpus > 0 && l > float64(cpus) && l/float64(cpus) > worst/float64(max(worstCPUs, 1)) {
				worst, worstCPUs, where = l, cpus, w
			}
		}
		for _, la := range [][]float64{m.LoadAvg.Start, m.LoadAvg.End} {
			if len(la) > 0 {
				over(la[0], m.CPUs, "the controller")
			}
		}
		for name, f := range m.Facts {
			e.kernel[f.Kernel] = true
			if f.Instance != nil && f.Instance.Type != "" {
				e.instance[f.Instance.Type] = true
			} else {
				e.instance["(not EC2)"] = true
			}
			over(f.Load.Load1, f.CPUs, name)
		}
		if where != "" {
			name := r.Ref.Dir
			if name == "" || name == "." {
				name = r.Dir
			}
			load = append(load, fmt.Sprintf("%s: load average %.2f on %s exceeds its %d CPUs: its timings are upper bounds", name, worst, where, worstCPUs))
		}
	}
	return e, load
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(unknown)"
	}
	return strings.Join(out, ", ")
}

// envDifferences lists every way the two sides' environments differ, every mix within a side,
// and every run that ran on an overloaded machine.
func envDifferences(base, contender []*RunData) []string {
	be, bl := readEnv(base)
	ce, cl := readEnv(contender)
	var out []string
	for _, f := range []struct {
		name string
		b, c map[string]bool
	}{
		{"instance type", be.instance, ce.instance},
		{"kernel", be.kernel, ce.kernel},
		{"rig version", be.rig, ce.rig},
		{"config hash", be.config, ce.config},
		{"controller CPUs", be.cpus, ce.cpus},
		{"target", be.target, ce.target},
		{"placement", be.placement, ce.placement},
	} {
		bk, ck := keys(f.b), keys(f.c)
		if bk != ck {
			out = append(out, fmt.Sprintf("%s differs: baseline %s, contender %s", f.name, bk, ck))
		} else if len(f.b) > 1 {
			out = append(out, fmt.Sprintf("%s is mixed within each side: %s", f.name, bk))
		}
	}
	return append(append(out, bl...), cl...)
}

// attemptDifferences lists, for one side's runs of a resumed sweep, every environment figure
// that changed between the attempts they came from: instance type, kernel, rig, controller CPUs,
// target, and the controller's load average at the start of the runs (mean 1-minute figure, told
// apart when one attempt's is more than half as high again and at least 0.5 above another's).
func attemptDifferences(side string, runs []*RunData) []string {
	by := map[int][]*RunData{}
	var order []int
	for _, r := range runs {
		if r.Manifest == nil || r.Ref.Attempt == 0 {
			continue
		}
		if by[r.Ref.Attempt] == nil {
			order = append(order, r.Ref.Attempt)
		}
		by[r.Ref.Attempt] = append(by[r.Ref.Attempt], r)
	}
	if len(order) < 2 {
		return nil
	}
	sort.Ints(order)
	envs := make([]env, len(order))
	load := make([]float64, len(order))
	for i, a := range order {
		envs[i], _ = readEnv(by[a])
		n := 0
		for _, r := range by[a] {
			if la := r.Manifest.LoadAvg.Start; len(la) > 0 {
				load[i] += la[0]
				n++
			}
		}
		if n > 0 {
			load[i] /= float64(n)
		}
	}
	var out []string
	for _, f := range []struct {
		name string
		get  func(e env) map[string]bool
	}{
		{"instance type", func(e env) map[string]bool { return e.instance }},
		{"kernel", func(e env) map[string]bool { return e.kernel }},
		{"rig version", func(e env) map[string]bool { return e.rig }},
		{"controller CPUs", func(e env) map[string]bool { return e.cpus }},
		{"target", func(e env) map[string]bool { return e.target }},
		{"placement", func(e env) map[string]bool { return e.placement }},
	} {
		var parts []string
		differs := false
		for i, a := range order {
			k := keys(f.get(envs[i]))
			parts = append(parts, fmt.Sprintf("attempt %d: %s", a, k))
			differs = differs || k != keys(f.get(envs[0]))
		}
		if differs {
			out = append(out, fmt.Sprintf("%s: %s changed between the sweep's attempts (%s)", side, f.name, strings.Join(parts, "; ")))
		}
	}
	lo, hi := load[0], load[0]
	for _, l := range load {
		lo, hi = min(lo, l), max(hi, l)
	}
	if hi-lo >= 0.5 && hi > 1.5*lo {
		var parts []string
		for i, a := range order {
			parts = append(parts, fmt.Sprintf("attempt %d: %.2f", a, load[i]))
		}
		out = append(out, fmt.Sprintf("%s: the controller's load average at run start changed between the sweep's attempts (mean 1-minute: %s)", side, strings.Join(parts, "; ")))
	}
	return out
}

// Text writes the comparison for a terminal: environment first, then one table per pair.
func (c *Comparison) Text(w io.Writer) {
	side := func(name string, s *Set, gs []*Group) {
		n := 0
		for _, g := range gs {
			n += g.Ran()
		}
		kind := "run"
		if s.Sweep != nil {
			kind = "sweep " + s.Sweep.ID
		}
		fmt.Fprintf(w, "%-10s %s (%s, %d run(s) with figures)\n", name, s.Dir, kind, n)
	}
	var bg, cg []*Group
	for _, p := range c.Pairs {
		bg, cg = append(bg, p.Base), append(cg, p.Contender)
	}
	side("Baseline:", c.Base, bg)
	side("Contender:", c.Contender, cg)
	fmt.Fprintln(w)
	if len(c.Env) == 0 {
		fmt.Fprintln(w, "Environment: same instance type, kernel, rig version, config hash and target; no run overloaded.")
	} else {
		fmt.Fprintln(w, "Environment warnings (a difference below may be theirs, not the settings'):")
		for _, e := range c.Env {
			fmt.Fprintln(w, "  ! "+e)
		}
	}
	for _, u := range c.Unmatched {
		fmt.Fprintln(w, "  not compared, "+u)
	}
	for _, p := range c.Pairs {
		fmt.Fprintf(w, "\n%s\n\n", p.Label)
		fmt.Fprintln(w, "| Metric | Unit | Better | Baseline | Contender | Diff [95 % CI] (change) | MW p | q (BH) | Verdict |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, r := range c.Rows {
			if r.Pair != p {
				continue
			}
			better := "—"
			switch r.Metric.Dir {
			case stats.LowerIsBetter:
				better = "lower"
			case stats.HigherIsBetter:
				better = "higher"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Metric.Label, r.Metric.Unit, better,
				Cell(r.Metric, r.C.Base), Cell(r.Metric, r.C.Contender), DiffCell(r.C), mwCell(r.C), qCell(r.C), VerdictCell(r.C))
		}
	}
	for _, f := range c.Families {
		line := fdrLine(f.Tested, f.Before, f.After)
		if len(c.Families) > 1 {
			line = fmt.Sprintf("_%s:_ %s", f.Name, line)
		}
		fmt.Fprintln(w, "\n"+line)
	}
	if len(c.Families) > 1 {
		fmt.Fprintln(w, "\nThe cause figures (time per cause and unexplained, as shares of each kind of window and of the excursions) and the excursions' own figures are corrected as a family of their own, so they do not dilute the other verdicts.")
	}
	fmt.Fprintln(w, "\n"+verdictRule)
}
