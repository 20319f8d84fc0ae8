package linkproxy

import (
	"container/heap"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// chunk is one read, due to be written at due.
type chunk struct {
	bp     *[]byte // the pooled buffer
	buf    []byte
	n      int
	due    time.Time
	seq    uint64        // push order: ties go out in the order they came
	out    chan *chunk   // its direction's writer
	queued *atomic.Int64 // its direction's chunks in the queue
}

// deliver hands the chunk to its writer.
func (c *chunk) deliver() {
	c.out <- c
	c.queued.Add(-1)
}

type chunkHeap []*chunk

func (h chunkHeap) Len() int { return len(h) }
func (h chunkHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h chunkHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *chunkHeap) Push(x any)   { *h = append(*h, x.(*chunk)) }
func (h *chunkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}

// Go's timers wake from epoll_wait, whose timeout is whole milliseconds, so a chunk due in
// 300 µs would go out up to a millisecond late (loadgen/precise.go measured the same for the
// probe sender). The queue waits with a Go timer until preciseWindow before the head is due and
// sleeps the rest in one nanosleep, on a thread of its own whose timer slack is 1 ns. Each wake
// costs a late start on a busy machine, so it is not sliced: a chunk of another connection
// pushed meanwhile with an earlier due time (jitter) waits for the head, at most preciseWindow.
const preciseWindow = 2 * time.Millisecond

// The queue's thread wakes from nanosleep, a system call, and needs a P (a Go scheduler slot) to
// hand the chunk on. With every P held (a controller proxying a run's traffic on a loaded host)
// it waits for one, up to the scheduler's 10 ms time slice, so a hop went out up to 10 ms late
// (TestDelayBesideBusyGoroutines; docs/constants.md, "A link's queue and the Go scheduler"). So
// every queue adds a P for as long as it
// runs: its thread mostly sleeps, so the P costs nothing but is free when it wakes. (The engine
// does the same for its UDP receive thread.)
var procsMu sync.Mutex

func addProcs(n int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
}

// timerQueue hands every chunk to its writer at its due time: one goroutine per link serves
// the chunks of all its connections and both directions.
type timerQueue struct {
	mu     sync.Mutex
	h      chunkHeap
	seq    uint64
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}
	closed bool
}

func newTimerQueue() *timerQueue {
	q := &timerQueue{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	addProcs(1)
	go q.run()
	return q
}

func (q *timerQueue) push(c *chunk) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		c.deliver() // the writer drops what it cannot write
		return
	}
	q.seq++
	c.seq = q.seq
	heap.Push(&q.h, c)
	head := q.h[0] == c
	q.mu.Unlock()
	if head {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// close hands every chunk still queued to its writer at once and stops the queue.
func (q *timerQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	close(q.quit)
	<-q.done
}

func (q *timerQueue) run() {
	defer close(q.done)
	defer addProcs(-1)
	// The thread's timer slack changes, so it must end with this goroutine.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: else up to 50 µs late
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		q.mu.Lock()
		if q.closed {
			rest := q.h
			q.h = nil
			q.mu.Unlock()
			for _, c := range rest {
				c.deliver()
			}
			return
		}
		if len(q.h) == 0 {
			q.mu.Unlock()
			select {
			case <-q.wake:
			case <-q.quit:
			}
			continue
		}
		head := q.h[0]
		d := time.Until(head.due)
		if d <= 0 {
			heap.Pop(&q.h)
			q.mu.Unlock()
			head.deliver()
			continue
		}
		q.mu.Unlock()
		if d > preciseWindow {
			timer.Reset(d - preciseWindow)
			select {
			case <-timer.C:
			case <-q.wake:
				timer.Stop()
			case <-q.quit:
				timer.Stop()
			}
			continue
		}
		ts := unix.NsecToTimespec(int64(d))
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	}
}
