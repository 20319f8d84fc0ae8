package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

func TestBurstSeries(t *testing.T) {
	c := startCluster(t, 2)
	c.SetLeader(1)
	dir := t.TempDir()
	const per, count = 500, 3
	const every = 60 * time.Millisecond
	st, err := Burst(t.Context(), BurstOptions{Servers: c.Addrs(), Series: rundir.BurstSeries{Messages: per, Every: every, Count: count}, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != per*count || st.Answered != per*count || st.Lost != 0 || len(st.Bursts) != count {
		t.Fatalf("sent %d answered %d lost %d in %d bursts", st.Sent, st.Answered, st.Lost, len(st.Bursts))
	}
	for _, b := range st.Bursts {
		if b.Sent != per || b.Answered != per || b.PeakPerMs < burstChunk || b.PeakPerMs > per || b.DrainNs <= 0 || b.DrainNs < b.SendNs || b.MaxLatencyNs <= 0 {
			t.Errorf("burst %+v", b)
		}
	}
	if d := st.Bursts[1].Due.Sub(st.Bursts[0].Due); d != every {
		t.Errorf("bursts due %v apart, want %v", d, every)
	}
	ps := readSorted(t, filepath.Join(dir, rundir.BurstsFile))
	if len(ps) != per*count {
		t.Fatalf("%d burst records, want %d", len(ps), per*count)
	}
	// Every message of a burst carries the burst's due time: its latency includes the queue the
	// burst built in the client.
	for i, p := range ps {
		want := st.Bursts[i/per].Due.UnixNano()
		if p.IntendedNs != want || p.Outcome != rundir.ProbeOK {
			t.Fatalf("burst message %d intended %d outcome %d, want %d OK", i, p.IntendedNs, p.Outcome, want)
		}
	}
	if cs := c.Stats(); cs.Crossed != 0 {
		t.Errorf("bursts crossed the book %d times", cs.Crossed)
	}
	if _, err := os.Stat(filepath.Join(dir, "bursts.json")); err != nil {
		t.Error(err)
	}
	if _, err := Burst(t.Context(), BurstOptions{Servers: c.Addrs(), Series: rundir.BurstSeries{Messages: 10, Count: 2}, Out: dir}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("count 2 without every: err %v, want ErrBadOptions", err)
	}
}

// The control API of a probe run: bursts alongside the probes, live stats, and stop.
func TestControlAPI(t *testing.T) {
	c := startCluster(t, 1)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 500, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "ctl", "loadgen.sock")
	ln, err := ListenControl(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ControlHandler(run)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://loadgen"
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := hc.Post(base+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stats := func() rundir.ProbeStats {
		t.Helper()
		resp, err := hc.Get(base + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st rundir.ProbeStats
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	waitFor(t, func() bool { return stats().Answered >= 50 })
	if st := stats(); st.Phase != "running" {
		t.Fatalf("phase %q while running", st.Phase)
	}
	body := fmt.Sprintf(`{"messages": 300, "every_ns": %d, "count": 3}`, 40*time.Millisecond)
	if code, msg := post("/burst", body); code != http.StatusAccepted {
		t.Fatalf("POST /burst: %d %s", code, msg)
	}
	if code, _ := post("/burst", body); code != http.StatusConflict {
		t.Errorf("second POST /burst while one runs: %d, want 409", code)
	}
	for _, bad := range []string{`{"messages": 0, "every_ns": 1, "count": 1}`, `{"messages": 1, "count": 1, "extra": 2}`, `nope`} {
		if code, _ := post("/burst", bad); code != http.StatusBadRequest {
			t.Errorf("POST /burst %s: %d, want 400", bad, code)
		}
	}
	waitFor(t, func() bool { st := stats(); return len(st.Bursts) == 1 && st.Bursts[0].Phase == "done" })
	if code, _ := post("/stop", ""); code != http.StatusAccepted {
		t.Fatalf("POST /stop: %d", code)
	}
	st, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if st.StopReason != "stop" || st.Lost != 0 {
		t.Errorf("stop reason %q, lost %d", st.StopReason, st.Lost)
	}
	if len(st.Bursts) != 1 || st.Bursts[0].Answered != 900 || len(st.Bursts[0].Bursts) != 3 || st.Bursts[0].PeakPerMs < burstChunk {
		t.Fatalf("bursts %+v", st.Bursts)
	}
	if ps := readSorted(t, filepath.Join(dir, rundir.BurstsFile)); len(ps) != 900 {
		t.Errorf("%d records in bursts.bin, want 900", len(ps))
	}
	if disk := readStats(t, dir); len(disk.Bursts) != 1 {
		t.Errorf("stats.json lacks the burst series")
	}
	if code, _ := post("/burst", body); code != http.StatusGone {
		t.Errorf("POST /burst after the run: %d, want 410", code)
	}
}

// The control API has no authentication of its own: only a Unix socket in a folder of ours,
// never TCP (any local user could reach a loopback port) or a folder others can enter.
func TestListenControlSocketOnly(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o755)
	if ln, err := ListenControl(filepath.Join(open, "loadgen.sock")); err == nil || !strings.Contains(err.Error(), "lets others in") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("socket in a 0755 folder: %v, want a refusal", err)
	}
	for _, addr := range []string{"127.0.0.1:7700", "0.0.0.0:0", "relative/loadgen.sock", ""} {
		if ln, err := ListenControl(addr); !errors.Is(err, ErrBadOptions) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("ListenControl(%q): %v, want ErrBadOptions", addr, err)
		}
	}
}
