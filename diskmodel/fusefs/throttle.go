package fusefs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// bucket is a token bucket kept as a theoretical arrival time (GCRA): each request pushes tat
// on by its cost at the rate, and waits for whatever of tat lies beyond now + burst. Waits are
// computed from tat, not from when a sleeper woke, so a writer that does real work between
// requests still gets the rate on average, and concurrent writers share it.
type bucket struct {
	mu    sync.Mutex
	per   float64 // nanoseconds per unit
	burst time.Duration
	tat   time.Time
}

// schedSlack is how far behind now a bucket's schedule may fall and still be caught up: about
// a timer's late wake-up plus a real write, far below any burst worth asking for.
const schedSlack = 2 * time.Millisecond

// newBucket is nil (no cap) for a zero rate.
func newBucket(rate int64, burst time.Duration) *bucket {
	if rate <= 0 {
		return nil
	}
	return &bucket{per: 1e9 / float64(rate), burst: burst}
}

// reserve takes n units at now and says how long the caller waits before using them.
func (b *bucket) reserve(now time.Time, n int64) time.Duration {
	if b == nil || n <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// A writer that keeps up (tat within schedSlack behind now) keeps its schedule, so a late
	// timer wake-up is not lost on every request; an idle disk starts afresh.
	if now.Sub(b.tat) > schedSlack {
		b.tat = now
	}
	b.tat = b.tat.Add(time.Duration(float64(n) * b.per))
	if d := b.tat.Sub(now) - b.burst; d > 0 {
		return d
	}
	return 0
}

// sleep waits d or until ctx ends (the kernel interrupted the request). The runtime's timers
// wake up to a millisecond late when the process is idle (epoll's millisecond timeout), which
// would add a millisecond to every modelled 4 ms sync; so the timer sleeps all but the last
// tailSleep and nanosleep(2), precise to tens of microseconds, sleeps the rest on this
// goroutine's thread (a FUSE request's own; the scheduler runs others meanwhile).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	deadline := time.Now().Add(d)
	if d > tailSleep {
		t := time.NewTimer(d - tailSleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	for {
		rest := time.Until(deadline)
		if rest <= 0 {
			return nil
		}
		ts := unix.NsecToTimespec(rest.Nanoseconds())
		if err := unix.Nanosleep(&ts, nil); err != nil && err != unix.EINTR {
			return err
		}
	}
}

// tailSleep is the part of a wait slept precisely.
const tailSleep = 1500 * time.Microsecond

// ioRun counts a file's write operations as EBS does: a write of n bytes is ceil(n/size)
// operations, and a write that starts where the previous one ended tops up that one's last
// operation first (sequential I/O merged up to size).
type ioRun struct {
	end, fill int64
}

func (r *ioRun) ops(off, n, size int64) int64 {
	orig := n
	if off == r.end && r.fill > 0 && r.fill < size {
		take := min(size-r.fill, n)
		r.fill += take
		n -= take
	}
	var ops int64
	if n > 0 {
		ops = (n + size - 1) / size
		r.fill = n - (ops-1)*size
	}
	r.end = off + orig
	return ops
}

// Stats are a mounted model's counters since it was mounted.
type Stats struct {
	BytesWritten int64 `json:"bytes_written"`
	WriteOps     int64 `json:"write_ops"` // I/O operations counted against the IOPS cap
	Writes       int64 `json:"writes"`    // FUSE write requests
	Syncs        int64 `json:"syncs"`
	// SyncWait is the time fsyncs were held beyond the real one: for the sync cost and for
	// their bytes to land under the caps (writes themselves are never held).
	SyncWait time.Duration `json:"sync_wait_ns"`
}

type counters struct {
	bytes, ops, writes, syncs, syncWait atomic.Int64
}

func (c *counters) stats() Stats {
	return Stats{BytesWritten: c.bytes.Load(), WriteOps: c.ops.Load(), Writes: c.writes.Load(),
		Syncs: c.syncs.Load(), SyncWait: time.Duration(c.syncWait.Load())}
}
