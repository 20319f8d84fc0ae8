package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// Filter selects runs. Zero fields select everything; Status "" means ok runs only.
type Filter struct {
	Playbook string
	Sweep    string
	Target   string            // exact target, or a substring of the instance types (c6in.16xlarge)
	Engine   string            // a version label, or a prefix of the engine's commit or binary sha256
	Where    map[string]string // settings by playbook path: engine.sync_level=2
	Since    time.Time
	Until    time.Time
	Status   string // "ok" (default), "failed", or "all"
}

// MaxWhere bounds a filter's settings: each is one condition of the query, and SQLite refuses a
// query whose expression tree is more than 1,000 deep ("Expression tree is too large").
const MaxWhere = 100

// ErrFilter classifies a filter rig does not run (over a limit).
var ErrFilter = errors.New("filter over a limit")

// Check says why f is not a filter rig runs, or nil.
func (f Filter) Check() error {
	if len(f.Where) > MaxWhere {
		return fmt.Errorf("%w: %d settings to match; at most %d (each is one condition of the query, and SQLite refuses a query more than 1,000 conditions deep)", ErrFilter, len(f.Where), MaxWhere)
	}
	return nil
}

// Run is one indexed run.
type Run struct {
	ID                                int64
	RunID, Folder, SweepID, RunDir    string
	Round, Attempt                    int
	Combination, Playbook, ConfigHash string
	Command                           []string
	Status, Error                     string
	Started, Ended                    time.Time
	Target, Stack                     string
	InstanceTypes, Machine, Kernel    string
	CPUs                              int
	Rig                               rundir.BuildInfo
	Engine                            rundir.EngineBuild
	Load1Start, Load1End              *float64
	Warnings                          int
}

// EngineLabel names the run's engine build (Record.EngineLabel).
func (r *Run) EngineLabel() string {
	return engineLabel(r.Engine.Version, r.Engine.Commit, r.Engine.SHA256)
}

// Where describes the machine: instance types on EC2, else its facts, else the target.
func (r *Run) Where() string {
	switch {
	case r.InstanceTypes != "":
		return r.Target + " " + r.InstanceTypes
	case r.Machine != "":
		return r.Target + " (" + r.Machine + ")"
	}
	return r.Target
}

const runCols = `r.id, r.run_id, r.folder, r.sweep_id, r.run_dir, r.round, r.attempt, r.combination, r.playbook, r.config_hash,
	r.command, r.status, r.error, r.started, r.ended, r.target, r.stack, r.instance_types, r.machine, r.kernel, r.cpus,
	r.rig_version, r.rig_commit, r.rig_modified, r.go_version, r.engine_driver, r.engine_version, r.engine_commit,
	r.engine_sha256, r.load1_start, r.load1_end, r.warnings`

func scanRun(sc interface{ Scan(...any) error }, extra ...any) (*Run, error) {
	var r Run
	var cmd string
	var started, ended int64
	var ls, le sql.NullFloat64
	dest := []any{&r.ID, &r.RunID, &r.Folder, &r.SweepID, &r.RunDir, &r.Round, &r.Attempt, &r.Combination, &r.Playbook, &r.ConfigHash,
		&cmd, &r.Status, &r.Error, &started, &ended, &r.Target, &r.Stack, &r.InstanceTypes, &r.Machine, &r.Kernel, &r.CPUs,
		&r.Rig.Version, &r.Rig.Commit, &r.Rig.Modified, &r.Rig.Go, &r.Engine.Driver, &r.Engine.Version, &r.Engine.Commit,
		&r.Engine.SHA256, &ls, &le, &r.Warnings}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	json.Unmarshal([]byte(cmd), &r.Command)
	r.Started = time.Unix(0, started).UTC()
	if ended != 0 {
		r.Ended = time.Unix(0, ended).UTC()
	}
	if ls.Valid {
		r.Load1Start = &ls.Float64
	}
	if le.Valid {
		r.Load1End = &le.Float64
	}
	return &r, nil
}

// where builds the SQL condition and its arguments for f over runs r.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	switch f.Status {
	case "", rundir.StatusOK:
		conds = append(conds, "r.status = 'ok'")
	case "all":
	default:
		conds, args = append(conds, "r.status = ?"), append(args, f.Status)
	}
	if f.Playbook != "" {
		conds, args = append(conds, "r.playbook = ?"), append(args, f.Playbook)
	}
	if f.Sweep != "" {
		conds, args = append(conds, "r.sweep_id = ?"), append(args, f.Sweep)
	}
	if f.Target != "" {
		conds, args = append(conds, "(r.target = ? OR instr(r.instance_types, ?) > 0)"), append(args, f.Target, f.Target)
	}
	if f.Engine != "" {
		conds = append(conds, "(r.engine_version = ? OR substr(r.engine_commit, 1, length(?)) = ? OR substr(r.engine_sha256, 1, length(?)) = ?)")
		args = append(args, f.Engine, f.Engine, f.Engine, f.Engine, f.Engine)
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "r.started >= ?"), append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		conds, args = append(conds, "r.started < ?"), append(args, f.Until.UnixNano())
	}
	keys := make([]string, 0, len(f.Where))
	for k := range f.Where {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		alts := Canonical(f.Where[k])
		conds = append(conds, "EXISTS (SELECT 1 FROM settings s WHERE s.run = r.id AND s.key = ? AND s.value IN (?"+
			strings.Repeat(",?", len(alts)-1)+"))")
		args = append(args, k)
		for _, a := range alts {
			args = append(args, a)
		}
	}
	if len(conds) == 0 {
		return "1", nil
	}
	return strings.Join(conds, " AND "), args
}

// Runs lists the runs f selects, oldest first.
func (x *Index) Runs(ctx context.Context, f Filter) ([]*Run, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	cond, args := f.where()
	rows, err := x.db.QueryContext(ctx, "SELECT "+runCols+" FROM runs r WHERE "+cond+" ORDER BY r.started, r.run_id", args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []*Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Point is one run's values of a figure.
type Point struct {
	Run    *Run
	Figure Figure
}

// ErrUnknownFigure: no indexed run has the figure.
var ErrUnknownFigure = fmt.Errorf("unknown figure")

// Figure gives the figure's values of every run f selects, oldest first.
func (x *Index) Figure(ctx context.Context, f Filter, figure string) ([]Point, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	cond, args := f.where()
	q := "SELECT " + runCols + `, g.label, g.unit, g.direction, g.vals FROM runs r JOIN figures g ON g.run = r.id AND g.figure = ?
		WHERE ` + cond + " ORDER BY r.started, r.run_id"
	rows, err := x.db.QueryContext(ctx, q, append([]any{figure}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", figure, err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		var fg Figure
		var dir int
		var vals string
		r, err := scanRun(rows, &fg.Label, &fg.Unit, &dir, &vals)
		if err != nil {
			return nil, err
		}
		fg.Key, fg.Dir = figure, stats.Direction(dir)
		if err := json.Unmarshal([]byte(vals), &fg.Values); err != nil {
			return nil, fmt.Errorf("run %s: figure %s: %w", r.RunID, figure, err)
		}
		fg.Sample = stats.Describe(fg.Values)
		out = append(out, Point{Run: r, Figure: fg})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		names, err := x.FigureNames(ctx)
		if err != nil {
			return nil, err
		}
		if !contains(names, figure) {
			return nil, fmt.Errorf("%w %q; the index has: %s", ErrUnknownFigure, figure, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// Figures gives every figure of one run.
func (x *Index) Figures(ctx context.Context, run int64) ([]Figure, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT figure, label, unit, direction, vals FROM figures WHERE run = ? ORDER BY figure`, run)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Figure
	for rows.Next() {
		var fg Figure
		var dir int
		var vals string
		if err := rows.Scan(&fg.Key, &fg.Label, &fg.Unit, &dir, &vals); err != nil {
			return nil, err
		}
		fg.Dir = stats.Direction(dir)
		json.Unmarshal([]byte(vals), &fg.Values)
		fg.Sample = stats.Describe(fg.Values)
		out = append(out, fg)
	}
	return out, rows.Err()
}

// Settings gives one run's settings.
func (x *Index) Settings(ctx context.Context, run int64) ([]Setting, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT key, value, matrix FROM settings WHERE run = ? ORDER BY key`, run)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Setting
	for rows.Next() {
		var s Setting
		if err := rows.Scan(&s.Key, &s.Value, &s.Matrix); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// FigureNames lists the figures any indexed run has.
func (x *Index) FigureNames(ctx context.Context) ([]string, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT DISTINCT figure FROM figures ORDER BY figure`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Canonical is a setting's value as given and as the index keeps it, in base units: a size
// (16MiB: 16777216), a count (200k: 200000), a duration (2s: 2000000000 ns), a rate (1k/s: 1000).
func Canonical(v string) []string {
	out := []string{v}
	add := func(c string) {
		if !contains(out, c) {
			out = append(out, c)
		}
	}
	if d, err := units.ParseDuration(v); err == nil {
		add(strconv.FormatInt(int64(d), 10))
	}
	if n, err := units.ParseSize(v); err == nil {
		add(strconv.FormatInt(n, 10))
	}
	if n, err := units.ParseCount(v); err == nil {
		add(strconv.FormatInt(n, 10))
	}
	if r, err := units.ParseRate(v); err == nil {
		add(strconv.FormatFloat(r, 'g', -1, 64))
	}
	return out
}
