package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/supervise/supervisetest"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/rundir"

	"github.com/rig-dev/rig/engine"
)

// testEngine is the engine test double (testdata/testengine.go), built once per test binary.
var testEngine string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "supervise-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testEngine, err = supervisetest.BuildEngine(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func testSpec(t testing.TB, env ...string) Spec {
	return Spec{
		Binary:       testEngine,
		Dir:          t.TempDir(),
		Config:       engine.Config{Node: "node-0", AdminAddr: testaddr.Free(t), SyncLevel: 2},
		Env:          append([]string{"TESTENGINE_PHASE=150ms"}, env...),
		PollInterval: 20 * time.Millisecond,
		StopGrace:    5 * time.Second,
	}
}

func start(t *testing.T, spec Spec) *Engine {
	t.Helper()
	e, err := StartEngine(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background(), time.Second) })
	return e
}

// waitFor reads the journal from *seq until a transition satisfies ok, returning everything read.
func waitFor(t *testing.T, j *Journal, seq *uint64, what string, ok func(rundir.Transition) bool) []rundir.Transition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got []rundir.Transition
	for {
		trs, _ := j.Wait(ctx, *seq)
		if len(trs) == 0 {
			t.Fatalf("timed out waiting for %s; saw %s", what, summary(got))
		}
		for _, tr := range trs {
			got = append(got, tr)
			*seq = tr.Seq
			if ok(tr) {
				return got
			}
		}
	}
}

func summary(trs []rundir.Transition) string {
	var b strings.Builder
	for _, tr := range trs {
		fmt.Fprintf(&b, "\n  #%d %s %q->%q pid %d", tr.Seq, tr.Kind, tr.From, tr.To, tr.PID)
	}
	return b.String()
}

func filter(trs []rundir.Transition, kind rundir.TransitionKind) []string {
	var out []string
	for _, tr := range trs {
		if tr.Kind == kind {
			out = append(out, tr.From+">"+tr.To)
		}
	}
	return out
}

// isLeader: the test engine becomes leader in the same poll it turns ready; the role transition
// is recorded after the phase one.
func isLeader(tr rundir.Transition) bool {
	return tr.Kind == rundir.TransRole && tr.To == engine.RoleLeader
}

func TestTransitionsKillRelaunchStop(t *testing.T) {
	spec := testSpec(t)
	e := start(t, spec)
	j := e.Journal()
	var seq uint64

	// 1. Launch and the phases in order, each seen by a 20 ms poll.
	got := waitFor(t, j, &seq, "leader", isLeader)
	if got[0].Kind != rundir.TransLaunch || got[0].PID != e.PID() || got[0].Launch != 1 {
		t.Fatalf("first transition should be launch 1 of pid %d: %s", e.PID(), summary(got))
	}
	want := []string{">starting", "starting>restoring", "restoring>replaying", "replaying>catching-up", "catching-up>ready"}
	if p := filter(got, rundir.TransPhase); strings.Join(p, " ") != strings.Join(want, " ") {
		t.Fatalf("phases = %v, want %v", p, want)
	}
	if r := filter(got, rundir.TransRole); len(r) < 2 || r[0] != ">follower" || r[len(r)-1] != "follower>leader" {
		t.Fatalf("roles = %v, want >follower ... follower>leader", r)
	}
	for i, tr := range got {
		if tr.Node != "node-0" {
			t.Fatalf("#%d node = %q", tr.Seq, tr.Node)
		}
		if i > 0 && (tr.Seq != got[i-1].Seq+1 || tr.T.Before(got[i-1].T)) {
			t.Fatalf("transitions out of order at #%d: %s", tr.Seq, summary(got))
		}
		if tr.Kind == rundir.TransPhase || tr.Kind == rundir.TransRole {
			if tr.Status == nil || tr.PrevT == nil || !tr.PrevT.Before(tr.T) {
				t.Fatalf("#%d %s: want status and prev_t < t, got %+v", tr.Seq, tr.Kind, tr)
			}
			if tr.Status.PID != e.PID() {
				t.Fatalf("#%d status pid %d, engine pid %d", tr.Seq, tr.Status.PID, e.PID())
			}
		}
	}
	st := e.State()
	if !st.Running || st.Status == nil || st.Status.Phase != engine.PhaseReady || st.Status.Config["sync_level"] != float64(2) {
		t.Fatalf("state = %+v", st)
	}

	// The config file: 0600, data dir resolved into the engine's folder.
	fi, err := os.Stat(filepath.Join(spec.Dir, rundir.EngineConfigFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("engine.json: %v mode %v", err, fi.Mode())
	}
	if st.Status.Config["dir"] != filepath.Join(spec.Dir, "data") {
		t.Fatalf("effective data dir %v", st.Status.Config["dir"])
	}

	// 2. kill -9 records the signal and then "down" with the signal.
	pid1 := e.PID()
	if err := e.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, j, &seq, "down", func(tr rundir.Transition) bool { return tr.To == rundir.PhaseDown })
	down := got[len(got)-1]
	if down.Exit == nil || down.Exit.Signal != "KILL" || down.Exit.Code != -1 || down.From != engine.PhaseReady || down.PID != pid1 {
		t.Fatalf("down transition = %+v exit %+v", down, down.Exit)
	}
	if got[0].Kind != rundir.TransSignal || got[0].To != "KILL" || got[0].T.After(down.T) {
		t.Fatalf("want the KILL signal recorded before down: %s", summary(got))
	}
	if err := e.Signal(syscall.SIGTERM); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("signal after exit: %v, want ErrNotRunning", err)
	}
	if st := e.State(); st.Running || st.Exit == nil || st.Exit.Signal != "KILL" {
		t.Fatalf("state after kill = %+v", st)
	}

	// 3. Relaunch: same folder, new pid, phases again starting from "down".
	pid2, err := e.Relaunch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pid2 == pid1 || pid2 != e.PID() {
		t.Fatalf("relaunch pid %d (first %d, now %d)", pid2, pid1, e.PID())
	}
	if _, err := e.Relaunch(context.Background()); !errors.Is(err, ErrRunning) {
		t.Fatalf("relaunch while running: %v, want ErrRunning", err)
	}
	got = waitFor(t, j, &seq, "leader again", isLeader)
	if got[0].Kind != rundir.TransLaunch || got[0].Launch != 2 || got[0].PID != pid2 {
		t.Fatalf("want launch 2 first: %s", summary(got))
	}
	if p := filter(got, rundir.TransPhase); p[0] != "down>starting" && p[0] != "down>restoring" {
		t.Fatalf("phases after relaunch = %v, want to start from down", p)
	}
	if st := e.State(); len(st.Launches) != 2 || st.Launches[0].Exit == nil || st.Launches[1].PID != pid2 {
		t.Fatalf("launches = %+v", st.Launches)
	}

	// 4. Stop: TERM, the engine exits 0 on its own.
	exit, err := e.Stop(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 0 || exit.Signal != "" {
		t.Fatalf("stop exit = %+v, want code 0", exit)
	}
	got = waitFor(t, j, &seq, "down after stop", func(tr rundir.Transition) bool { return tr.To == rundir.PhaseDown })
	if s := filter(got, rundir.TransSignal); len(s) != 1 || s[0] != "ready>TERM" {
		t.Fatalf("signals on stop = %v", s)
	}

	// The log holds both launches' output, stdout and stderr.
	log, err := os.ReadFile(filepath.Join(spec.Dir, rundir.EngineLogFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"launch 1 of", "launch 2 of", "pid " + strconv.Itoa(pid1), "pid " + strconv.Itoa(pid2), "stderr line", "testengine: terminated"} {
		if !strings.Contains(string(log), s) {
			t.Errorf("engine.log lacks %q:\n%s", s, log)
		}
	}

	// The file journal matches memory.
	j2, err := OpenJournal(filepath.Join(spec.Dir, rundir.TransitionsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	mem, last := j.Since(0)
	disk, last2 := j2.Since(0)
	if len(mem) != len(disk) || last != last2 || last != seq {
		t.Fatalf("journal file has %d (last %d), memory %d (last %d), read up to %d", len(disk), last2, len(mem), last, seq)
	}
}

// The agent follows an engine's change stream and never polls its status; an engine without the
// stream is polled, with the same transitions recorded.
func TestChangeStreamOrPolling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		polls bool
	}{
		{"stream", nil, false},
		{"no stream", []string{"TESTENGINE_NO_CHANGES=1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, tc.env...)
			e := start(t, spec)
			var seq uint64
			got := waitFor(t, e.Journal(), &seq, "leader", isLeader)
			want := ">starting starting>restoring restoring>replaying replaying>catching-up catching-up>ready"
			if p := strings.Join(filter(got, rundir.TransPhase), " "); p != want {
				t.Fatalf("phases %s, want %s", p, want)
			}
			log, err := os.ReadFile(filepath.Join(spec.Dir, rundir.EngineLogFile))
			if err != nil {
				t.Fatal(err)
			}
			if polls := strings.Count(string(log), "GET /status"); (polls > 0) != tc.polls {
				t.Fatalf("%d GET /status in the engine's log; want polls: %v", polls, tc.polls)
			}
		})
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	e := start(t, testSpec(t, "TESTENGINE_IGNORE_TERM=1"))
	var seq uint64
	waitFor(t, e.Journal(), &seq, "starting", func(tr rundir.Transition) bool { return tr.Kind == rundir.TransPhase })
	exit, err := e.Stop(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Signal != "KILL" {
		t.Fatalf("exit = %+v, want killed after the grace", exit)
	}
	got := waitFor(t, e.Journal(), &seq, "down", func(tr rundir.Transition) bool { return tr.To == rundir.PhaseDown })
	if s := filter(got, rundir.TransSignal); len(s) != 2 || !strings.HasSuffix(s[0], ">TERM") || !strings.HasSuffix(s[1], ">KILL") {
		t.Fatalf("signals = %v, want TERM then KILL", s)
	}
}

func TestStopContinuesAStoppedEngine(t *testing.T) {
	e := start(t, testSpec(t))
	var seq uint64
	waitFor(t, e.Journal(), &seq, "starting", func(tr rundir.Transition) bool { return tr.Kind == rundir.TransPhase })
	if err := e.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !e.State().Stopped {
		t.Fatal("state should say stopped after STOP")
	}
	exit, err := e.Stop(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 0 {
		t.Fatalf("exit = %+v, want a clean exit after TERM+CONT", exit)
	}
}

func TestExitCodeRecorded(t *testing.T) {
	e := start(t, testSpec(t, "TESTENGINE_EXIT=3", "TESTENGINE_PHASE=20ms"))
	var seq uint64
	got := waitFor(t, e.Journal(), &seq, "down", func(tr rundir.Transition) bool { return tr.To == rundir.PhaseDown })
	down := got[len(got)-1]
	if down.Exit == nil || down.Exit.Code != 3 || down.Exit.Signal != "" {
		t.Fatalf("down = %+v exit %+v", down, down.Exit)
	}
}

func TestKillReachesTheProcessGroup(t *testing.T) {
	spec := testSpec(t, "TESTENGINE_CHILD=1")
	e := start(t, spec)
	var seq uint64
	waitFor(t, e.Journal(), &seq, "starting", func(tr rundir.Transition) bool { return tr.Kind == rundir.TransPhase })
	b, err := os.ReadFile(filepath.Join(spec.Dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(string(b))
	if !alive(child) {
		t.Fatalf("child %d not running", child)
	}
	if err := e.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, child)
}

// alive reports whether pid exists and is not a zombie (an orphan reparented to a pid 1 that
// does not reap stays a zombie, which is dead for our purpose).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBadSpecCreatesNothing(t *testing.T) {
	base := t.TempDir()
	for name, mut := range map[string]func(*Spec){
		"no admin":        func(s *Spec) { s.Config.AdminAddr = "" },
		"public admin":    func(s *Spec) { s.Config.AdminAddr = "0.0.0.0:9000" },
		"admin no port":   func(s *Spec) { s.Config.AdminAddr = "127.0.0.1" },
		"admin port zero": func(s *Spec) { s.Config.AdminAddr = "127.0.0.1:0" },
		"no dir":          func(s *Spec) { s.Dir = "" },
	} {
		t.Run(name, func(t *testing.T) {
			s := testSpec(t)
			s.Dir = filepath.Join(base, "x")
			mut(&s)
			_, err := StartEngine(context.Background(), s)
			if !errors.Is(err, ErrBadSpec) {
				t.Fatalf("err = %v, want ErrBadSpec", err)
			}
			if _, err := os.Stat(filepath.Join(base, "x")); !os.IsNotExist(err) {
				t.Fatalf("folder created for a bad spec")
			}
		})
	}
	s := testSpec(t)
	s.Dir = filepath.Join(base, "x")
	s.Binary = filepath.Join(base, "no-such-engine")
	if _, err := StartEngine(context.Background(), s); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "no-such-engine") {
		t.Fatalf("missing binary: %v", err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("folder created for a missing binary")
	}
}

func TestJournalReopenContinuesSequence(t *testing.T) {
	path := filepath.Join(t.TempDir(), rundir.TransitionsFile)
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := j.Append(rundir.Transition{Kind: rundir.TransPhase, To: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	// A torn record, as left by an agent killed mid-write.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":4,"kind":"ph`)
	f.Close()

	j, err = OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	tr, err := j.Append(rundir.Transition{Kind: rundir.TransRole})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Seq != 4 {
		t.Fatalf("seq after reopen = %d, want 4", tr.Seq)
	}
	got, last := j.Since(2)
	if last != 4 || len(got) != 2 || got[0].Seq != 3 || got[1].Kind != rundir.TransRole {
		t.Fatalf("since 2 = %+v (last %d)", got, last)
	}
	j.Close()
	j, _ = OpenJournal(path)
	defer j.Close()
	if all, _ := j.Since(0); len(all) != 4 {
		t.Fatalf("after repair the file holds %d records, want 4", len(all))
	}
}

func TestJournalWaitWakesOnAppend(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), rundir.TransitionsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if got, _ := j.Wait(ctx, 0); len(got) != 0 {
		t.Fatalf("empty journal returned %v", got)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		j.Append(rundir.Transition{Kind: rundir.TransLaunch})
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	got, last := j.Wait(ctx2, 0)
	if len(got) != 1 || last != 1 {
		t.Fatalf("wait = %v last %d", got, last)
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"KILL": syscall.SIGKILL, "sigterm": syscall.SIGTERM, "9": syscall.SIGKILL, " STOP ": syscall.SIGSTOP, "Cont": syscall.SIGCONT} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "BOGUS", "SEGV", "0"} {
		if _, err := ParseSignal(in); !errors.Is(err, ErrBadSignal) || !strings.Contains(err.Error(), "KILL, TERM") {
			t.Errorf("ParseSignal(%q) err = %v", in, err)
		}
	}
}

// BenchmarkPoll is the agent's cost of one status poll (50 of them a second per engine at the
// 20 ms default): the figure behind "know your own overhead".
func BenchmarkPoll(b *testing.B) {
	spec := testSpec(b)
	spec.PollInterval = time.Hour // the benchmark drives the polls
	spec.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := StartEngine(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background(), time.Second)
	url := "http://" + spec.Config.AdminAddr + "/status"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.poll(context.Background(), url); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		st, err := e.poll(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		e.mu.Lock()
		e.observe(e.cur, st, time.Now(), e.obs.at)
		e.mu.Unlock()
		n++
	}
	// The agent's own CPU per poll (this process only; the engine's side is not counted).
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "agent-cpu-ns/poll")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
