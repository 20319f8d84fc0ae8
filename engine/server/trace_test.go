package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server/servertest"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

// startRecorded runs a one-node engine at sync level 2, 4 KiB snapshot blocks, whose GET /trace serves fr, and returns
// its config and an admin call.
func startRecorded(t *testing.T, fr *trace.FlightRecorder) (engine.Config, func(method, path string) *http.Response) {
	cfg := servertest.Start(t, func(c *engine.Config) { c.SyncLevel, c.SnapshotBlock = 2, 4<<10 }, func(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
		return New(node, log, token).WithFlightRecorder(fr).Run(ctx)
	})
	return cfg, func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+cfg.AdminAddr+path, nil)
		engine.AuthorizeAdmin(req, testAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
}

// readTrace fetches GET /trace into a file, as the agent keeps a window's recording, and reads
// it with the Go trace reader.
func readTrace(t *testing.T, admin func(method, path string) *http.Response) []rundir.InsideSpan {
	t.Helper()
	resp := admin("GET", engine.AdminTrace)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /trace: %s", resp.Status)
	}
	path := filepath.Join(t.TempDir(), "window"+recording.FormatGoTrace.Ext())
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	spans, err := recording.NewRegistry(recording.GoTrace{}).Read(context.Background(), recording.FormatGoTrace, path, recording.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

// TestFlightRecorderCountsTheSnapshotsSyncs: with a flight recorder, GET /trace answers its
// window, and the snapshot forces the reader finds in the snapshot's window are the snapshot's
// own `syncs` figure (the check of a recording on the reference engine). Before it starts, /trace is 409.
func TestFlightRecorderCountsTheSnapshotsSyncs(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	cfg, admin := startRecorded(t, fr)
	if resp := admin("GET", engine.AdminTrace); resp.StatusCode != http.StatusConflict {
		t.Errorf("GET /trace before the recorder started: %s, want 409", resp.Status)
	}
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	// Orders before the snapshot, so the book has several blocks to write and the log syncs too.
	sendOrders(t, cfg, 1000)
	from := time.Now().UnixNano()
	resp := admin("POST", engine.AdminSnapshot)
	var snap engine.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("snapshot: %s %v", resp.Status, err)
	}
	resp.Body.Close()
	to := time.Now().UnixNano()
	var perBlock, take, logForces int
	logThreads := map[string]int{}
	for _, s := range readTrace(t, admin) {
		if s.Kind != rundir.InsideForce {
			continue
		}
		if s.Role == rundir.RoleLog {
			logForces++
			logThreads[s.Thread]++
		}
		if s.AtNs < from || s.AtNs > to {
			continue // outside the snapshot's window
		}
		if s.Role == rundir.RoleSnapshot {
			take++
			if strings.Contains(s.Detail, "replica.WriteSnapshotFile.func") { // the block writer's
				perBlock++
			}
		}
	}
	t.Logf("snapshot %+v; per-block forces %d, in the take %d, log forces %d by %v", snap, perBlock, take, logForces, logThreads)
	// The engine's syncs figure counts the per-block syncs; the take then syncs the file and the
	// folder (engine/replica/snapwrite.go).
	if snap.Syncs == nil || *snap.Syncs == 0 || perBlock != *snap.Syncs || take != *snap.Syncs+2 {
		t.Errorf("flight recorder saw %d per-block fsyncs and %d in the take; the snapshot reports syncs %v", perBlock, take, snap.Syncs)
	}
	// The leader appends in raft's main loop: its forces are named so, not by the wrapper raft
	// starts every goroutine with.
	if logForces == 0 || logThreads["raft.(*Raft).run"] < logForces/2 {
		t.Errorf("log forces %d by %v; want the orders' appends at sync level 2, by raft.(*Raft).run", logForces, logThreads)
	}
}

// TestFlightRecorderNamesTheApplyPath: with one P and a goroutine spinning beside the engine,
// every order's goroutines wait to run; the reader names those on the apply path (applyPath in
// recording/gotrace.go) by the engine's own functions, so renaming one fails here.
func TestFlightRecorderNamesTheApplyPath(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	cfg, admin := startRecorded(t, fr)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	stop := make(chan struct{})
	go func() { // a CPU hog in the engine's process, preempted every 10 ms or so
		for {
			select {
			case <-stop:
				return
			default:
			}
			for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
			}
		}
	}()
	sendOrders(t, cfg, 60)
	close(stop)
	threads := map[string]int{}
	for _, s := range readTrace(t, admin) {
		if s.Kind == rundir.InsideSchedDelay {
			threads[s.Thread]++
		}
	}
	t.Logf("scheduler delays per goroutine: %v", threads)
	// raft's FSM goroutine is woken by its main loop and usually runs from the P's runnext slot
	// the moment the loop blocks, under the 50 µs the reader keeps, so it is not required here.
	for _, want := range []string{"raft.(*Raft).run", "server.(*Server).serveConn"} {
		found := false
		for th := range threads {
			if th == want || strings.HasPrefix(th, want+".func") {
				found = true
			}
		}
		if !found {
			t.Errorf("no scheduler delay of %s among %v", want, threads)
		}
	}
}

// sendOrders sends n resting orders one at a time over the client protocol.
func sendOrders(t *testing.T, cfg engine.Config, n int) { sendOrdersFrom(t, cfg, 1, n) }

// sendOrdersFrom sends n orders with ids from first on.
func sendOrdersFrom(t *testing.T, cfg engine.Config, first, n int) {
	t.Helper()
	nc, err := net.Dial("tcp", cfg.ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	for i := range n {
		id := uint64(first + i)
		req := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeOrder, Corr: id,
			Order: wire.Order{ID: id, Instrument: 1, Side: wire.Buy, TIF: wire.GTC, Price: int64(100 + i%10), Qty: 1}})
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		frame, err := wire.ReadFrame(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r wire.Response
		if err := wire.DecodeResponse(frame, &r); err != nil || r.Status != wire.StatusOK {
			t.Fatalf("order %d: %v %+v", id, err, r)
		}
	}
}

// An idle recorder (engine.Config.FlightRecorderIdle) runs only between POST /trace/start and
// POST /trace/stop, as the agent switches it around a run's windows: a dump while it runs holds
// what happened then (a snapshot's forces), a stopped one answers 409, and it starts again
// after a stop. Asking twice is no error.
func TestFlightRecorderSwitchedByAdmin(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	defer fr.Stop()
	cfg, admin := startRecorded(t, fr)
	switchTo := func(path string, want bool) {
		t.Helper()
		resp := admin("POST", path)
		defer resp.Body.Close()
		var got struct {
			Recording bool `json:"recording"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || got.Recording != want {
			t.Fatalf("POST %s: %s %v recording=%v, want recording=%v", path, resp.Status, err, got.Recording, want)
		}
	}
	forces := func(round int) int {
		sendOrdersFrom(t, cfg, 1+round*200, 200)
		resp := admin("POST", engine.AdminSnapshot)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("snapshot: %s", resp.Status)
		}
		n := 0
		for _, s := range readTrace(t, admin) {
			if s.Kind == rundir.InsideForce && s.Role == rundir.RoleSnapshot {
				n++
			}
		}
		return n
	}
	if resp := admin("GET", engine.AdminTrace); resp.StatusCode != http.StatusConflict {
		t.Errorf("GET /trace while idle: %s, want 409", resp.Status)
	}
	for round := range 2 {
		switchTo(engine.AdminTraceStart, true)
		switchTo(engine.AdminTraceStart, true)
		if n := forces(round); n == 0 {
			t.Errorf("round %d: no snapshot force in the recording", round+1)
		}
		switchTo(engine.AdminTraceStop, false)
		switchTo(engine.AdminTraceStop, false)
		if resp := admin("GET", engine.AdminTrace); resp.StatusCode != http.StatusConflict {
			t.Errorf("round %d: GET /trace after stop: %s, want 409", round+1, resp.Status)
		}
	}
}
