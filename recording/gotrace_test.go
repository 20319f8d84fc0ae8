package recording

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/rundir"
)

// record runs work under a real runtime/trace flight recorder and returns its window, written
// to a file as the agent keeps it, with the wall clock before and after.
func record(t *testing.T, work func()) (path string, from, to int64) {
	t.Helper()
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	from = time.Now().UnixNano() // the recorder's start stops the world too
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	work()
	var buf bytes.Buffer
	if _, err := fr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	to = time.Now().UnixNano()
	path = filepath.Join(t.TempDir(), "window"+FormatGoTrace.Ext())
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, from, to
}

func read(t *testing.T, path string) []rundir.InsideSpan {
	t.Helper()
	spans, err := formats.Read(context.Background(), FormatGoTrace, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

func ofKind(spans []rundir.InsideSpan, k rundir.InsideKind) []rundir.InsideSpan {
	var out []rundir.InsideSpan
	for _, s := range spans {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}

// syncer is a goroutine of the program's own that syncs a file n times.
func syncer(f *os.File, n int) error {
	for range n {
		if _, err := f.Write([]byte("order\n")); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// TestGoTraceForces records a goroutine's fsyncs, the log store's fdatasyncs and a real
// snapshot take, and reads each back as a force with its role, call, goroutine and time.
func TestGoTraceForces(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const plain, logged = 17, 5
	var snapSyncs int
	path, from, to := record(t, func() {
		done := make(chan error)
		go func() { done <- syncer(f, plain) }()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for range logged { // the raft log's own sync, at level 1
			if err := store.Sync(f, store.SyncData); err != nil {
				t.Fatal(err)
			}
		}
		b := book.New()
		for i := range 2000 {
			if _, err := b.Submit(book.Order{ID: uint64(i + 1), Instrument: 1, Side: book.Buy, Price: int64(100 + i%50), Qty: 1, TIF: book.GTC}, nil); err != nil {
				t.Fatal(err)
			}
		}
		st, err := replica.WriteSnapshotFile(dir, b, snapshot.Meta{LogIndex: 7, Term: 1},
			replica.SnapshotWrite{SyncLevel: store.SyncFull, BlockSize: 4 << 10, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		snapSyncs = st.Syncs
	})
	forces := ofKind(read(t, path), rundir.InsideForce)
	byRole := map[string][]rundir.InsideSpan{}
	for _, s := range forces {
		byRole[s.Role] = append(byRole[s.Role], s)
		if s.AtNs < from || s.AtNs+s.DurNs > to || s.DurNs <= 0 {
			t.Errorf("force %+v outside the recorded stretch [%d, %d] or untimed", s, from, to)
		}
		if s.Source != string(FormatGoTrace) {
			t.Errorf("force source %q", s.Source)
		}
	}
	if got := byRole[rundir.RoleOther]; len(got) != plain {
		t.Errorf("%d plain fsyncs read, want %d: %+v", len(got), plain, got)
	} else if s := got[0]; s.Thread != "recording.TestGoTraceForces.func1.1" || !strings.HasPrefix(s.Detail, "fsync at recording.syncer") {
		t.Errorf("plain fsync named %q, detail %q; want the goroutine's function and the call site", s.Thread, s.Detail)
	}
	if got := byRole[rundir.RoleLog]; len(got) != logged || !strings.HasPrefix(got[0].Detail, "fdatasync at store.") {
		t.Errorf("log syncs: %d, want %d fdatasyncs at store.Sync: %+v", len(got), logged, got)
	}
	// Only the log store's syncs hold the commit; a snapshot's syncs through store.Sync do not.
	for _, s := range forces {
		if want := map[bool]string{true: rundir.BlocksCommit}[s.Role == rundir.RoleLog]; s.Blocks != want {
			t.Errorf("%s force %q blocks %q, want %q", s.Role, s.Detail, s.Blocks, want)
		}
	}
	// The take syncs every block, then the file, then the folder (engine/replica/snapwrite.go).
	if got := byRole[rundir.RoleSnapshot]; snapSyncs < 2 || len(got) != snapSyncs+2 {
		t.Errorf("snapshot forces: %d, want the take's %d block syncs + 2", len(got), snapSyncs)
	}
}

// TestGoTraceGC forces a GC and makes a goroutine allocate through a collection of a large
// pointer heap: the trace's stop-the-world ranges and that goroutine's mark assists are read.
func TestGoTraceGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	type node struct {
		next *node
		pad  [6]*int
	}
	var live *node
	for range 1 << 19 { // ~32 MiB of pointers for the collector to mark
		live = &node{next: live}
	}
	var sink *node
	path, from, to := record(t, func() {
		runtime.GC()
		done := make(chan struct{})
		go func() { // allocates while the collector marks: made to assist
			defer close(done)
			for i := range 1 << 21 {
				n := &node{next: sink}
				if i%64 == 0 {
					sink = nil
				}
				sink = n
			}
		}()
		<-done
	})
	runtime.KeepAlive(live)
	spans := read(t, path)
	stw := ofKind(spans, rundir.InsideSTW)
	if len(stw) < 2 { // a GC stops the world twice
		t.Fatalf("%d stop-the-world spans, want the forced GC's two or more", len(stw))
	}
	var gcSTW int
	for _, s := range stw {
		if strings.Contains(s.Detail, "GC") {
			gcSTW++
		}
		if s.AtNs < from || s.AtNs+s.DurNs > to || s.DurNs <= 0 {
			t.Errorf("stw %+v outside [%d, %d] or untimed", s, from, to)
		}
	}
	if gcSTW < 2 {
		t.Errorf("stop-the-world reasons %+v; want GC's", stw)
	}
	assists := ofKind(spans, rundir.InsideGCAssist)
	var mine int
	for _, s := range assists {
		if s.Thread == "recording.TestGoTraceGC.func1.1" {
			mine++
		}
	}
	if mine == 0 {
		t.Errorf("no GC assist of the allocating goroutine among %d assists: %+v", len(assists), assists)
	}
}

// waiter and bystander wait on a channel; with one P, the goroutine that wakes them spins
// for 5 ms after each send, so each wake-up is runnable that long before it runs. Only
// goroutines on the apply path are written.
func waiter(c <-chan struct{}, ack chan<- struct{})    { drain(c, ack) }
func bystander(c <-chan struct{}, ack chan<- struct{}) { drain(c, ack) }

func drain(c <-chan struct{}, ack chan<- struct{}) {
	for range c {
		ack <- struct{}{}
	}
}

// TestGoTraceSchedDelay: with GOMAXPROCS 1, goroutines woken by a goroutine that then spins
// wait milliseconds to run; the apply path's are read, by name, and a bystander's are not.
func TestGoTraceSchedDelay(t *testing.T) {
	const waiterFn = "github.com/rig-dev/rig/recording.waiter"
	applyPath = append(applyPath, waiterFn)
	defer func() { applyPath = applyPath[:len(applyPath)-1] }()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds, spin = 20, 5 * time.Millisecond
	path, from, to := record(t, func() {
		w, b, ack := make(chan struct{}), make(chan struct{}), make(chan struct{}, 2)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); waiter(w, ack) }()
		go func() { defer wg.Done(); bystander(b, ack) }()
		for range rounds {
			w <- struct{}{}
			b <- struct{}{}
			for end := time.Now().Add(spin); time.Now().Before(end); { // holds the only P
			}
			<-ack // both back waiting before the next round
			<-ack
		}
		close(w)
		close(b)
		wg.Wait()
	})
	var n int
	var total time.Duration
	for _, s := range ofKind(read(t, path), rundir.InsideSchedDelay) {
		if s.Thread != "recording.waiter" {
			t.Errorf("scheduler delay of %q, not on the apply path", s.Thread)
			continue
		}
		if s.DurNs < int64(SchedDelayMin) || s.AtNs < from || s.AtNs+s.DurNs > to {
			t.Errorf("delay %+v: shorter than %v or outside [%d, %d]", s, SchedDelayMin, from, to)
		}
		n++
		total += time.Duration(s.DurNs)
	}
	// Each round the waiter is runnable from the send until the spin ends (or is preempted).
	if n < rounds/2 || total < rounds/2*spin {
		t.Errorf("waiter: %d scheduler delays, %v in all; want about %d of about %v", n, total, rounds, spin)
	}
}

func TestGoTraceRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.trace")
	if err := os.WriteFile(path, []byte("not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := formats.Read(context.Background(), FormatGoTrace, path, Options{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("garbage read as a trace, or the error does not name the file: %v", err)
	}
	if _, err := formats.Read(context.Background(), FormatGoTrace, t.TempDir(), Options{}); err == nil {
		t.Error("a folder read as a trace")
	}
}
