package replica

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/rundir"
)

// openRecording starts a node that appends its phases to <dir>/pauses.ndjson, as cmd/rig engine
// does.
func openRecording(t *testing.T, cfg engine.Config) (*Node, string) {
	t.Helper()
	path := filepath.Join(cfg.Dir, rundir.PausesFile)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	w, err := rundir.CreatePauses(path)
	if err != nil {
		t.Fatal(err)
	}
	n.RecordPhases(func(s engine.WorkSpan) { w.Write(rundir.PhaseSpan(s)); w.Flush() })
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(); w.Close() })
	return n, path
}

func phasesIn(t *testing.T, path string, kinds ...rundir.InsideKind) []rundir.InsideSpan {
	t.Helper()
	ss, err := rundir.ReadInside(path)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ss, func(s rundir.InsideSpan) bool { return !slices.Contains(kinds, s.Kind) })
}

func absNs(ns int64) int64 { return max(ns, -ns) }

func msOf(ns int64) float64 { return float64(ns) / 1e6 }

// TestPhasesRecorded runs a real 3-node raft cluster on loopback with every node recording its
// phases: a replicated snapshot gives each node a capture and a persist span on the apply path
// whose lengths are the take's own times (the snapshot /status reports), and a follower shut
// down and relaunched behind the leader gives a restore span (its restore time) and then its
// joining, replay and catch-up, back to back, ending once it is ready.
func TestPhasesRecorded(t *testing.T) {
	cfgs := testClusterConfigs(t, 3, 1)
	nodes := make([]*Node, 3)
	paths := make([]string, 3)
	for i, c := range cfgs {
		nodes[i], paths[i] = openRecording(t, c)
	}
	waitFor(t, "a leader", func() bool { return leaderOf(nodes) != nil })
	leader := leaderOf(nodes)
	waitFor(t, "all ready", func() bool {
		for _, n := range nodes {
			if n.Status(false).Phase != engine.PhaseReady {
				return false
			}
		}
		return true
	})
	apply := func(from, to uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			f := leader.ApplyAsync(order(i, i, wire.Buy, int64(100-i%50)), 5*time.Second)
			if i == to {
				if err := f.Error(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	apply(1, 5000)
	before := time.Now()
	snap, err := leader.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every node snapshotted at the marker", func() bool {
		for _, n := range nodes {
			if s := n.Status(false).LastSnapshot; s == nil || s.Index != snap.Index {
				return false
			}
		}
		return true
	})
	after := time.Now()
	for i, n := range nodes {
		take := n.Status(false).LastSnapshot
		var ss []rundir.InsideSpan
		waitFor(t, "the take's two spans", func() bool {
			ss = phasesIn(t, paths[i], rundir.PhaseSnapshotCapture, rundir.PhaseSnapshotPersist)
			return len(ss) == 2
		})
		c, p := ss[0], ss[1]
		if c.Kind != rundir.PhaseSnapshotCapture || p.Kind != rundir.PhaseSnapshotPersist || c.Blocks != rundir.BlocksApply || p.Blocks != rundir.BlocksApply ||
			c.Source != rundir.SourceEnginePhases || c.Detail == "" || p.Detail == "" {
			t.Fatalf("%s: take spans %+v", n.cfg.Node, ss)
		}
		if c.AtNs < before.UnixNano() || p.AtNs+p.DurNs > after.UnixNano() {
			t.Errorf("%s: take at %v+%v, outside the snapshot's time [%v, %v]", n.cfg.Node, time.Unix(0, c.AtNs), time.Duration(p.AtNs+p.DurNs-c.AtNs), before, after)
		}
		if c.DurNs <= 0 || p.DurNs <= 0 || p.AtNs != c.AtNs+c.DurNs {
			t.Errorf("%s: capture %v then persist %v at +%v: want both > 0, back to back", n.cfg.Node, time.Duration(c.DurNs), time.Duration(p.DurNs), time.Duration(p.AtNs-c.AtNs))
		}
		// The spans are the take's own times, which /status reports to the µs.
		if math.Abs(msOf(c.DurNs)-take.EncodeMs) > 0.002 || math.Abs(msOf(c.DurNs+p.DurNs)-take.TakeMs) > 0.002 {
			t.Errorf("%s: capture %.3f ms, take %.3f ms; the snapshot says encode %.3f ms, take %.3f ms", n.cfg.Node, msOf(c.DurNs), msOf(c.DurNs+p.DurNs), take.EncodeMs, take.TakeMs)
		}
	}

	// A follower down while the leader goes on: it restarts from its snapshot, replays what its
	// log had past it and catches up with what it missed.
	fi := slices.IndexFunc(nodes, func(n *Node) bool { return n != leader })
	apply(5001, 7000)
	waitFor(t, "the follower has the entries past the snapshot", func() bool { return nodes[fi].Status(false).AppliedIndex >= leader.Status(false).AppliedIndex })
	if err := nodes[fi].Shutdown(); err != nil {
		t.Fatal(err)
	}
	apply(7001, 10000)
	relaunch := time.Now()
	re, path := openRecording(t, cfgs[fi])
	nodes[fi] = re
	opened := time.Now()
	if re.Status(false).Phase == engine.PhaseReady {
		t.Fatal("relaunched node ready before catching up")
	}
	waitFor(t, "relaunched follower ready", func() bool { return re.Status(false).Phase == engine.PhaseReady })
	ready := time.Now()
	restored := re.Status(false).LastSnapshot
	var rs, after2 []rundir.InsideSpan
	waitFor(t, "the relaunch's spans up to ready", func() bool {
		rs = phasesIn(t, path, rundir.PhaseRestore)
		after2 = phasesIn(t, path, rundir.PhaseJoin, rundir.PhaseReplay, rundir.PhaseCatchUp)
		after2 = slices.DeleteFunc(after2, func(s rundir.InsideSpan) bool { return s.AtNs < relaunch.UnixNano() })
		return len(rs) == 1 && len(after2) > 0 && after2[len(after2)-1].Kind == rundir.PhaseCatchUp
	})
	r := rs[0]
	if r.Blocks != rundir.BlocksReady || r.AtNs < relaunch.UnixNano() || r.AtNs+r.DurNs > opened.UnixNano() || r.DurNs <= 0 {
		t.Errorf("restore %+v: want blocking ready, inside the launch [%v, %v]", r, relaunch, opened)
	}
	if math.Abs(msOf(r.DurNs)-restored.RestoreMs) > 0.002 {
		t.Errorf("restore span %.3f ms, the node reports restore_ms %.3f", msOf(r.DurNs), restored.RestoreMs)
	}
	// joining, then replay (unless it ended between two reads of the phase), then catch-up: back
	// to back from the end of the restore to ready.
	order := []rundir.InsideKind{rundir.PhaseJoin, rundir.PhaseReplay, rundir.PhaseCatchUp}
	prevEnd, prevRank := r.AtNs+r.DurNs, -1
	for _, s := range after2 {
		rank := slices.Index(order, s.Kind)
		if rank <= prevRank || s.Blocks != rundir.BlocksReady || s.Detail == "" {
			t.Fatalf("phases after the restore out of order or without what they held up: %+v", after2)
		}
		// Starts are wall-clock readings, lengths monotonic ones: a µs of difference is allowed.
		if s.AtNs < prevEnd-1000 || (prevRank >= 0 && absNs(s.AtNs-prevEnd) > 1000) {
			t.Errorf("%s starts at %v, the phase before ended at %v", s.Kind, time.Unix(0, s.AtNs), time.Unix(0, prevEnd))
		}
		prevEnd, prevRank = s.AtNs+s.DurNs, rank
	}
	for _, s := range append(rs, after2...) {
		t.Logf("%s %.3f ms: %s", s.Kind, msOf(s.DurNs), s.Detail)
	}
	if after2[0].Kind != rundir.PhaseJoin {
		t.Errorf("first phase after the restore is %s, want join", after2[0].Kind)
	}
	// Not ready when Open returned; ready when the poll saw it (the watcher reads every ms).
	if prevEnd < opened.UnixNano() || prevEnd > ready.Add(time.Second).UnixNano() {
		t.Errorf("catch-up ends at %v: want after the launch (%v) and by ready (%v)", time.Unix(0, prevEnd), opened, ready)
	}
}

// BenchmarkPhaseAdd is what a take pays on the apply goroutine for one phase span: the span
// handed to the writer's goroutine (a queue with room, as a run's few spans always find it). A
// take adds two; a command none.
func BenchmarkPhaseAdd(b *testing.B) {
	p := &phaseLog{&spanQueue[engine.WorkSpan]{ch: make(chan engine.WorkSpan, 1<<20)}} // run with -benchtime of at most 1<<20 x
	from := time.Now()
	to := from.Add(time.Millisecond)
	for b.Loop() {
		p.add(engine.WorkSnapshotCapture, engine.BlocksApply, from, to, "snapshot at index 1")
	}
	if n := p.dropped.Load(); n > 0 {
		b.Fatalf("%d spans dropped: run with -benchtime 200000x", n)
	}
}
