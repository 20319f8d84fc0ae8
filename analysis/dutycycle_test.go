package analysis

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// TestDutyCycleNamed: an Aeron agent's duty-cycle stall, as the harness writes it to the node's
// pauses file (DutyCycles.java: the span every place the held time can lie, at share held/span),
// names the excursion it covers duty_cycle from aeron_counters with the agent; a threshold count
// alone, a lower bound that covers a tenth of its excursion, is a row of that excursion's table
// but names nothing.
func TestDutyCycleNamed(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000, 15_000)) // [8.000, 8.101] s and [15.000, 15.101] s
	f.run(20_000, "load_end")
	f.status("node-0", engine.Status{Phase: "ready"})
	ms := func(v int64) int64 { return at(v).UnixNano() }
	// Reads at 8.090 and 8.110 s: the service container's max went from 12 ms to 95 ms, so a
	// 95 ms cycle ended between them; it lies in [8.090 − 0.095, 8.110] s, 95 ms of 115.
	// Reads at 15.080 and 15.100 s: one more cycle over the 10 ms threshold, max unchanged: at
	// least 10 ms, in [15.070, 15.100] s.
	lines := fmt.Sprintf(`{"at_ns":%d,"dur_ns":%d,"kind":"duty_cycle","source":"aeron_counters","thread":"service-container","detail":"service-container: a cycle of 95.000 ms (the max, was 12.000 ms), ended in the last 20.000 ms","share":%.6f}
{"at_ns":%d,"dur_ns":%d,"kind":"duty_cycle","source":"aeron_counters","thread":"consensus-module","detail":"consensus-module: 1 cycle(s) over the 10.000 ms threshold, at least 10.000 ms (max unchanged at 95.000 ms), ended in the last 20.000 ms","share":%.6f}
`, ms(7995), ms(8110)-ms(7995), 95.0/115, ms(15_070), ms(15_100)-ms(15_070), 10.0/30)
	if err := os.WriteFile(filepath.Join(f.dir, "node-0", rundir.PausesFile), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Excursions == nil || s.Excursions.Count != 2 {
		t.Fatalf("excursions %+v, want 2", s.Excursions)
	}
	e := s.Excursions.List[0]
	i := slices.IndexFunc(e.Causes, func(c Cause) bool { return c.Kind == CauseKind(rundir.InsideDutyCycle) })
	if i < 0 || len(e.Causes) != 1 {
		t.Fatalf("first excursion: causes %+v, want duty_cycle alone", e.Causes)
	}
	c := e.Causes[0]
	if c.Node != "node-0" || !strings.HasPrefix(c.Evidence, rundir.SourceAeronCounters+":") || !strings.Contains(c.Evidence, "service-container") ||
		!strings.Contains(c.Evidence, "(service-container: a cycle of 95.000 ms") {
		t.Errorf("first excursion's cause %+v: want node-0, from aeron_counters, naming the service container and its cycle", c)
	}
	// 101 ms of the excursion at 95/115 of each moment.
	if want := 101 * 95.0 / 115; e.CoveredMs < want-0.01 || e.CoveredMs > want+0.01 {
		t.Errorf("first excursion covered %v ms, want %.3f", e.CoveredMs, want)
	}
	e = s.Excursions.List[1]
	if len(e.Causes) != 0 {
		t.Errorf("second excursion: causes %+v; a count over the threshold covers 10 ms of 101 and names nothing", e.Causes)
	}
	if e.Where == nil || !slices.ContainsFunc(e.Where.Rows, func(r CauseRow) bool {
		return r.Cause == string(rundir.InsideDutyCycle) && r.Source == rundir.SourceAeronCounters && r.Thread == "consensus-module" && r.TotalMs == 10
	}) {
		t.Errorf("second excursion: where %+v, want a 10 ms duty_cycle row of the consensus module", e.Where)
	}
	if note := sourcesNote(e.Where.Sources, "excursions"); !strings.Contains(note, "No engine recording") {
		t.Errorf("note %q: the duty-cycle counters are always on, not an engine recording", note)
	}
}
