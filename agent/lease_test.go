package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/agent/tune/tunetest"
)

// startLeaseAgent runs an agent with the test engine and a fake /proc,/sys tree.
func startLeaseAgent(t *testing.T, root string) (dir string, client func(run string) *Client, stop func()) {
	t.Helper()
	dir = t.TempDir()
	ln := listenSocket(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{Listener: ln, Dir: dir, Root: root, Node: "node-0", Binary: testEngine,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	client = func(run string) *Client {
		c := NewClient("node-0", dialSocket(SocketPath(dir)))
		c.Run = run
		t.Cleanup(c.Close)
		return c
	}
	return dir, client, stop
}

func readLeaseRecords(t *testing.T, dir string) []LeaseRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, LeaseFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []LeaseRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r LeaseRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("lease.jsonl: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// The controller stops renewing: the agent stops the engine, reverts the tuning (the fake tree
// is byte-identical to before), records it, and answers the lapsed run 410.
func TestLeaseLapseUndoesTheRun(t *testing.T) {
	ctx := context.Background()
	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	dir, client, _ := startLeaseAgent(t, root)
	c := client("20261202-120000-lease")
	if _, err := c.Lease(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.StartEngine(ctx, engineStartReq(t)); err != nil {
		t.Fatal(err)
	}
	pid := runningEnginePID(t, c)
	if _, err := c.Tune(ctx, tune.Profile{"vm.swappiness": "1", "vm.dirty_ratio": "40"}); err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	// Renewals keep it: three renewals over 1.5 s, each within the 1 s lease.
	for i := 0; i < 3; i++ {
		time.Sleep(500 * time.Millisecond)
		if _, err := c.Lease(ctx, time.Second); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		renewed = time.Now()
	}
	if !pidAlive(pid) {
		t.Fatal("engine stopped while the lease was renewed")
	}
	// Now the controller is gone.
	deadline := renewed.Add(5 * time.Second)
	var recs []LeaseRecord
	for len(recs) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		recs = readLeaseRecords(t, dir)
	}
	if len(recs) != 1 {
		t.Fatalf("lease records %+v, want one lapse", recs)
	}
	r := recs[0]
	if r.Event != "lapsed" || r.Run != c.Run || !r.EngineStopped || r.TuningReverted < 2 || len(r.Errors) != 0 {
		t.Fatalf("lapse record %+v", r)
	}
	if lag := r.T.Sub(r.LastRenewed); lag < time.Second || lag > 3*time.Second {
		t.Errorf("acted %s after the last renewal, want just after the 1 s lease", lag)
	}
	if pidAlive(pid) {
		t.Fatalf("engine %d still running after the lapse", pid)
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("tuning not reverted:\nbefore %v\nafter  %v", before, after)
	}
	// The lapsed run is told so when it would change the node, but may still collect what it
	// left (over SSH that is the only way its results come back); a new run may claim the agent.
	if _, err := c.Tune(ctx, tune.Profile{"vm.swappiness": "1"}); !errors.Is(err, ErrLeaseLapsed) || !strings.Contains(err.Error(), "410") || !strings.Contains(err.Error(), "lapsed") {
		t.Fatalf("tuning by the lapsed run: %v, want 410 naming the lapse", err)
	}
	if _, err := c.Lease(ctx, time.Second); !errors.Is(err, ErrLeaseLapsed) {
		t.Fatalf("renewal by the lapsed run: %v, want 410", err)
	}
	var tgz bytes.Buffer
	if err := c.Collect(ctx, &tgz, CollectOptions{}); err != nil || tgz.Len() == 0 {
		t.Fatalf("collect by the lapsed run: %v (%d bytes)", err, tgz.Len())
	}
	if st, err := client("").LeaseState(ctx); err != nil || st.Run != "" || st.LastLapse == nil || st.LastLapse.Run != c.Run {
		t.Fatalf("lease state after the lapse: %+v %v", st, err)
	}
	if _, err := client("20261202-120100-next").Lease(ctx, time.Second); err != nil {
		t.Fatalf("new run's claim: %v", err)
	}
	if _, err := c.Ping(ctx); !errors.Is(err, ErrLeaseLapsed) {
		t.Fatalf("a read by the lapsed run once another run holds the agent: %v, want 410", err)
	}
}

// While a run holds the agent, another run is refused (and told which run holds it), and a
// client for another node refuses the agent's answers.
func TestLeaseRefusesOtherRuns(t *testing.T) {
	ctx := context.Background()
	dir, client, stop := startLeaseAgent(t, tunetest.FakeTree(t, t.TempDir()))
	a, b := client("run-a"), client("run-b")
	if _, err := a.Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lease(ctx, time.Minute); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "held by run run-a") {
		t.Fatalf("second run's claim: %v, want 409 naming run-a", err)
	}
	if err := b.StartEngine(ctx, engineStartReq(t)); err == nil || !strings.Contains(err.Error(), "held by run run-a") {
		t.Fatalf("second run's engine start: %v, want a refusal", err)
	}
	if pr, err := a.Ping(ctx); err != nil || pr.Run != "run-a" {
		t.Fatalf("holder's ping: %+v %v", pr, err)
	}
	// A client for node-1 that reached node-0's agent refuses its answers.
	stranger := NewClient("node-1", dialSocket(SocketPath(dir)))
	defer stranger.Close()
	if _, err := stranger.Ping(ctx); !errors.Is(err, ErrStranger) {
		t.Fatalf("node-1's client got node-0's answer: %v, want ErrStranger", err)
	}
	for _, bad := range []string{"", "../x", "a/b", "-rf"} {
		if _, err := client(bad).Lease(ctx, time.Minute); err == nil {
			t.Errorf("claim by run %q accepted", bad)
		}
	}
	if _, err := a.Lease(ctx, time.Millisecond); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("1 ms lease: %v, want a refusal naming ttl", err)
	}
	// The agent stops while the run holds it: the same undo, recorded as agent_stopped.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lease(ctx, time.Minute); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	stop()
	recs := readLeaseRecords(t, dir)
	if len(recs) != 2 || recs[0].Event != "released" || recs[0].Run != "run-a" || recs[1].Event != "agent_stopped" || recs[1].Run != "run-b" {
		t.Fatalf("lease records %+v, want run-a released, then run-b's undo at agent stop", recs)
	}
}

// A renewal that arrives after the expiry, before the agent's timer ran (a stopped agent resumes
// with the controller's renewal queued), finds the lease lapsed: the run is undone and told 410,
// never renewed.
func TestLeaseRenewalAfterExpiryLapses(t *testing.T) {
	dir := t.TempDir()
	s := &Server{opts: Options{Dir: dir, Node: "node-0"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), mux: http.NewServeMux()}
	s.registerLeaseHandlers(context.Background())
	const run = "20261203-060000-late"
	renewed := time.Now().Add(-2 * time.Second)
	s.lease.run, s.lease.ttl, s.lease.renewed, s.lease.expires = run, time.Second, renewed, renewed.Add(time.Second)
	req := httptest.NewRequest("POST", APIVersion+"/lease", strings.NewReader(`{"run":"`+run+`","ttl":"1s"}`))
	req.Header.Set(HeaderRun, run)
	w := httptest.NewRecorder()
	s.identify(s.mux).ServeHTTP(w, req)
	if w.Code != http.StatusGone || !strings.Contains(w.Body.String(), "lapsed") {
		t.Fatalf("late renewal answered %d %s, want 410 naming the lapse", w.Code, w.Body.String())
	}
	var recs []LeaseRecord
	for deadline := time.Now().Add(5 * time.Second); len(recs) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		recs = readLeaseRecords(t, dir) // the undo runs after the answer
	}
	if len(recs) != 1 || recs[0].Event != "lapsed" || !recs[0].LastRenewed.Equal(renewed) {
		t.Fatalf("lease records %+v, want the lapse", recs)
	}
}
