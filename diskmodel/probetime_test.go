package diskmodel

import (
	"testing"
	"time"
)

// The probe's time by a model's own arithmetic, which validation holds to MaxProbePass
// and a run's probe is given up after (ProbeBound): each fsync waits for its bytes to land under
// the caps or for the sync cost, whichever is later; the idle disk's burst runs uncapped once.
func TestProbeTime(t *testing.T) {
	o := ProbeOptions{Bytes: 8 << 20, Block: 1 << 20, RandomWrites: 256, Syncs: 9}
	for _, c := range []struct {
		name string
		l    Limits
		want time.Duration
	}{
		// 9 + 9 + 1 + 1 + 1 fsyncs of 10 s each.
		{"sync latency", Limits{SyncLatency: 10 * time.Second}, 21 * 10 * time.Second},
		// Bytes written: 9 pages, 9 blocks, 8 MiB, 256 pages = 18,911,232 B at 1 MB/s.
		{"throughput", Limits{Throughput: 1e6}, 18911232 * time.Microsecond},
		// Operations: 9 + 9 x 4 (1 MiB in 256 KiB I/O) + 32 + 256 = 333 at 100 IOPS.
		{"iops", Limits{IOPS: 100}, 3330 * time.Millisecond},
		// A block's sync costs 1 ms + 1 MiB x 10 ms, landing takes 1 s at 1 MiB/s: the later counts.
		{"sync overlaps landing", Limits{Throughput: 1 << 20, SyncLatency: time.Millisecond, SyncPerMiB: 10 * time.Millisecond},
			9*time.Duration(float64(time.Second)*4096/(1<<20)) + 9*time.Second + time.Millisecond + 8*time.Second + time.Second},
		// 2 s of the 18.9 s transfer run uncapped.
		{"burst", Limits{Throughput: 1e6, Burst: 2 * time.Second}, 18911232*time.Microsecond - 2*time.Second},
	} {
		if got := ProbeTime(c.l, o); got != c.want {
			t.Errorf("%s: ProbeTime(%v) = %v, want %v", c.name, c.l, got, c.want)
		}
	}
	l := Limits{SyncLatency: time.Second}
	o3 := o
	o3.Repeats = 3
	if got, pass := ProbeTime(l, o3), ProbeTime(l, o); got != 3*pass {
		t.Errorf("3 passes: %v, want 3 x %v", got, pass)
	}
	if got, want := ProbeBound(l, o3), 3*(2*21*time.Second+probeSlack); got != want {
		t.Errorf("ProbeBound = %v, want %v", got, want)
	}
	// The defaults scale the probe to the caps (withDefaults): a common model stays far within
	// the bound validation holds every model to.
	if got := ProbeTime(Limits{Throughput: 125e6, IOPS: 3000, SyncLatency: 4 * time.Millisecond}, ProbeOptions{}); got > MaxProbePass/10 {
		t.Errorf("gp3-like model: a pass of %v", got)
	}
}
