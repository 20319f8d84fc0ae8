// Package gcpause records a Go process's GC stop-the-world pauses as they happen, near-free: after
// each GC cycle (a cleanup on a sentinel object, re-armed every cycle) it reads
// runtime/debug.ReadGCStats, whose pause totals and end times are the runtime's own, and appends
// one span per new cycle to the node's pauses file (rundir.PausesFile).
package gcpause

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// Recorder writes the pauses of every GC cycle after it started.
type Recorder struct {
	w       *rundir.InsideWriter
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
	once    sync.Once

	stats debug.GCStats
	seen  int64 // cycles already written (GCStats.NumGC)
}

// Start opens (appends to) path and records from now on.
func Start(path string) (*Recorder, error) {
	w, err := rundir.CreatePauses(path)
	if err != nil {
		return nil, err
	}
	r := &Recorder{w: w, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	debug.ReadGCStats(&r.stats)
	r.seen = r.stats.NumGC
	r.arm()
	go r.loop()
	return r, nil
}

// sentinel is large enough not to be tiny-allocated, so its cleanup runs after the cycle that
// frees it.
type sentinel struct{ _ [32]byte }

// arm makes the next GC cycle wake the loop. The cleanup only signals: it runs on the runtime's
// cleanup goroutine, which must not wait on a file.
func (r *Recorder) arm() {
	runtime.AddCleanup(new(sentinel), func(r *Recorder) {
		if r.stopped.Load() {
			return
		}
		select {
		case r.kick <- struct{}{}:
		default:
		}
		r.arm()
	}, r)
}

func (r *Recorder) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.kick:
			r.read()
		case <-r.stop:
			r.read()
			return
		}
	}
}

// read writes the cycles since the last read, oldest first. Each cycle's two stop-the-world
// pauses (sweep termination, mark termination) are one total in the runtime's record, ending
// when the second ended: the span is that total, ending there (the first, usually tens of µs,
// fell at the cycle's start).
func (r *Recorder) read() {
	debug.ReadGCStats(&r.stats)
	n := r.stats.NumGC - r.seen
	if n <= 0 {
		return
	}
	// The runtime keeps the last 256 cycles: more between two reads (a cleanup goroutine held
	// up for hundreds of cycles) are gone.
	n = min(n, int64(min(len(r.stats.Pause), len(r.stats.PauseEnd))))
	for i := n - 1; i >= 0; i-- {
		p, end := r.stats.Pause[i], r.stats.PauseEnd[i]
		cycle := r.stats.NumGC - i
		r.w.Write(rundir.InsideSpan{AtNs: end.UnixNano() - int64(p), DurNs: int64(p), Kind: rundir.InsideGCPause, Source: rundir.SourceGoRuntime,
			Detail: fmt.Sprintf("GC %d: stop-the-world %s (sweep and mark termination together)", cycle, fmtDur(p))})
	}
	r.seen = r.stats.NumGC
	_ = r.w.Flush() // one write a cycle: a killed engine loses none already read
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// Stop records the cycles not yet read and closes the file.
func (r *Recorder) Stop() error {
	var err error
	r.once.Do(func() {
		r.stopped.Store(true)
		close(r.stop)
		<-r.done
		err = r.w.Close()
	})
	return err
}
