package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

// TestTakeJFRRecording runs a JVM engine (recording/testdata/JfrProbe.java: a force per loop)
// through the command driver with recording on, takes its recording while it runs, kills it
// with SIGKILL and takes again: the inside file holds the forces from both takes once each,
// relative to the data folder, the second take's from the killed JVM's repository.
func TestTakeJFRRecording(t *testing.T) {
	tools.Require(t, "java")
	javac := tools.Require(t, "javac")
	tools.Require(t, "jfr")
	cp := t.TempDir()
	if out, err := exec.Command(javac, "-d", cp, "../recording/testdata/JfrProbe.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	dir := t.TempDir()
	a := startAgentWith(t, Options{Dir: dir, Recordings: recording.NewRegistry(recording.JFR{})})
	ctx := context.Background()
	req := StartRequest{
		Config:    engine.Config{Node: "node-0", AdminAddr: testaddr.Free(t)},
		Command:   &command.Spec{Binary: "java", Args: []string{"-cp", cp, "JfrProbe", "{{.DataDir}}", "100000"}},
		Recording: recording.FormatJFR,
	}
	if err := a.c.StartEngine(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.c.StopEngine(context.Background()) })
	waitLog := func(line string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, rundir.EngineLogFile))
			if strings.Contains(string(b), line+"\n") {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		b, _ := os.ReadFile(filepath.Join(dir, rundir.EngineLogFile))
		t.Fatalf("engine.log never said %q:\n%s", line, b)
	}
	waitLog("loop 5")
	first, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "01-snapshot", Defer: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Files) != 1 || first.Spans != 0 {
		t.Fatalf("first take: %+v, want one dump, not read yet", first)
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.InsideFile)); !os.IsNotExist(err) {
		t.Fatalf("a deferred take wrote the inside file (%v)", err)
	}
	waitLog("loop 15")
	time.Sleep(1500 * time.Millisecond) // past the repository's 1 s flush
	if err := a.c.Signal(ctx, "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := a.c.EngineStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed engine did not exit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	second, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "end"})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Files) != 1 || second.Spans == 0 {
		t.Fatalf("take after the kill: %+v, want the killed JVM's repository read, and the first dump", second)
	}
	spans, err := rundir.ReadInside(filepath.Join(dir, rundir.InsideFile))
	if err != nil {
		t.Fatal(err)
	}
	forces := map[int64]int{}
	for _, s := range spans {
		if s.Kind != rundir.InsideForce {
			continue
		}
		if s.File != "archive/0-0.rec" || s.Role != rundir.RoleArchiveSegment {
			t.Errorf("force %+v: want archive/0-0.rec, relative to the data folder, an archive segment", s)
		}
		forces[s.AtNs]++
	}
	for at, n := range forces {
		if n > 1 {
			t.Errorf("force at %d is in the inside file %d times", at, n)
		}
	}
	if len(forces) < 15 {
		t.Errorf("%d forces in the inside file, want ≥ 15 (the loops before the kill)", len(forces))
	}
	// A third take finds nothing new: the killed JVM's repository was read to its end.
	third, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "again"})
	if err != nil || third.Spans != 0 {
		t.Errorf("third take: %+v, %v; want nothing", third, err)
	}
}

// goTraceEngine serves GET /trace from a real runtime/trace flight recorder in this process,
// as the reference engine does, and counts what it served; drop, when set, leaves out the
// generation after the one it names (a recorder that dropped it before the take).
type goTraceEngine struct {
	fr     *trace.FlightRecorder
	mu     sync.Mutex
	served int64
	drop   uint64
	starts int // POST /trace/start
}

func (e *goTraceEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r.URL.Path { // as engine/server switches its recorder
	case engine.AdminTraceStart:
		e.starts++
		if !e.fr.Enabled() {
			if err := e.fr.Start(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		}
		return
	case engine.AdminTraceStop:
		e.fr.Stop()
		return
	}
	if !e.fr.Enabled() {
		http.Error(w, "stopped", http.StatusConflict)
		return
	}
	if e.drop != 0 {
		e.fr.WriteTo(io.Discard) // a dump ends a generation: the one to drop
	}
	var dump bytes.Buffer
	if _, err := e.fr.WriteTo(&dump); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if e.drop != 0 {
		var cut bytes.Buffer
		recording.CopyGoTraceGens(&dump, e.drop+1, func(h []byte, _ uint64) (io.Writer, error) { cut.Write(h); return &cut, nil })
		dump, e.drop = cut, 0
	}
	e.served += int64(dump.Len())
	w.Write(dump.Bytes())
}

// A Go engine's takes append to one file: each generation of its flight recorder's window is
// kept once, not once per take; the read finds every sync once; a take after the read starts a
// file of its own, and so does one after the recorder dropped generations no take had.
func TestTakeGoTraceAppends(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	eng := &goTraceEngine{fr: fr}
	srv := httptest.NewServer(eng)
	defer srv.Close()
	dir, data := t.TempDir(), t.TempDir()
	s := &Server{opts: Options{Dir: dir, Recordings: recording.NewRegistry(recording.GoTrace{})}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := &recorder{format: recording.FormatGoTrace, cut: map[int]time.Time{}, done: map[int]bool{}}
	cfg := engine.Config{AdminAddr: strings.TrimPrefix(srv.URL, "http://"), Dir: data}
	f, err := os.Create(filepath.Join(data, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syncs := 0
	take := func(window string, deferRead bool) RecordingResponse {
		t.Helper()
		for range 5 {
			f.Write([]byte("order\n"))
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			syncs++
		}
		resp, err := s.takeRecording(context.Background(), rec, window, deferRead, cfg)
		if err != nil || len(resp.Notes) > 0 {
			t.Fatalf("take %s: %+v, %v", window, resp, err)
		}
		return resp
	}
	for _, w := range []string{"01-a", "02-b", "03-c"} {
		if resp := take(w, true); !reflect.DeepEqual(resp.Files, []string{"01-a.trace"}) {
			t.Errorf("take %s wrote %q; want it appended to 01-a.trace", w, resp.Files)
		}
	}
	if resp := take("end", false); !reflect.DeepEqual(resp.Files, []string{"01-a.trace"}) {
		t.Errorf("take end wrote %q; want it appended to 01-a.trace", resp.Files)
	}
	recs := filepath.Join(dir, rundir.RecordingsDir)
	ents, _ := os.ReadDir(recs)
	var kept int64
	for _, e := range ents {
		fi, _ := e.Info()
		kept += fi.Size()
	}
	if len(ents) != 1 || kept*2 > eng.served {
		t.Errorf("recordings/ holds %d files, %d bytes, for %d bytes served by 4 takes; want one file holding each generation once", len(ents), kept, eng.served)
	}
	countForces := func() int {
		spans, err := rundir.ReadInside(filepath.Join(dir, rundir.InsideFile))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sp := range spans {
			if sp.Kind == rundir.InsideForce && sp.Role == rundir.RoleOther {
				n++
			}
		}
		return n
	}
	if n := countForces(); n != syncs {
		t.Errorf("%d forces read; want the %d syncs, each once", n, syncs)
	}
	// After the read, a take starts a file of its own (the window again; the cut keeps what is
	// new); after a gap in the generations, another.
	if resp := take("04-d", true); !reflect.DeepEqual(resp.Files, []string{"04-d.trace"}) {
		t.Errorf("take after the read wrote %q; want 04-d.trace", resp.Files)
	}
	eng.mu.Lock()
	eng.drop = rec.traceLast
	eng.mu.Unlock()
	if resp := take("05-e", true); !reflect.DeepEqual(resp.Files, []string{"05-e.trace"}) {
		t.Errorf("take after a gap wrote %q; want 05-e.trace", resp.Files)
	}
	take("end2", false)
	if n := countForces(); n < syncs-5 || n > syncs {
		t.Errorf("%d forces read; want the %d syncs once each, but for those of the dropped generation", n, syncs)
	}
}

// With a recorder run only around windows, the agent starts it at a window's Start, takes it and
// stops it at the window's Stop, and fetches nothing while it is stopped: the inside file holds
// the syncs made inside the windows, each once, and none made between them.
func TestTakeGoTraceWindows(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	defer fr.Stop()
	eng := &goTraceEngine{fr: fr}
	srv := httptest.NewServer(eng)
	defer srv.Close()
	dir, data := t.TempDir(), t.TempDir()
	s := &Server{opts: Options{Dir: dir, Recordings: recording.NewRegistry(recording.GoTrace{})}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := &recorder{format: recording.FormatGoTrace, cut: map[int]time.Time{}, done: map[int]bool{}, windows: true}
	cfg := engine.Config{AdminAddr: strings.TrimPrefix(srv.URL, "http://"), Dir: data}
	f, err := os.Create(filepath.Join(data, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syncs := func(n int) {
		for range n {
			f.Write([]byte("order\n"))
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	syncs(7) // before any window: not recorded
	for _, w := range []string{"01-a", "02-b"} {
		if _, err := s.startRecorder(ctx, rec, cfg); err != nil {
			t.Fatal(err)
		}
		if !fr.Enabled() {
			t.Fatalf("%s: the engine's recorder is not running after the start", w)
		}
		syncs(5)
		resp, err := s.takeRecording(ctx, rec, w, true, cfg)
		if err != nil || len(resp.Notes) > 0 || len(resp.Files) != 1 {
			t.Fatalf("take %s: %+v, %v", w, resp, err)
		}
		if err := s.stopRecorder(ctx, rec, cfg); err != nil {
			t.Fatal(err)
		}
		if fr.Enabled() {
			t.Fatalf("%s: the engine's recorder still runs after the stop", w)
		}
		syncs(7) // between windows: not recorded
	}
	resp, err := s.takeRecording(ctx, rec, "end", false, cfg)
	if err != nil || len(resp.Notes) > 0 || len(resp.Files) != 0 {
		t.Fatalf("take end with the recorder stopped: %+v, %v; want no fetch, no note", resp, err)
	}
	spans, err := rundir.ReadInside(filepath.Join(dir, rundir.InsideFile))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sp := range spans {
		if sp.Kind == rundir.InsideForce && sp.Role == rundir.RoleOther {
			n++
		}
	}
	if n != 10 || eng.starts != 2 {
		t.Errorf("%d forces read after %d starts; want the 10 syncs inside the 2 windows, none of the 21 outside", n, eng.starts)
	}
}

// TestTakeJFRWindows runs a JVM engine (JfrProbe: a force per loop) with its recording cut to
// windows: the JVM starts with its repository but no recording, JFR.start starts rig's at
// the window's Start and JFR.stop stops it after the window's take, so the inside file holds the
// forces of the loops inside the window and none of the many before or after it.
func TestTakeJFRWindows(t *testing.T) {
	tools.Require(t, "java")
	javac := tools.Require(t, "javac")
	tools.Require(t, "jfr")
	cp := t.TempDir()
	if out, err := exec.Command(javac, "-d", cp, "../recording/testdata/JfrProbe.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	dir := t.TempDir()
	a := startAgentWith(t, Options{Dir: dir, Recordings: recording.NewRegistry(recording.JFR{})})
	ctx := context.Background()
	req := StartRequest{
		Config:           engine.Config{Node: "node-0", AdminAddr: testaddr.Free(t)},
		Command:          &command.Spec{Binary: "java", Args: []string{"-cp", cp, "JfrProbe", "{{.DataDir}}", "100000"}},
		Recording:        recording.FormatJFR,
		RecordingWindows: true,
	}
	if err := a.c.StartEngine(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.c.StopEngine(context.Background()) })
	lastLoop := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, rundir.EngineLogFile))
		n := -1
		for _, l := range strings.Split(string(b), "\n") {
			var i int
			if _, err := fmt.Sscanf(l, "loop %d", &i); err == nil {
				n = i
			}
		}
		return n
	}
	waitLoop := func(n int) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for lastLoop() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the engine never got to loop %d", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLoop(12) // outside any window
	before, from := lastLoop(), time.Now()
	start, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "start", Start: true})
	if err != nil || len(start.Notes) > 0 {
		t.Fatalf("start: %+v, %v", start, err)
	}
	waitLoop(lastLoop() + 8)
	take, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "01-a", Defer: true, Stop: true})
	if err != nil || len(take.Files) != 1 || len(take.Notes) > 0 {
		t.Fatalf("take and stop: %+v, %v", take, err)
	}
	last, to := lastLoop(), time.Now()
	waitLoop(last + 12) // outside again
	end, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "end"})
	if err != nil || len(end.Notes) > 0 {
		t.Fatalf("end: %+v, %v", end, err)
	}
	spans, err := rundir.ReadInside(filepath.Join(dir, rundir.InsideFile))
	if err != nil {
		t.Fatal(err)
	}
	forces := 0
	for _, s := range spans {
		if s.Kind != rundir.InsideForce || s.Role != rundir.RoleArchiveSegment {
			continue
		}
		forces++
		if at := time.Unix(0, s.AtNs); at.Before(from) || at.After(to) {
			t.Errorf("a force at %s, outside the window's recording %s..%s", at.Format(time.StampMicro), from.Format(time.StampMicro), to.Format(time.StampMicro))
		}
	}
	// JFR instruments the file classes when the recording starts: the first loops' forces
	// may be missing, never those of loops outside the window.
	if forces == 0 || forces > last-before+1 {
		t.Errorf("%d forces read; want some of the window's loops (%d to %d), none of the %d before it or 12 after",
			forces, before+1, last+1, before+1)
	}
}
