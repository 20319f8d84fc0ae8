package fusefs

import (
	"testing"
	"time"
)

func TestBucketPacesAndBursts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(1_000_000, 0) // 1 MB/s: 1 µs per byte
	if d := b.reserve(t0, 1000); d != time.Millisecond {
		t.Fatalf("first 1000 B at 1 MB/s wait %v, want 1ms", d)
	}
	// A second request at the same instant queues behind the first.
	if d := b.reserve(t0, 1000); d != 2*time.Millisecond {
		t.Fatalf("second wait %v, want 2ms", d)
	}
	// Long idle: the schedule starts afresh, no credit beyond burst (0).
	if d := b.reserve(t0.Add(time.Second), 500); d != 500*time.Microsecond {
		t.Fatalf("after idle wait %v, want 500µs", d)
	}

	bb := newBucket(1_000_000, 10*time.Millisecond) // may run 10 ms ahead: 10 kB at once
	for i := range 10 {
		if d := bb.reserve(t0, 1000); d != 0 {
			t.Fatalf("burst write %d waited %v", i, d)
		}
	}
	if d := bb.reserve(t0, 1000); d != time.Millisecond {
		t.Fatalf("write past the burst waited %v, want 1ms", d)
	}
	if newBucket(0, time.Second).reserve(t0, 1<<30) != 0 {
		t.Fatal("a zero rate must not cap")
	}
}

func TestIORunMergesSequentialWrites(t *testing.T) {
	const size = 256 << 10
	var r ioRun
	cases := []struct {
		off, n, want int64
	}{
		{0, 4096, 1},                   // opens an operation
		{4096, 4096, 0},                // continues it
		{8192, size - 8192, 0},         // fills it exactly
		{size, 1 << 20, 4},             // four new full ones
		{size + 1<<20, 1, 1},           // the previous ended full: a new one
		{10 << 20, 4096, 1},            // elsewhere: a new one
		{10<<20 + 4096, 2 * size, 2},   // tops up (size-4096), then ceil((2size-(size-4096))/size) = 2
		{0, 0, 0},                      // nothing written, nothing counted
		{20 << 20, 3*size + 1, 4},      // partial last operation
		{20<<20 + 3*size + 1, size, 1}, // tops up the partial one, one more for the rest
	}
	for i, c := range cases {
		if got := r.ops(c.off, c.n, size); got != c.want {
			t.Errorf("case %d: write of %d at %d counted %d operations, want %d", i, c.n, c.off, got, c.want)
		}
	}
}
