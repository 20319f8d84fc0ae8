package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/hog"
)

// hogCPUSeconds is the CPU time a process has used (utime+stime from /proc/PID/stat).
func hogCPUSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100 // USER_HZ
}

// Only the run holding the lease may start or end a hog: no run, or another run, is refused
// and nothing starts. The holder's hog is a process of its own (not the agent) that burns CPU,
// takes the node's CPU count for threads 0, and ends stopped early when asked before its time.
func TestHogOnlyForTheLeaseHolder(t *testing.T) {
	ctx := context.Background()
	_, client, _ := startLeaseAgent(t, t.TempDir())
	req := hog.Request{Threads: 1, For: "1m"}
	if _, err := client("").StartHog(ctx, req); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("hog with no run and no lease: %v; want 409 naming the lease", err)
	}
	c := client("20261206-120000-hog")
	if _, err := c.Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := client("").StartHog(ctx, req); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("hog with no run while a run holds the lease: %v; want 409", err)
	}
	if _, err := client("20261206-120000-other").StartHog(ctx, req); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("hog from another run: %v; want 409", err)
	}
	if _, err := c.StartHog(ctx, hog.Request{Threads: 1, For: "0s"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("hog for 0s: %v; want 400", err)
	}
	st, err := c.StartHog(ctx, hog.Request{For: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if st.PID == os.Getpid() || !pidAlive(st.PID) || st.Threads != runtime.NumCPU() || st.Started.IsZero() {
		t.Fatalf("hog %+v (agent pid %d, %d CPUs): want a live process of its own with a thread per CPU", st, os.Getpid(), runtime.NumCPU())
	}
	time.Sleep(300 * time.Millisecond)
	if cpu := hogCPUSeconds(t, st.PID); cpu <= 0 {
		t.Errorf("hog used %.2f s of CPU in 300 ms; want it busy", cpu)
	}
	if _, err := client("20261206-120000-other").EndHog(ctx, st.PID, 0); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("end from another run: %v; want 409", err)
	}
	end, err := c.EndHog(ctx, st.PID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !end.StoppedEarly || end.Ended.IsZero() || pidAlive(st.PID) {
		t.Errorf("ended %+v, alive %v; want stopped early and gone", end, pidAlive(st.PID))
	}
}

// A hog ends by itself at its time: the end request finds it over, not stopped.
func TestHogEndsAtItsTime(t *testing.T) {
	ctx := context.Background()
	_, client, _ := startLeaseAgent(t, t.TempDir())
	c := client("20261206-120000-hog")
	if _, err := c.Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	st, err := c.StartHog(ctx, hog.Request{Threads: 1, For: "300ms", Nice: 10})
	if err != nil {
		t.Fatal(err)
	}
	end, err := c.EndHog(ctx, st.PID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took := end.Ended.Sub(end.Started); end.StoppedEarly || end.Exit != "exit status 0" || took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("hog %+v after %s; want it to end by itself after its 300ms", end, took)
	}
	if end.Nice != 10 || pidAlive(st.PID) {
		t.Errorf("hog %+v alive %v", end, pidAlive(st.PID))
	}
}

// A hog never outlives its run: the lease lapses (the controller is gone) and the agent kills
// it with the rest of the run's undo, recording it in lease.jsonl; the agent stopping kills one
// too.
func TestHogEndsWithTheRun(t *testing.T) {
	ctx := context.Background()
	t.Run("lease lapses", func(t *testing.T) {
		dir, client, _ := startLeaseAgent(t, t.TempDir())
		c := client("20261206-120000-lapse")
		if _, err := c.Lease(ctx, MinLeaseTTL); err != nil {
			t.Fatal(err)
		}
		st, err := c.StartHog(ctx, hog.Request{Threads: 1, For: "1m"})
		if err != nil {
			t.Fatal(err)
		}
		var recs []LeaseRecord
		for deadline := time.Now().Add(10 * time.Second); len(recs) == 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			recs = readLeaseRecords(t, dir)
		}
		if len(recs) != 1 || recs[0].Event != "lapsed" || recs[0].HogsStopped != 1 {
			t.Fatalf("lease records %+v; want one lapse that stopped the hog", recs)
		}
		if pidAlive(st.PID) {
			t.Fatalf("hog %d still running after the lease lapsed", st.PID)
		}
		if _, err := c.EndHog(ctx, st.PID, 0); !errors.Is(err, ErrLeaseLapsed) {
			t.Errorf("end after the lapse: %v; want the lapse", err)
		}
	})
	t.Run("agent stops", func(t *testing.T) {
		_, client, stop := startLeaseAgent(t, t.TempDir())
		c := client("20261206-120000-stop")
		if _, err := c.Lease(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		st, err := c.StartHog(ctx, hog.Request{Threads: 1, For: "1m"})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if pidAlive(st.PID) {
			t.Fatalf("hog %d still running after its agent stopped", st.PID)
		}
	})
	t.Run("agent killed", func(t *testing.T) {
		cmd, c := startChildAgent(t)
		c.Run = "20261206-120000-kill"
		if _, err := c.Lease(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		st, err := c.StartHog(ctx, hog.Request{Threads: 1, For: "1m"})
		if err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(syscall.SIGKILL) // no undo: the kernel's Pdeathsig
		cmd.Wait()
		waitGone(t, st.PID, "hog")
	})
}

// A hog shorter than the wait for its Ready line still starts: its line is read whenever it
// exits.
func TestHogShorterThanItsStart(t *testing.T) {
	ctx := context.Background()
	_, client, _ := startLeaseAgent(t, t.TempDir())
	c := client("20261206-120000-short")
	if _, err := c.Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		st, err := c.StartHog(ctx, hog.Request{Threads: 1, For: "1ms"})
		if err != nil {
			t.Fatal(err)
		}
		if end, err := c.EndHog(ctx, st.PID, 5*time.Second); err != nil || end.StoppedEarly {
			t.Fatalf("end %+v: %v", end, err)
		}
	}
}

// A hog belongs to the run that started it: releasing the lease kills the run's hogs still
// running and records them, so the next run to take the agent finds none of them, and cannot end
// one (404 naming its own run).
func TestHogEndsWithItsLeaseRelease(t *testing.T) {
	ctx := context.Background()
	dir, client, _ := startLeaseAgent(t, t.TempDir())
	a, b := client("20261207-120000-a"), client("20261207-120000-b")
	if _, err := a.Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	st, err := a.StartHog(ctx, hog.Request{Threads: 1, For: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	alive := pidAlive(st.PID)
	if alive {
		syscall.Kill(-st.PID, syscall.SIGKILL) // the old agent's hog, so the test leaves none
	}
	recs := readLeaseRecords(t, dir)
	if alive || len(recs) != 1 || recs[0].Event != "released" || recs[0].HogsStopped != 1 {
		t.Fatalf("after the release: hog alive %v, lease records %+v; want it killed and one release recording it", alive, recs)
	}
	if _, err := b.Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.EndHog(ctx, st.PID, 0); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), b.Run) {
		t.Errorf("the next run ends the old run's hog: %v; want 404 naming its run", err)
	}
}

// The undo of a run (its lapse, the agent stopping) kills that run's hogs and no other's: a
// lapse undone late, once the next run holds the agent and started its own hog, leaves that hog.
func TestHogUndoKillsOnlyItsRunsHogs(t *testing.T) {
	s := &Server{opts: Options{Dir: t.TempDir(), Node: "node-0"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), mux: http.NewServeMux()}
	s.registerLeaseHandlers(context.Background())
	s.registerHogHandlers()
	t.Cleanup(func() { s.stopHogs(allRuns, true) })
	start := func(run string) hog.State {
		s.lease.mu.Lock()
		s.lease.run = run
		s.lease.mu.Unlock()
		p, err := s.startHog(run, 1, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return p.state()
	}
	old, next := start("20261207-120000-old"), start("20261207-120000-next")
	rec := s.undoRun("lapsed", "20261207-120000-old", time.Now())
	if rec.HogsStopped != 1 || pidAlive(old.PID) || !pidAlive(next.PID) {
		t.Fatalf("undo of the old run: %+v, its hog alive %v, the next run's alive %v; want only the old run's killed",
			rec, pidAlive(old.PID), pidAlive(next.PID))
	}
}
