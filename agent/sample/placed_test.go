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
// run-queue waits placed in the samples (rundir.SchedSample.Waits), inside the time they spun;
// each thread's placed waits are part of its sampled total (ExactNs, never more than WaitNs),
// they are most of it, and the spans keep the total: placed waits plus the rest spread add up to
// the samples' waits.
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
	placed, exact, total := map[int]int64{}, map[int]int64{}, map[int]int64{}
	var held, sampled int64
	for _, smp := range samples {
		for _, w := range smp.Waits {
			if w.FromNs < from || w.FromNs+w.DurNs > to {
				t.Errorf("wait %+v outside the test's [%d, %d]", w, from, to)
			}
			placed[w.TID] += w.DurNs
		}
		for _, th := range smp.Threads {
			if th.ExactNs > th.WaitNs || th.ExactNs < 0 {
				t.Errorf("thread %d: %d ns placed of a %d ns wait", th.TID, th.ExactNs, th.WaitNs)
			}
			exact[th.TID] += th.ExactNs
			total[th.TID] += th.WaitNs
			sampled += th.WaitNs - th.ExactNs
		}
		for _, sp := range smp.Spans() {
			if sp.Source == rundir.SourceSchedstat {
				held += sp.Held()
			}
		}
	}
	for tid := range spin {
		t.Logf("spinner %d: waited %.1f ms, %.1f ms of it placed (%.1f ms in readings' exact_ns)", tid, float64(total[tid])/1e6, float64(placed[tid])/1e6, float64(exact[tid])/1e6)
		if total[tid] < int64(50*time.Millisecond) {
			t.Errorf("spinner %d waited only %d ns sharing a CPU with two others for 400 ms", tid, total[tid])
		}
		// The waits too short to report, and those that ended between the drain and the
		// reading (counted at the next reading), are the difference.
		if placed[tid] < total[tid]/2 || exact[tid] > placed[tid] {
			t.Errorf("spinner %d: %d ns placed, %d ns in exact_ns, of %d ns waited", tid, placed[tid], exact[tid], total[tid])
		}
	}
	// A sampled span's share is capped at its interval: up to that, the rest is kept whole.
	if held > sampled || held < sampled*9/10 {
		t.Errorf("the spread spans hold %d ns, the readings' unplaced waits are %d ns", held, sampled)
	}
}
