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
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	lock *os.File // the shared lock of a writer (Open); nil for a reader or a rebuild's new index
}

// Errors callers act on.
var (
	// ErrSchema: the file is an index of another schema version (or not an index).
	ErrSchema = errors.New("results index of another schema")
	// ErrEmpty: a reading verb found a file that holds no index yet (it is left as it was).
	ErrEmpty = errors.New("holds no results index")
	// ErrBusy: the index's lock is held the other way (a rebuild against runs and imports).
	ErrBusy = errors.New("results index is in use")
	// ErrNotRegular: the index path is a symlink, FIFO, device or folder.
	ErrNotRegular = errors.New("not a regular file")
)

// LockSuffix names the lock file beside an index (index.db.lock): every writer (rig run, rig
// history import) holds it shared while the index is open, and import --fresh holds it
// exclusively while it builds the new index and puts it in place.
const LockSuffix = ".lock"

// Open opens the index at path to add to it, creating it (and its folder) when there is none,
// and holds its lock shared until Close, so that a rebuild (Rebuild) refuses while it is open.
func Open(path string) (*Index, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results index %s: %w", path, err)
	}
	lock, err := lockIndex(path, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	x, err := open(path, false)
	if err != nil {
		lock.Close()
		return nil, err
	}
	x.lock = lock
	return x, nil
}

// OpenReadOnly opens an existing index to read it: nothing is created or written (not even the
// schema into an empty file), so an index on a read-only mount can be read. A file that holds no
// index yet gives ErrEmpty.
func OpenReadOnly(path string) (*Index, error) {
	return open(path, true)
}

// lockIndex takes the index's lock (how: LOCK_SH or LOCK_EX) without waiting.
func lockIndex(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path+LockSuffix, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock results index %s: %w", path, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("lock results index %s: %s%s: %w", path, path, LockSuffix, ErrNotRegular)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if how == syscall.LOCK_EX {
				return nil, fmt.Errorf("%w: %s is open for writing (a rig run or rig history import holds %s%s); rebuild it once they end", ErrBusy, path, path, LockSuffix)
			}
			return nil, fmt.Errorf("%w: %s is being rebuilt (rig history import --fresh holds %s%s); add to it once that ends", ErrBusy, path, path, LockSuffix)
		}
		return nil, fmt.Errorf("lock results index %s: %w", path, err)
	}
	return f, nil
}

// How open opens the file.
type openMode int

const (
	modeRW openMode = iota
	modeRO
	// modeImmutable: read-only on a read-only mount, where SQLite cannot make the -shm a WAL index
	// needs; only when there is no -wal, so the file holds every committed row.
	modeImmutable
)

// dsn is the SQLite URI that opens exactly the file at path: the path is made absolute and
// percent-encoded, so a ? # % or & in it is part of the name, never a URI parameter (?mode=memory)
// or fragment; the parameters are rig's alone.
func dsn(path string, mode openMode) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("file:")
	for i := 0; i < len(abs); i++ {
		c := abs[i]
		if c == '/' || c == '-' || c == '_' || c == '.' || c == '~' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	// foreign keys for the cascades; a writer's WAL lets readers go on while `rig run` adds a run.
	b.WriteString("?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)")
	switch mode {
	case modeRW:
		b.WriteString("&mode=rwc&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	case modeRO:
		b.WriteString("&mode=ro&_pragma=query_only(1)")
	case modeImmutable:
		b.WriteString("&mode=ro&immutable=1&_pragma=query_only(1)")
	}
	return b.String(), nil
}

func open(path string, readOnly bool) (*Index, error) {
	mode := modeRW
	if readOnly {
		mode = modeImmutable
		if _, err := os.Stat(path + "-wal"); err == nil {
			mode = modeRO
		} else if err := unix.Access(filepath.Dir(path), unix.W_OK); err == nil {
			mode = modeRO
		}
	}
	// Only a regular file (or, for a writer, none yet): a symlink, FIFO or device named as the
	// index is refused before SQLite opens it, at the path SQLite opens (dsn).
	fi, err := os.Lstat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("results index %s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	case err != nil && (readOnly || !errors.Is(err, fs.ErrNotExist)):
		return nil, fmt.Errorf("results index %s: %w", path, err)
	case readOnly && fi.Size() == 0:
		return nil, fmt.Errorf("results index %s: %w (an empty file)", path, ErrEmpty)
	}
	name, err := dsn(path, mode)
	if err != nil {
		return nil, fmt.Errorf("results index %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, fmt.Errorf("open results index %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	x := &Index{db: db, Path: path}
	if readOnly {
		err = x.checkVersion(context.Background())
	} else {
		err = x.migrate(context.Background())
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("results index %s: %w", path, err)
	}
	return x, nil
}

// checkVersion is a reader's migrate: the schema is this rig's, or the file is refused.
func (x *Index) checkVersion(ctx context.Context) error {
	v, err := x.schemaVersion(ctx)
	if err != nil {
		return err
	}
	switch v {
	case SchemaVersion:
		return nil
	case 0:
		return fmt.Errorf("%w: rig run adds to it, rig history import builds it", ErrEmpty)
	}
	return fmt.Errorf("%w: version %d, this rig reads %d; rebuild it: rig history import --fresh RESULTS_DIR", ErrSchema, v, SchemaVersion)
}

// schemaVersion is the file's PRAGMA user_version (0: no schema yet).
func (x *Index) schemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := x.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read its schema version: %w", err)
	}
	return v, nil
}

func (x *Index) migrate(ctx context.Context) error {
	v, err := x.schemaVersion(ctx)
	if err != nil {
		return err
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

// Close closes the index and lets go of its lock.
func (x *Index) Close() error {
	err := x.db.Close()
	if x.lock != nil {
		x.lock.Close() // releases the flock
		x.lock = nil
	}
	return err
}

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
