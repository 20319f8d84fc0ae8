package rundir

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchedSpansCoverTheirInterval: a sample's run-queue wait is a span over its whole interval
// at the share wait/interval (where in the interval it fell is not known), holding the wait.
func TestSchedSpansCoverTheirInterval(t *testing.T) {
	s := SchedSample{AtNs: 1_020_000_000, IntervalNs: 20_000_000, Threads: []SchedThread{
		{PID: 1, TID: 2, Comm: "apply", WaitNs: 5_000_000},
		{PID: 1, TID: 3, Comm: "late", WaitNs: 30_000_000}, // a wait longer than the measured interval is all of it
		{PID: 1, TID: 4, Comm: "none"},
		// read 100 ms ago (idle before): its wait is over its own interval
		{PID: 1, TID: 5, Comm: "woke", WaitNs: 25_000_000, IntervalNs: 100_000_000},
	}}
	sp := s.Spans()
	if len(sp) != 3 {
		t.Fatalf("spans %+v, want 3", sp)
	}
	for i, want := range []struct {
		at, dur int64
		w       float64
		held    int64
	}{{1_000_000_000, 20_000_000, 0.25, 5_000_000}, {1_000_000_000, 20_000_000, 1, 20_000_000}, {920_000_000, 100_000_000, 0.25, 25_000_000}} {
		x := sp[i]
		if x.AtNs != want.at || x.DurNs != want.dur || x.Weight() != want.w || x.Held() != want.held || x.Kind != InsideSchedDelay || x.Source != SourceSchedstat {
			t.Errorf("span %d %+v (weight %v, held %d), want [%d, +%d] at %v holding %d", i, x, x.Weight(), x.Held(), want.at, want.dur, want.w, want.held)
		}
	}
	if (InsideSpan{DurNs: 7}).Held() != 7 {
		t.Error("a span without a share holds all of it")
	}
}

// TestSchedPlacedWaitsAreSpansOfTheirOwn: a wait the kernel placed is a span of its own where
// it was, holding all of it, and only the rest of its thread's wait is spread over the interval.
func TestSchedPlacedWaitsAreSpansOfTheirOwn(t *testing.T) {
	s := SchedSample{AtNs: 1_020_000_000, IntervalNs: 20_000_000,
		Threads: []SchedThread{
			{PID: 1, TID: 2, Comm: "apply", WaitNs: 9_000_000, ExactNs: 6_000_000},
			{PID: 1, TID: 3, Comm: "all", WaitNs: 4_000_000, ExactNs: 4_000_000}, // nothing left to spread
		},
		Waits: []SchedWait{{TID: 2, Comm: "apply", FromNs: 1_005_000_000, DurNs: 6_000_000}, {TID: 3, Comm: "all", FromNs: 1_012_000_000, DurNs: 4_000_000}}}
	sp := s.Spans()
	if len(sp) != 3 {
		t.Fatalf("spans %+v, want the two placed waits and apply's rest", sp)
	}
	for i, want := range []struct {
		at, dur, held int64
		src, thread   string
	}{{1_005_000_000, 6_000_000, 6_000_000, SourceSchedSwitch, "apply"}, {1_012_000_000, 4_000_000, 4_000_000, SourceSchedSwitch, "all"}, {1_000_000_000, 20_000_000, 3_000_000, SourceSchedstat, "apply"}} {
		x := sp[i]
		if x.AtNs != want.at || x.DurNs != want.dur || x.Held() != want.held || x.Source != want.src || x.Thread != want.thread || x.Kind != InsideSchedDelay {
			t.Errorf("span %d %+v (held %d), want %s's [%d, +%d] from %s holding %d", i, x, x.Held(), want.thread, want.at, want.dur, want.src, want.held)
		}
	}
}

// TestSchedAppendJSONIsEncodingJSON: the agent's hand-written line is byte for byte what
// encoding/json writes, so the file's format has one definition (the struct tags) and its readers
// see nothing new: every optional field absent and present, names that need escaping, extremes.
func TestSchedAppendJSONIsEncodingJSON(t *testing.T) {
	names := []string{"apply", "", "java", `a"b`, `back\slash`, "tab\tnl\n", "\x01\x1f", "<&>", "ünï", "\xff\xfe", "\u2028", "del\x7f", "C2 CompilerThre"}
	samples := []SchedSample{
		{},
		{AtNs: math.MaxInt64, IntervalNs: math.MinInt64},
		{AtNs: 1_796_634_556_917_563_162, IntervalNs: 21_989_296, Threads: []SchedThread{}},
		{AtNs: 1, IntervalNs: 2, PSI: &SchedPSI{}},
		{AtNs: 1, IntervalNs: 2, PSI: &SchedPSI{CPUSomeUs: 12195, CPUFullUs: 1, IOSomeUs: 642, IOFullUs: 175, MemSomeUs: math.MaxUint64, MemFullUs: 3}},
	}
	var threads []SchedThread
	for i, n := range names {
		threads = append(threads, SchedThread{PID: 31628, TID: 31628 + i, Comm: n, WaitNs: int64(i) * 1_000_003})
	}
	threads = append(threads, SchedThread{PID: -1, TID: math.MaxInt32, WaitNs: math.MinInt64}, SchedThread{PID: 7, TID: 8, Comm: "idle", WaitNs: 3, IntervalNs: 100_123_456})
	threads = append(threads, SchedThread{PID: 7, TID: 9, Comm: "placed", WaitNs: 900, ExactNs: 700})
	var waits []SchedWait
	for i, n := range names {
		waits = append(waits, SchedWait{TID: 40 + i, Comm: n, FromNs: int64(i) * 7_000_001, DurNs: int64(i) * 300_007})
	}
	waits = append(waits, SchedWait{TID: math.MaxInt32, FromNs: math.MinInt64, DurNs: math.MaxInt64})
	samples = append(samples, SchedSample{AtNs: 5, IntervalNs: 20_000_000, Threads: threads, PSI: &SchedPSI{IOSomeUs: 9}},
		SchedSample{AtNs: 6, IntervalNs: 20_000_000, Waits: waits})
	// Every part at once, in ASCII: the field order, and a line that allocates nothing.
	ascii := SchedSample{AtNs: 7, IntervalNs: 20_000_000, PSI: &SchedPSI{CPUSomeUs: 3, IOFullUs: 1},
		Threads: []SchedThread{{PID: 7, TID: 8, Comm: "apply", WaitNs: 9_000_000, ExactNs: 6_000_000, IntervalNs: 100_000_000}, {PID: 7, TID: 9, Comm: "C2 CompilerThre", WaitNs: 1}},
		Waits:   []SchedWait{{TID: 8, Comm: "apply", FromNs: 3, DurNs: 6_000_000}}}
	samples = append(samples, ascii)
	for _, s := range samples {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Errorf("AppendJSON\n got %s\nwant x%s", got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ascii.AppendJSON(make([]byte, 0, 1024)) }); n > 1 {
		t.Errorf("%v allocations a sample of ASCII names, want only the buffer's", n)
	}
}

// TestSchedWaitsReadBackNamed: a placed wait is written as [tid, from_ns, dur_ns], without its
// thread's name, and read back named from its thread's next reading (the thread a TID names may
// change within a file), else its last before; an older file's waits, objects with their names,
// read as they were.
func TestSchedWaitsReadBackNamed(t *testing.T) {
	dir := t.TempDir()
	samples := []SchedSample{
		{AtNs: 100, IntervalNs: 100, Threads: []SchedThread{{PID: 1, TID: 7, Comm: "old", WaitNs: 1}}},
		{AtNs: 200, IntervalNs: 100, Waits: []SchedWait{{TID: 7, FromNs: 150, DurNs: 20}}},
		{AtNs: 300, IntervalNs: 100, Threads: []SchedThread{{PID: 1, TID: 7, Comm: "new", WaitNs: 20, ExactNs: 20}}},
		{AtNs: 400, IntervalNs: 100, Waits: []SchedWait{{TID: 7, FromNs: 350, DurNs: 30}, {TID: 9, FromNs: 360, DurNs: 40}}},
	}
	var b []byte
	for i := range samples {
		b = append(samples[i].AppendJSON(b), '\n')
	}
	if want := `"waits":[[7,150,20]]`; !strings.Contains(string(b), want) {
		t.Fatalf("file %s: want a wait written as %s", b, want)
	}
	b = append(b, `{"at_ns":500,"interval_ns":100,"waits":[{"tid":9,"comm":"before","from_ns":450,"dur_ns":50}]}`+"\n"...)
	if err := os.MkdirAll(filepath.Join(dir, "n", SchedDir), 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join("n", SchedDir, "x"+SchedExt)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Folder{Dir: dir}.Sched(name)
	if err != nil || len(got) != 5 {
		t.Fatalf("%d samples, %v", len(got), err)
	}
	for _, c := range []struct {
		w    SchedWait
		want SchedWait
	}{
		{got[1].Waits[0], SchedWait{TID: 7, Comm: "new", FromNs: 150, DurNs: 20}},
		{got[3].Waits[0], SchedWait{TID: 7, Comm: "new", FromNs: 350, DurNs: 30}}, // no reading after: the last before
		{got[3].Waits[1], SchedWait{TID: 9, FromNs: 360, DurNs: 40}},              // never read: no name
		{got[4].Waits[0], SchedWait{TID: 9, Comm: "before", FromNs: 450, DurNs: 50}},
	} {
		if c.w != c.want {
			t.Errorf("read %+v, want %+v", c.w, c.want)
		}
	}
	var w SchedWait
	if err := json.Unmarshal([]byte(`[1,2]`), &w); err == nil {
		t.Errorf("a wait of two numbers read as %+v", w)
	}
}
