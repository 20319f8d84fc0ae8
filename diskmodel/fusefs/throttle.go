package fusefs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/rig-dev/rig/diskmodel"
	"golang.org/x/sys/unix"
)

// Clock is the model's time: the caps book writes at Now and hold an fsync with Sleep, which
// ends early with ctx's error when the kernel interrupts the request. Mount uses the wall
// clock; the caps' tests a fake one that moves only when the model waits, so they check the
// arithmetic to the nanosecond whatever else the machine is doing.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// wallClock is the real time, slept precisely (sleep).
type wallClock struct{}

func (wallClock) Now() time.Time                                   { return time.Now() }
func (wallClock) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

// newModel is the caps of l on clock c (nil: the wall clock), with nothing written yet.
func newModel(l diskmodel.Limits, c Clock) *model {
	if c == nil {
		c = wallClock{}
	}
	return &model{lim: l, bytes: newBucket(l.Throughput, l.Burst), iops: newBucket(l.IOPS, l.Burst),
		ioSize: l.EffectiveIOSize(), clock: c, dirty: map[*node]struct{}{}}
}

// write books a write of size bytes at off against the caps and makes it (do). Its bytes go
// to the volume's queue now and land when the caps let them; the write itself returns at once,
// as a write into a real volume's page cache does, and the file's next fsync waits for them.
// So the caps bind only what is synced: at sync level 0 a volume's speed is off the writer's
// path, as on EBS.
func (n *node) write(off, size int64, do func() (uint32, syscall.Errno)) (uint32, syscall.Errno) {
	m := n.m
	n.mu.Lock()
	ops := n.run.ops(off, size, m.ioSize)
	n.mu.Unlock()
	now := m.clock.Now()
	landIn := max(m.bytes.reserve(now, size), m.iops.reserve(now, ops))
	written, errno := do()
	m.c.writes.Add(1)
	m.c.ops.Add(ops)
	m.c.bytes.Add(int64(written))
	n.queue(int64(written), now.Add(landIn))
	return written, errno
}

// queue adds bytes to what the file's next fsync flushes, and lands to when it may return.
func (n *node) queue(bytes int64, lands time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unsynced += bytes
	if lands.After(n.lands) {
		n.lands = lands
	}
}

// fsync runs the real fsync (do) and then holds the call until the file's unsynced bytes have
// landed under the caps and the model's sync cost has passed since it began, whichever is
// later: a volume's sync latency overlaps the transfer of a large flush (so a 16 MiB block on a
// 125 MB/s volume costs its transfer, not its transfer plus 4 ms), and the host disk's own sync
// time counts within the modelled one, never on top of it. lf is the file synced (nil in tests).
func (n *node) fsync(ctx context.Context, lf *fs.LoopbackFile, do func() syscall.Errno) syscall.Errno {
	m := n.m
	start := m.clock.Now()
	n.mu.Lock()
	unsynced, lands := n.unsynced, n.lands
	n.unsynced, n.lands = 0, time.Time{}
	mark := n.syncMark(lf)
	n.mu.Unlock()
	if errno := do(); errno != 0 {
		n.queue(unsynced, lands) // not synced after all
		return errno
	}
	n.syncDone(mark)
	m.c.syncs.Add(1)
	done := start.Add(m.lim.SyncCost(unsynced))
	if lands.After(done) {
		done = lands
	}
	from := m.clock.Now()
	rest := done.Sub(from)
	if m.onSync != nil { // as Stats.Syncs: an interrupted hold is reported, and its restart too
		defer func() {
			m.onSync(Sync{Start: start, File: n.Path(nil), Bytes: unsynced, Dur: m.clock.Now().Sub(start)})
		}()
	}
	if rest <= 0 {
		return 0
	}
	if err := m.clock.Sleep(ctx, rest); err != nil {
		// A signal reached the caller and the kernel interrupted the request. The caller's
		// fsync is restarted (by the kernel, or by Go's own retry on EINTR), and that one
		// must not return before this one would have, or a signal would let a sync past the
		// caps: it waits for done as if its bytes were still landing.
		m.c.syncWait.Add(int64(min(max(m.clock.Now().Sub(from), 0), rest)))
		n.queue(0, done)
		return syscall.EINTR
	}
	m.c.syncWait.Add(int64(rest))
	return 0
}

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
	Reads        int64 `json:"reads"`     // FUSE read requests (none with passthrough)
	Syncs        int64 `json:"syncs"`
	// SyncWait is the time fsyncs were held beyond the real one: for the sync cost and for
	// their bytes to land under the caps (writes themselves are never held).
	SyncWait time.Duration `json:"sync_wait_ns"`
}

type counters struct {
	bytes, ops, writes, reads, syncs, syncWait atomic.Int64
}

func (c *counters) stats() Stats {
	return Stats{BytesWritten: c.bytes.Load(), WriteOps: c.ops.Load(), Writes: c.writes.Load(), Reads: c.reads.Load(),
		Syncs: c.syncs.Load(), SyncWait: time.Duration(c.syncWait.Load())}
}
