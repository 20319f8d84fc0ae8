package sample

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/rundir"
)

// TestSchedPlacesWaits: with the kernel's placer, three threads spinning on one CPU have their
// run-queue waits placed in the samples (rundir.SchedSample.Waits), ending inside the time they spun;
// they are most of each thread's schedstat wait and never more, and the thread's readings
// account for them (ExactNs).
func TestSchedPlacesWaits(t *testing.T) {
	tr, err := runq.Open(runq.Options{})
	if errors.Is(err, runq.ErrUnsupported) {
		tools.SkipOrFail(t, "placing run-queue waits needs BPF and root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The threads are started first and followed from the sampler's first listing. Go's own
	// scheduler must not take turns among them (it would park one instead of the kernel queueing
	// it): a processor for each.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	const spinners = 3
	tids := make(chan int, spinners)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var one unix.CPUSet
	one.Set(0)
	for range spinners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				t.Error(err)
			}
			tids <- syscall.Gettid()
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	spin := map[int]bool{}
	for range spinners {
		spin[<-tids] = true
	}
	defer func() { close(stop); wg.Wait() }()
	from := time.Now().UnixNano()
	s, err := NewSched(SchedOptions{PIDs: []int{os.Getpid()}, NoPSI: true, Placer: tr})
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	defer s.Close()
	var samples []rundir.SchedSample
	for range 20 {
		time.Sleep(20 * time.Millisecond)
		samples = append(samples, s.Next())
	}
	to := time.Now().UnixNano()
	placed, exact, total, longest := map[int]int64{}, map[int]int64{}, map[int]int64{}, map[int]int64{}
	for _, smp := range samples {
		for _, w := range smp.Waits {
			// A wait under way as the sampler tracks its thread is reported as it ends, when
			// schedstat counts it too.
			if end := w.FromNs + w.DurNs; end < from || end > to {
				t.Errorf("wait %+v ends outside the test's [%d, %d]", w, from, to)
			}
			placed[w.TID] += w.DurNs
			longest[w.TID] = max(longest[w.TID], w.DurNs)
		}
		for _, th := range smp.Threads {
			exact[th.TID] += th.ExactNs
			total[th.TID] += th.WaitNs
		}
	}
	for tid := range spin {
		t.Logf("spinner %d: waited %.1f ms, %.1f ms of it placed (%.1f ms in readings' exact_ns)", tid, float64(total[tid])/1e6, float64(placed[tid])/1e6, float64(exact[tid])/1e6)
		if total[tid] < int64(50*time.Millisecond) {
			t.Errorf("spinner %d waited only %d ns sharing a CPU with two others for 400 ms", tid, total[tid])
		}
		// The kernel places the wait schedstat counts (the kernel's own run_delay increments; the
		// rest: waits too short to report) and never more; the readings account for every placed
		// wait but one the last reading may not have counted yet (carried to the next).
		if placed[tid] < total[tid]*9/10 || placed[tid] > total[tid]+int64(time.Millisecond) || exact[tid] < placed[tid]-longest[tid] {
			t.Errorf("spinner %d: %d ns placed (the longest %d), %d ns of them in the readings' exact_ns, of %d ns waited", tid, placed[tid], longest[tid], exact[tid], total[tid])
		}
	}
}
