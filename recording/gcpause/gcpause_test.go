package gcpause

import (
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// TestRecordsEachCycle: three collections after Start are three gc_pause spans from go_runtime,
// oldest first, inside the time they ran, whose pauses add up to the runtime's own total.
func TestRecordsEachCycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), rundir.PausesFile)
	r, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond) // the cleanup runs after the cycle, on its own goroutine
	}
	t1 := time.Now()
	runtime.ReadMemStats(&after)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	ss, err := rundir.ReadInside(path)
	if err != nil {
		t.Fatal(err)
	}
	// ReadMemStats stops the world itself, but runs no cycle: the spans are the cycles between.
	if want := int(after.NumGC - before.NumGC); len(ss) != want || want < 3 {
		t.Fatalf("%d spans, want %d (the cycles run): %+v", len(ss), want, ss)
	}
	var sum int64
	for i, s := range ss {
		if s.Kind != rundir.InsideGCPause || s.Source != rundir.SourceGoRuntime || s.DurNs <= 0 || s.Detail == "" {
			t.Errorf("span %d %+v", i, s)
		}
		if s.AtNs < t0.UnixNano() || s.AtNs+s.DurNs > t1.UnixNano() {
			t.Errorf("span %d at %v+%v, outside the collections' time [%v, %v]", i, time.Unix(0, s.AtNs), time.Duration(s.DurNs), t0, t1)
		}
		if i > 0 && s.AtNs < ss[i-1].AtNs {
			t.Errorf("span %d before span %d", i, i-1)
		}
		sum += s.DurNs
	}
	if total := int64(after.PauseTotalNs - before.PauseTotalNs); sum != total {
		t.Errorf("pauses sum to %v, the runtime's total is %v", time.Duration(sum), time.Duration(total))
	}
}

// BenchmarkCycle is the recorder's work for one GC cycle: the runtime's stats read and one line
// written (docs/results.md gives it per node with the engine's cycles per second).
func BenchmarkCycle(b *testing.B) {
	r, err := Start(filepath.Join(b.TempDir(), rundir.PausesFile))
	if err != nil {
		b.Fatal(err)
	}
	r.stopped.Store(true) // the benchmark calls read itself
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_THREAD, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	runtime.LockOSThread() // RUSAGE_THREAD then measures this thread's work alone
	defer runtime.UnlockOSThread()
	c0 := cpu()
	for b.Loop() {
		r.seen = r.stats.NumGC - 1
		r.read()
	}
	b.ReportMetric(float64(cpu()-c0)/float64(b.N), "cpu-ns/op")
	b.StopTimer()
	r.Stop()
}
