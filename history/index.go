// Package history is the results index: every run rig ran or imported, with its command line,
// playbook, settings, machine, versions and every figure of its summary with n and spread, in a
// SQLite file (a pure-Go driver: nothing to install or start). Run folders and their archive stay
// the source of truth; the index is rebuilt from them (Import) and read by `rig history`: lists,
// a figure over time, its trend across engine versions with change points (stats.EDivisive), and
// a benchmark log (docs/results.md).
package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers "sqlite"
)

// DefaultFile is the index's name in a results folder: results/index.db beside the run folders.
const DefaultFile = "index.db"

// SchemaVersion is the index's PRAGMA user_version. An index of another version is refused:
// rebuild it with `rig history import`.
const SchemaVersion = 1

// schema is the index, one statement per entry. Times are Unix nanoseconds (UTC).
var schema = []string{
	`CREATE TABLE runs (
		id INTEGER PRIMARY KEY,
		run_id TEXT NOT NULL UNIQUE,
		folder TEXT NOT NULL,
		sweep_id TEXT NOT NULL DEFAULT '',
		run_dir TEXT NOT NULL DEFAULT '',
		round INTEGER NOT NULL DEFAULT 0,
		attempt INTEGER NOT NULL DEFAULT 0,
		combination TEXT NOT NULL DEFAULT '',
		playbook TEXT NOT NULL DEFAULT '',
		config_hash TEXT NOT NULL DEFAULT '',
		sweep_playbook_hash TEXT NOT NULL DEFAULT '',
		command TEXT NOT NULL DEFAULT '[]',
		status TEXT NOT NULL,
		error TEXT NOT NULL DEFAULT '',
		started INTEGER NOT NULL,
		ended INTEGER NOT NULL DEFAULT 0,
		target TEXT NOT NULL DEFAULT '',
		stack TEXT NOT NULL DEFAULT '',
		instance_types TEXT NOT NULL DEFAULT '',
		machine TEXT NOT NULL DEFAULT '',
		kernel TEXT NOT NULL DEFAULT '',
		cpus INTEGER NOT NULL DEFAULT 0,
		mem_bytes INTEGER NOT NULL DEFAULT 0,
		rig_version TEXT NOT NULL DEFAULT '',
		rig_commit TEXT NOT NULL DEFAULT '',
		rig_modified INTEGER NOT NULL DEFAULT 0,
		go_version TEXT NOT NULL DEFAULT '',
		engine_driver TEXT NOT NULL DEFAULT '',
		engine_version TEXT NOT NULL DEFAULT '',
		engine_commit TEXT NOT NULL DEFAULT '',
		engine_sha256 TEXT NOT NULL DEFAULT '',
		load1_start REAL,
		load1_end REAL,
		warnings INTEGER NOT NULL DEFAULT 0,
		imported INTEGER NOT NULL
	)`,
	`CREATE INDEX runs_started ON runs(started)`,
	`CREATE INDEX runs_engine ON runs(engine_version, engine_commit)`,
	`CREATE TABLE settings (
		run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		key TEXT NOT NULL,
		value TEXT NOT NULL,
		matrix INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (run, key)
	) WITHOUT ROWID`,
	`CREATE INDEX settings_kv ON settings(key, value)`,
	`CREATE TABLE figures (
		run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		figure TEXT NOT NULL,
		label TEXT NOT NULL,
		unit TEXT NOT NULL,
		direction INTEGER NOT NULL,
		n INTEGER NOT NULL,
		mean REAL, stdev REAL, min REAL, median REAL, max REAL, ci_lo REAL, ci_hi REAL,
		vals TEXT NOT NULL,
		PRIMARY KEY (run, figure)
	) WITHOUT ROWID`,
	`CREATE INDEX figures_name ON figures(figure)`,
}

// Index is an open results index.
type Index struct {
	db   *sql.DB
	Path string
}

// ErrSchema: the file is an index of another schema version (or not an index).
var ErrSchema = errors.New("results index of another schema")

// Open opens the index at path, creating it (and its folder) when there is none.
func Open(path string) (*Index, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results index %s: %w", path, err)
	}
	// Only a regular file (or none yet): a FIFO or a device named as the index is refused
	// before SQLite opens it.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("results index %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	// WAL: readers go on while `rig run` adds a run; foreign keys for the cascades.
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open results index %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	x := &Index{db: db, Path: path}
	if err := x.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("results index %s: %w", path, err)
	}
	return x, nil
}

func (x *Index) migrate(ctx context.Context) error {
	var v int
	if err := x.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read its schema version: %w", err)
	}
	switch v {
	case SchemaVersion:
		return nil
	case 0:
	default:
		return fmt.Errorf("%w: version %d, this rig reads %d; rebuild it: rm it, then rig history import RESULTS_DIR", ErrSchema, v, SchemaVersion)
	}
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var tables int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type='table'").Scan(&tables); err != nil {
		return err
	}
	if tables > 0 {
		return fmt.Errorf("%w: it has tables but no schema version", ErrSchema)
	}
	for _, s := range schema {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("create the schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the index.
func (x *Index) Close() error { return x.db.Close() }

// Add writes one run in one transaction, replacing what the index had under its run id: a run is
// either all there or not there.
func (x *Index) Add(ctx context.Context, r *Record) error {
	cmd, err := json.Marshal(r.Command)
	if err != nil {
		return err
	}
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("index %s: %w", r.RunID, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE run_id = ?`, r.RunID); err != nil {
		return fmt.Errorf("index %s: %w", r.RunID, err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO runs (run_id, folder, sweep_id, run_dir, round, attempt, combination,
		playbook, config_hash, sweep_playbook_hash, command, status, error, started, ended, target, stack, instance_types,
		machine, kernel, cpus, mem_bytes, rig_version, rig_commit, rig_modified, go_version, engine_driver, engine_version,
		engine_commit, engine_sha256, load1_start, load1_end, warnings, imported)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.RunID, r.Folder, r.SweepID, r.RunDir, r.Round, r.Attempt, r.Combination,
		r.Playbook, r.ConfigHash, r.SweepPlaybookHash, string(cmd), r.Status, r.Error, r.Started.UnixNano(), unixOrZero(r.Ended),
		r.Target, r.Stack, r.InstanceTypes, r.Machine, r.Kernel, r.CPUs, int64(r.MemBytes), r.Rig.Version, r.Rig.Commit, r.Rig.Modified, r.Rig.Go,
		r.Engine.Driver, r.Engine.Version, r.Engine.Commit, r.Engine.SHA256, r.Load1Start, r.Load1End, r.Warnings, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("index %s: %w", r.RunID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	set, err := tx.PrepareContext(ctx, `INSERT INTO settings (run, key, value, matrix) VALUES (?,?,?,?)`)
	if err != nil {
		return err
	}
	defer set.Close()
	for _, s := range r.Settings {
		if _, err := set.ExecContext(ctx, id, s.Key, s.Value, s.Matrix); err != nil {
			return fmt.Errorf("index %s: setting %s: %w", r.RunID, s.Key, err)
		}
	}
	fig, err := tx.PrepareContext(ctx, `INSERT INTO figures (run, figure, label, unit, direction, n, mean, stdev, min, median, max, ci_lo, ci_hi, vals)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return err
	}
	defer fig.Close()
	for _, f := range r.Figures {
		vals, err := json.Marshal(f.Values)
		if err != nil {
			return err
		}
		s := f.Sample
		if _, err := fig.ExecContext(ctx, id, f.Key, f.Label, f.Unit, int(f.Dir), s.N, s.Mean, s.Stdev, s.Min, s.Median, s.Max,
			s.CILo, s.CIHi, string(vals)); err != nil {
			return fmt.Errorf("index %s: figure %s: %w", r.RunID, f.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("index %s: %w", r.RunID, err)
	}
	return nil
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
