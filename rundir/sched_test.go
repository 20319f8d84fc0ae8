package rundir

import "testing"

// TestSchedSpansCoverTheirInterval: a sample's run-queue wait is a span over its whole interval
// at the share wait/interval (where in the interval it fell is not known), holding the wait.
func TestSchedSpansCoverTheirInterval(t *testing.T) {
	s := SchedSample{AtNs: 1_020_000_000, IntervalNs: 20_000_000, Threads: []SchedThread{
		{PID: 1, TID: 2, Comm: "apply", WaitNs: 5_000_000},
		{PID: 1, TID: 3, Comm: "late", WaitNs: 30_000_000}, // a wait longer than the measured interval is all of it
		{PID: 1, TID: 4, Comm: "none"},
	}}
	sp := s.Spans()
	if len(sp) != 2 {
		t.Fatalf("spans %+v, want 2", sp)
	}
	for i, want := range []struct {
		w    float64
		held int64
	}{{0.25, 5_000_000}, {1, 20_000_000}} {
		x := sp[i]
		if x.AtNs != 1_000_000_000 || x.DurNs != 20_000_000 || x.Weight() != want.w || x.Held() != want.held || x.Kind != InsideSchedDelay || x.Source != SourceSchedstat {
			t.Errorf("span %d %+v (weight %v, held %d), want the interval at %v holding %d", i, x, x.Weight(), x.Held(), want.w, want.held)
		}
	}
	if (InsideSpan{DurNs: 7}).Held() != 7 {
		t.Error("a span without a share holds all of it")
	}
}
