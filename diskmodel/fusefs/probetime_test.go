package fusefs

import (
	"context"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
)

// diskmodel.ProbeTime, which validation bounds a model's probe by and the plan shows,
// is what a real mount of the model makes a probe take at the least: the host's disk and a busy
// machine only add to it, so this lower bound holds at any load.
func TestProbeTakesAtLeastItsArithmetic(t *testing.T) {
	l := diskmodel.Limits{Throughput: 20e6, SyncLatency: 20 * time.Millisecond}
	d, _ := mountT(t, l)
	o := diskmodel.ProbeOptions{Bytes: 2 << 20, Block: 256 << 10, RandomWrites: 32, Syncs: 3}
	a, err := diskmodel.Probe(context.Background(), d.Dir(), l, o)
	if err != nil {
		t.Fatal(err)
	}
	want := diskmodel.ProbeTime(l, o)
	if a.Elapsed < want*98/100 {
		t.Errorf("a probe of %v took %v; the model's arithmetic says at least %v", l, a.Elapsed, want)
	}
	t.Logf("probe of %v: %v, arithmetic %v", l, a.Elapsed, want)
}
