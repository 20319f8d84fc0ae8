package history

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rig-dev/rig/stats"
)

// Orders of a trend's versions.
const (
	OrderDate   = "date"   // by the first run of each version
	OrderCommit = "commit" // by TrendOptions.Commits (git rev-list --reverse), then by date
	// OrderVersion sorts the labels as versions: digit runs by value (v2 < v10, 1.9.0 < 1.10.0).
	OrderVersion = "version"
)

// MaxPermutations bounds the shuffles per candidate change point. p cannot go below
// 1/(permutations+1), so 99,999 already resolves p to 0.00001, far below any --max-p a verdict
// uses; the work grows with the count (10^8 shuffles ran for ten minutes).
const MaxPermutations = 99_999

// ErrPermutations: more shuffles than MaxPermutations.
var ErrPermutations = fmt.Errorf("at most %d permutations: p cannot go below 1/(permutations+1), so more only cost time", MaxPermutations)

// TrendOptions choose a trend's runs, order and test.
type TrendOptions struct {
	Figure string
	Filter Filter
	Order  string // OrderDate (default) or OrderCommit
	// Commits are the engine's commits oldest first (git rev-list --reverse HEAD), for
	// OrderCommit; versions whose commit is not among them follow, by date.
	Commits []string
	// PerRun: one point per run (its median) instead of one per version (the median of all its
	// runs' values).
	PerRun bool
	stats.EDivisiveOptions
}

// Version is one engine build in a trend, with every value its runs gave.
type Version struct {
	Label  string       `json:"label"`
	Commit string       `json:"commit,omitempty"`
	SHA256 string       `json:"sha256,omitempty"`
	First  time.Time    `json:"first_run"`
	Runs   []*Run       `json:"-"`
	RunIDs []string     `json:"runs"`
	Values []float64    `json:"values"`
	Sample stats.Sample `json:"sample"`
}

// Change is a change point of a trend: where it is, how big, how sure.
type Change struct {
	stats.ChangePoint
	Version int    `json:"version"` // index in Trend.Versions of the first version after the change
	Label   string `json:"label"`   // that version's label
	Commit  string `json:"commit,omitempty"`
	// Size compares every value of the versions after the change point (up to the next one)
	// with those before it (back to the previous one): Base is before, Contender after, Welch
	// the difference of means with its 95 % CI, Change the relative change.
	Size    stats.Comparison `json:"size"`
	Verdict string           `json:"verdict"` // better | worse | higher | lower, by the figure's direction
}

// Trend is a figure across engine versions.
type Trend struct {
	Figure   string          `json:"figure"`
	Label    string          `json:"label"`
	Unit     string          `json:"unit"`
	Dir      stats.Direction `json:"direction"`
	Order    string          `json:"order"`
	Versions []*Version      `json:"versions"`
	// Series is what the change points were sought in: one value per version (its median), or
	// per run; PointVersion maps each point to its version.
	Series       []float64 `json:"series"`
	PointVersion []int     `json:"point_version"`
	Changes      []Change  `json:"change_points"`
}

// Trend reads the figure of the runs o.Filter selects, orders their engine versions and finds
// the change points of the series (stats.EDivisive).
func (x *Index) Trend(ctx context.Context, o TrendOptions) (*Trend, error) {
	pts, err := x.Figure(ctx, o.Filter, o.Figure)
	if err != nil {
		return nil, err
	}
	t := &Trend{Figure: o.Figure, Order: o.Order}
	if t.Order == "" {
		t.Order = OrderDate
	}
	if t.Order != OrderDate && t.Order != OrderCommit && t.Order != OrderVersion {
		return nil, fmt.Errorf("order %q: want %s, %s or %s", o.Order, OrderDate, OrderCommit, OrderVersion)
	}
	byLabel := map[string]*Version{}
	median := map[int64]float64{}
	for _, p := range pts {
		median[p.Run.ID] = p.Figure.Sample.Median
		if t.Label == "" {
			t.Label, t.Unit, t.Dir = p.Figure.Label, p.Figure.Unit, p.Figure.Dir
		}
		l := p.Run.EngineLabel()
		v := byLabel[l]
		if v == nil {
			v = &Version{Label: l, Commit: p.Run.Engine.Commit, SHA256: p.Run.Engine.SHA256, First: p.Run.Started}
			byLabel[l] = v
			t.Versions = append(t.Versions, v)
		}
		v.Runs, v.RunIDs = append(v.Runs, p.Run), append(v.RunIDs, p.Run.RunID)
		v.Values = append(v.Values, p.Figure.Values...)
	}
	rank := map[string]int{}
	for i, c := range o.Commits {
		rank[c] = i
	}
	pos := func(v *Version) (int, bool) {
		if t.Order != OrderCommit || v.Commit == "" {
			return 0, false
		}
		if i, ok := rank[v.Commit]; ok {
			return i, true
		}
		for c, i := range rank { // a short commit
			if len(v.Commit) >= 7 && len(c) >= len(v.Commit) && c[:len(v.Commit)] == v.Commit {
				return i, true
			}
		}
		return 0, false
	}
	sort.SliceStable(t.Versions, func(i, j int) bool {
		a, b := t.Versions[i], t.Versions[j]
		if t.Order == OrderVersion {
			if c := versionCompare(a.Label, b.Label); c != 0 {
				return c < 0
			}
			return a.First.Before(b.First)
		}
		pa, oka := pos(a)
		pb, okb := pos(b)
		switch {
		case oka && okb && pa != pb:
			return pa < pb
		case oka != okb:
			return oka
		}
		return a.First.Before(b.First)
	})
	for vi, v := range t.Versions {
		v.Sample = stats.Describe(v.Values)
		if o.PerRun {
			for _, r := range v.Runs {
				t.Series = append(t.Series, median[r.ID])
				t.PointVersion = append(t.PointVersion, vi)
			}
			continue
		}
		t.Series = append(t.Series, v.Sample.Median)
		t.PointVersion = append(t.PointVersion, vi)
	}
	if o.Permutations > MaxPermutations {
		return nil, fmt.Errorf("%d permutations: %w", o.Permutations, ErrPermutations)
	}
	cps, err := stats.EDivisiveContext(ctx, t.Series, o.EDivisiveOptions)
	if err != nil {
		return nil, fmt.Errorf("trend of %s: %w", o.Figure, err)
	}
	for i, cp := range cps {
		lo, hi := 0, len(t.Series)
		if i > 0 {
			lo = cps[i-1].Index
		}
		if i+1 < len(cps) {
			hi = cps[i+1].Index
		}
		t.Changes = append(t.Changes, t.change(cp, lo, hi))
	}
	return t, nil
}

// change sizes a change point from the raw values of the versions on each side of it, up to its
// neighbours.
func (t *Trend) change(cp stats.ChangePoint, lo, hi int) Change {
	vi := t.PointVersion[cp.Index]
	c := Change{ChangePoint: cp, Version: vi, Label: t.Versions[vi].Label, Commit: t.Versions[vi].Commit}
	var before, after []float64
	seen := map[int]bool{}
	for p := lo; p < hi; p++ {
		v := t.PointVersion[p]
		if seen[v] {
			continue
		}
		seen[v] = true
		if p < cp.Index {
			before = append(before, t.Versions[v].Values...)
		} else {
			after = append(after, t.Versions[v].Values...)
		}
	}
	c.Size = stats.Compare(before, after, t.Dir)
	if c.Size.Welch == nil {
		if w, ok := stats.WelchTest(before, after); ok {
			c.Size.Welch = &w
		}
	}
	b, a := c.Size.Base.Median, c.Size.Contender.Median
	switch {
	case t.Dir == stats.LowerIsBetter && a > b, t.Dir == stats.HigherIsBetter && a < b:
		c.Verdict = stats.Worse
	case t.Dir != stats.Neutral:
		c.Verdict = stats.Better
	case a > b:
		c.Verdict = stats.Higher
	default:
		c.Verdict = stats.Lower
	}
	return c
}

// versionCompare orders version labels: runs of digits by their value, everything else by byte.
func versionCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return cmp.Compare(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
