package analysis

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// writeSched writes node's scheduler samples: every 20 ms over [fromMs, toMs), thread comm
// waited waitMs of each interval.
func writeSched(t *testing.T, dir, node, comm string, fromMs, toMs, waitMs int64) {
	t.Helper()
	p := filepath.Join(dir, node, rundir.SchedDir, "os"+rundir.SchedExt)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := rundir.CreateSched(p)
	if err != nil {
		t.Fatal(err)
	}
	for ms := fromMs + 20; ms <= toMs; ms += 20 {
		w.Write(rundir.SchedSample{AtNs: at(ms).UnixNano(), IntervalNs: int64(20 * time.Millisecond),
			Threads: []rundir.SchedThread{{PID: 7, TID: 9, Comm: comm, WaitNs: waitMs * int64(time.Millisecond)}}})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSchedSamplesAreSpans: the scheduler samples' run-queue waits are sched_delay rows of the
// tables of where the time went, per thread, from source schedstat, and cover time there; they
// are not an engine recording.
func TestSchedSamplesAreSpans(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	writeSched(t, f.dir, "node-0", "apply", 8000, 8100, 15) // 5 intervals of 20 ms, 15 ms waited in each
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Excursions == nil || s.Excursions.Count != 1 {
		t.Fatalf("excursions %+v, want 1", s.Excursions)
	}
	w := s.Excursions.List[0].Where
	if w == nil || len(w.Rows) != 1 {
		t.Fatalf("where %+v, want one row", w)
	}
	r := w.Rows[0]
	if r.Node != "node-0" || r.Thread != "apply" || r.Cause != string(rundir.InsideSchedDelay) || r.Source != rundir.SourceSchedstat || r.Count != 5 || r.TotalMs != 75 {
		t.Errorf("row %+v, want node-0 apply sched_delay from schedstat, 5 spans, 75 ms", r)
	}
	if w.UnexplainedMs != 26 || !slices.Contains(w.Sources, rundir.SourceSchedstat) {
		t.Errorf("unexplained %v ms, sources %v; want 26 ms (101 − 5 × 15), schedstat among them", w.UnexplainedMs, w.Sources)
	}
	if note := sourcesNote(w.Sources, "excursions"); !strings.Contains(note, "No engine recording") {
		t.Errorf("note %q: scheduler samples are not an engine recording", note)
	}
}
