// Package reference is the driver of the rig's own engine (engine/replica on hashicorp/raft,
// started from the rig binary): its settings table, how they reach the node's config file, what
// the engine writes, and how a stored book is restored.
package reference

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/bookgen"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/replica/store"
	snapfile "github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/internal/units"
)

// Name is the driver's name in playbooks.
const Name = driver.Default

// Setting names, as the engine's config file (engine.Config) and /status config spell them.
const (
	SyncLevel        = driver.SyncLevel
	SnapshotBlock    = driver.SnapshotBlock
	EncodeThreads    = driver.EncodeThreads
	HeartbeatTimeout = driver.HeartbeatTimeout
	ElectionTimeout  = driver.ElectionTimeout
	UDPRcvbuf        = "udp_rcvbuf"
	UDPNakDelay      = "udp_nak_delay"
	UDPRecvNice      = engine.UDPRecvNiceSetting
	// FlightRecorder and FlightRecorderWindow: the engine's runtime/trace flight recorder
	// (engine.Config), read after every window into the node's inside file.
	FlightRecorder       = "flight_recorder"
	FlightRecorderWindow = "flight_recorder_window"
)

// Table is the reference engine's settings. Only sync_level has a default the rig asks for
// (production durability: 0 is a durability policy, so it must be asked for); the others, left
// out, keep the engine's own default and are not checked.
var Table = driver.Table{
	{Name: SyncLevel, Kind: driver.Integer, Default: "2", Min: "0", Max: "2", Help: "0 (no sync), 1 (fdatasync) or 2 (fsync)"},
	{Name: SnapshotBlock, Kind: driver.Bytes, Min: "4KiB", Max: "1GiB", Help: "4KiB..1GiB, e.g. 1MiB or 16MiB"},
	{Name: EncodeThreads, Kind: driver.Integer, Min: "1", Max: "256", Help: "encode threads, 1 (linear) to 256"},
	{Name: HeartbeatTimeout, Kind: driver.Duration, Min: "5ms", Max: "1h", Help: "a duration from 5ms (raft's minimum) to 1h, e.g. 1s, 100ms"},
	{Name: ElectionTimeout, Kind: driver.Duration, Min: "5ms", Max: "1h", Help: "a duration from 5ms (raft's minimum) to 1h, e.g. 1s, 100ms"},
	{Name: UDPRcvbuf, Kind: driver.Bytes, Min: "4KiB", Max: "2147483647", Help: "4KiB..2147483647 bytes, e.g. 128MiB"},
	{Name: UDPNakDelay, Kind: driver.Duration, Min: "10us", Max: "1s", Help: "a duration from 10us to 1s, e.g. 1ms"},
	{Name: UDPRecvNice, Kind: driver.Integer, Min: "-20", Max: "19", Help: "a nice value, -20 (highest priority, needs root) .. 19"},
	// Off unless asked: its cost on probe latency is measured by rig bench recording
	// (docs/engines.md, "GET /trace").
	{Name: FlightRecorder, Kind: driver.Boolean, Help: "true keeps a runtime/trace flight recorder, read after every window; false (the default) does not"},
	{Name: FlightRecorderWindow, Kind: driver.Duration, Min: "1s", Max: "10m", Help: "how far back the flight recorder reaches, 1s..10m, e.g. 60s: at least the longest stretch between two of the timeline's actions"},
}

// Driver is the reference engine's driver.
type Driver struct{}

var (
	_ driver.ValueChecker    = Driver{}
	_ driver.Configurer      = Driver{}
	_ driver.WriteEstimator  = Driver{}
	_ driver.BookInstaller   = Driver{}
	_ driver.MemoryEstimator = Driver{}
	_ driver.Recorder        = Driver{}
)

// RecordingValues implements driver.Recorder: the flight recorder, served at GET /trace.
func (Driver) RecordingValues() driver.Values { return driver.Values{FlightRecorder: "true"} }

// DefaultFlightRecorderWindow is the engine's (engine/server.FlightRecorderWindow, which this
// package does not import).
const DefaultFlightRecorderWindow = 60 * time.Second

// RecordingReach implements driver.Recorder: the flight recorder's window.
func (Driver) RecordingReach(v driver.Values) (time.Duration, string) {
	if v[FlightRecorder] != "true" {
		return 0, FlightRecorderWindow
	}
	if d, err := time.ParseDuration(v[FlightRecorderWindow]); err == nil && d > 0 {
		return d, FlightRecorderWindow
	}
	return DefaultFlightRecorderWindow, FlightRecorderWindow
}

// Name implements driver.Driver.
func (Driver) Name() string { return Name }

// Settings implements driver.Driver: the table is fixed.
func (Driver) Settings(declared driver.Table) (driver.Table, error) {
	if len(declared) > 0 {
		return nil, errors.New("the reference engine's settings are its own (" + fmt.Sprint(Table.Names()) + "); engine.settings declares settings for engine.driver: command")
	}
	return Table, nil
}

// CheckValues implements driver.ValueChecker.
func (Driver) CheckValues(v driver.Values) []driver.Problem {
	var out []driver.Problem
	if w, ok := v[FlightRecorderWindow]; ok && v[FlightRecorder] != "true" {
		out = append(out, driver.Problem{Setting: FlightRecorderWindow, Deps: []string{FlightRecorder}, Rule: "window-without-recorder",
			Msg: w + " is set but engine.flight_recorder is not true: there is no recorder to size; add engine.recording: on (which asks for the recorder) or drop the window"})
	}
	return append(out, checkTimeouts(v)...)
}

func checkTimeouts(v driver.Values) []driver.Problem {
	hb, errH := time.ParseDuration(v[HeartbeatTimeout])
	el, errE := time.ParseDuration(v[ElectionTimeout])
	if errH != nil || errE != nil || hb <= 0 || el >= hb {
		return nil
	}
	return []driver.Problem{{Setting: ElectionTimeout, Deps: []string{HeartbeatTimeout}, Rule: "election<heartbeat",
		Msg: fmt.Sprintf("%s is shorter than engine.heartbeat_timeout (%s); raft needs election_timeout >= heartbeat_timeout",
			units.FormatDuration(el), units.FormatDuration(hb))}}
}

// Configure implements driver.Configurer.
func (Driver) Configure(cfg *engine.Config, v driver.Values) error {
	var errs []error
	num := func(name string, dst *int) {
		if s, ok := v[name]; ok {
			n, err := strconv.Atoi(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*dst = n
		}
	}
	dur := func(name string, dst *string) {
		if s, ok := v[name]; ok {
			if _, err := time.ParseDuration(s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*dst = s
		}
	}
	num(SyncLevel, &cfg.SyncLevel)
	num(SnapshotBlock, &cfg.SnapshotBlock)
	num(EncodeThreads, &cfg.EncodeThreads)
	dur(HeartbeatTimeout, &cfg.HeartbeatTimeout)
	dur(ElectionTimeout, &cfg.ElectionTimeout)
	num(UDPRcvbuf, &cfg.UDPRcvbuf)
	dur(UDPNakDelay, &cfg.UDPNakDelay)
	num(UDPRecvNice, &cfg.UDPRecvNice)
	if s, ok := v[FlightRecorder]; ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", FlightRecorder, err))
		}
		cfg.FlightRecorder = b
	}
	dur(FlightRecorderWindow, &cfg.FlightRecorderWindow)
	return errors.Join(errs...)
}

// raftOwnBytes allows for what raft writes of its own: the bootstrap configuration entry, a
// no-op entry per election, and the stable store (107 B, rewritten through a temp file). A run
// of 200k orders, 6,000 probes and 3 snapshots wrote 314 B of log more than its commands.
const raftOwnBytes = 4 << 10

// EstimateWrites implements driver.WriteEstimator (docs/architecture.md, "Free space before a
// run"): entry sizes come from the codecs themselves, the data as the server hands it to raft
// (the frame without its length prefix) plus the log record around it.
func (Driver) EstimateWrites(wl driver.Workload) driver.Writes {
	frame := func(r wire.Request) int64 { return int64(len(wire.AppendRequest(nil, &r)) - 4) }
	orderEntry := frame(wire.Request{Type: wire.TypeOrder}) + store.RecordOverhead
	batchFixed := frame(wire.Request{Type: wire.TypeBatch}) + store.RecordOverhead
	perOrder := frame(wire.Request{Type: wire.TypeBatch, Batch: make([]wire.Order, 1)}) + store.RecordOverhead - batchFixed

	w := driver.Writes{Orders: wl.Orders, SnapshotBytes: snapfile.Size(wl.Orders), LogBytes: raftOwnBytes}
	files := wl.Snapshots
	if wl.BookInstalled {
		files++ // the stored book, restored at launch
	} else if n := wl.Orders; n > 0 {
		per := int64(max(wl.PreloadBatch, 1))
		batches := (n + per - 1) / per
		w.LogBytes += batches*batchFixed + n*perOrder
	}
	// A snapshot's marker entry, at most this; UDP burst orders are batched into log entries, one
	// entry per order bounds them.
	w.LogBytes += int64(wl.Snapshots)*(frame(wire.Request{})+store.RecordOverhead) + (wl.Probes+wl.BurstOrders)*orderEntry
	// A take writes the next file before the oldest kept one is removed.
	w.Snapshots = min(files, replica.SnapshotsKept+1)
	if w.Snapshots == 0 {
		w.SnapshotBytes = 0
	}
	return w
}

// BytesPerOrder is the reference engine's resident memory per resting order, erring high: the
// book's queue record (16 B) and id-index slot, with the slack of arrays that grow by doubling and
// of Go's collector (a heap grows to about twice what is live before a collection). Measured by
// TestBytesPerOrderMeasured (memory_test.go), which builds the preload's own book and reads the
// process's peak resident set (VmHWM) and live heap, and keeps it true (the figures:
// docs/constants.md). The raft log adds 4 B per entry of 32,768 orders; its pages are the
// kernel's cache, not the engine's.
const BytesPerOrder = 80

// BytesPerOrder implements driver.MemoryEstimator.
func (Driver) BytesPerOrder() int64 { return BytesPerOrder }

// OffersAdmin implements driver.AdminOfferer: the reference engine answers POST /gc
// (engine/server/gc.go).
func (Driver) OffersAdmin(path string) bool { return path == engine.AdminGC }

// StoredBookMeta is the log position a stored book is written at: index 1 of term 1, so a
// node that restores it numbers the entries after it from 2 (engine/replica lists the
// restored snapshot to raft).
var StoredBookMeta = snapfile.Meta{LogIndex: 1, Term: 1}

// BookFile implements driver.BookInstaller: the engine restores the newest snapshot in its
// snapshots folder at launch, as if it had taken it.
func (Driver) BookFile() string {
	return "snapshots/" + replica.SnapshotFileName(StoredBookMeta.LogIndex)
}

// WriteBook implements driver.BookInstaller: the book is built here order by order with the
// engine's own book and the preload's own orders (bookgen.Orders), so a node that
// restores the file holds the book, and the state hash, the preload through the log would have
// given it.
func (d Driver) WriteBook(w io.Writer, shape bookgen.Shape) (driver.BookStats, error) {
	return d.writeBook(w, shape, snapfile.Options{BlockSize: 16 << 20})
}

func (Driver) writeBook(w io.Writer, shape bookgen.Shape, sopts snapfile.Options) (driver.BookStats, error) {
	start := time.Now()
	b := book.New()
	var st driver.BookStats
	err := bookgen.Orders(shape, func(o wire.Order) error {
		res, err := b.Submit(book.Order{ID: o.ID, Instrument: o.Instrument, Side: book.Side(o.Side), Price: o.Price, Qty: o.Qty, TIF: book.TIF(o.TIF)}, nil)
		if err != nil {
			return fmt.Errorf("build stored book, order %d: %w", o.ID, err)
		}
		st.Filled += res.Filled
		return nil
	})
	if err != nil {
		return st, err
	}
	if _, err := snapfile.Write(w, b, StoredBookMeta, sopts); err != nil {
		return st, fmt.Errorf("write stored book: %w", err)
	}
	st.Orders, st.StateHash = int64(b.Orders()), fmt.Sprintf("%016x", b.StateHash())
	st.Elapsed = time.Since(start)
	return st, nil
}
