package fusefs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
)

// The caps' arithmetic on a fake clock: time moves only when the model holds an fsync (or the
// test says the writer spent some), so each figure is checked exactly, at any load. What the
// real mount adds (FUSE round trips, the host's own fsync, the scheduler) is the real-mount
// tests' part (mount_test.go), bounded from below only by this arithmetic; speed figures are
// `rig bench disk`'s.

// fakeClock moves when the model sleeps on it or the test advances it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	// interrupt, when set, interrupts the next sleep after that much of it.
	interrupt time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.interrupt > 0 {
		c.now = c.now.Add(min(c.interrupt, d))
		c.interrupt = 0
		return context.Canceled
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// caps is a model on a fake clock, with files that write and sync nothing real.
type caps struct {
	t   *testing.T
	m   *model
	clk *fakeClock
}

func newCaps(t *testing.T, l diskmodel.Limits) *caps {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	return &caps{t: t, m: newModel(l, clk), clk: clk}
}

func (c *caps) file() *node { return &node{m: c.m} }

func (c *caps) write(n *node, off, size int64) {
	c.t.Helper()
	got, errno := n.write(off, size, func() (uint32, syscall.Errno) { return uint32(size), 0 })
	if errno != 0 || int64(got) != size {
		c.t.Fatalf("write of %d at %d: %d, %v", size, off, got, errno)
	}
}

// fsync syncs n and says how long the model held it; real is the host's own fsync time.
func (c *caps) fsync(n *node, real time.Duration) time.Duration {
	c.t.Helper()
	t0 := c.clk.Now()
	if errno := n.fsync(context.Background(), nil, func() syscall.Errno { c.clk.advance(real); return 0 }); errno != 0 {
		c.t.Fatalf("fsync: %v", errno)
	}
	return c.clk.Now().Sub(t0)
}

// seconds is the exact time of n units at rate per second, as the bucket computes it.
func seconds(n int64, rate int64) time.Duration {
	return time.Duration(float64(n) * (1e9 / float64(rate)))
}

// 8 MiB in 1 MiB writes at a 16 MB/s cap, then one fsync: the writes return at once, and the
// fsync holds until the last byte has gone through the cap, to the nanosecond, whether the
// writer takes no time or keeps up with the cap; a writer slower than the cap is not held.
func TestCapsThroughput(t *testing.T) {
	const total, block = 8 << 20, 1 << 20
	l := diskmodel.Limits{Throughput: 16e6}
	for _, writerTakes := range []time.Duration{0, time.Millisecond, 100 * time.Millisecond} {
		t.Run(fmt.Sprint("writer ", writerTakes), func(t *testing.T) {
			c := newCaps(t, l)
			f := c.file()
			t0 := c.clk.Now()
			for off := int64(0); off < total; off += block {
				c.write(f, off, block)
				c.clk.advance(writerTakes)
			}
			held := c.fsync(f, 0)
			elapsed := c.clk.Now().Sub(t0)
			atCap := seconds(total, l.Throughput) // 524.288 ms
			// Slower than the cap, each write has landed before the writer is done with the
			// next (the last before the fsync, as the writer spends its time after it too).
			want := max(atCap, 8*writerTakes)
			if elapsed != want {
				t.Fatalf("8 MiB at 16 MB/s took %v (fsync held %v); want %v", elapsed, held, want)
			}
			st := c.m.c.stats()
			if st.BytesWritten != total || st.Writes != 8 || st.Syncs != 1 || st.SyncWait != held {
				t.Fatalf("stats %+v; want %d bytes in 8 writes, 1 sync held %v", st, total, held)
			}
			a := diskmodel.Achieved{ThroughputBps: float64(total) / elapsed.Seconds()}
			if writerTakes == 0 {
				if a.ThroughputBps != float64(l.Throughput) {
					t.Fatalf("achieved %.6f MB/s; want exactly the cap", a.ThroughputBps/1e6)
				}
				if err := diskmodel.Check(l, a, 0.8); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// The provisioning trap: 125 MB/s asked, but at 200 IOPS of 256 KiB the volume moves at most
// 52.4 MB/s. Sequential 1 MiB writes count 4 operations each; scattered 4 KiB writes one each;
// diskmodel.Check refuses the figures, naming the asked throughput.
func TestCapsIOPSStarvesThroughput(t *testing.T) {
	l := diskmodel.Limits{Throughput: 125e6, IOPS: 200}
	c := newCaps(t, l)
	f := c.file()
	const total, block = 8 << 20, 1 << 20
	t0 := c.clk.Now()
	for off := int64(0); off < total; off += block {
		c.write(f, off, block)
	}
	c.fsync(f, 0)
	seq := c.clk.Now().Sub(t0)
	if want := seconds(total/diskmodel.DefaultIOSize, l.IOPS); seq != want {
		t.Fatalf("8 MiB sequential at 200 IOPS took %v; want %v (32 operations)", seq, want)
	}
	var a diskmodel.Achieved
	a.ThroughputBps = float64(total) / seq.Seconds()
	if ceiling := float64(l.IOPS * diskmodel.DefaultIOSize); a.ThroughputBps != ceiling {
		t.Fatalf("throughput %.4f MB/s; want the IOPS ceiling %.4f MB/s", a.ThroughputBps/1e6, ceiling/1e6)
	}

	const pages = 40
	t0 = c.clk.Now()
	for _, s := range rand.Perm(pages) { // scattered, a gap after each: no write continues another
		c.write(f, total+int64(s)*2*diskmodel.ProbePage, diskmodel.ProbePage)
	}
	c.fsync(f, 0)
	random := c.clk.Now().Sub(t0)
	if want := seconds(pages, l.IOPS); random != want {
		t.Fatalf("%d scattered pages took %v; want %v", pages, random, want)
	}
	a.IOPS = pages / random.Seconds()
	if a.IOPS != float64(l.IOPS) {
		t.Fatalf("iops %.3f; want %d", a.IOPS, l.IOPS)
	}
	if st := c.m.c.stats(); st.WriteOps != 32+pages {
		t.Fatalf("counted %d operations; want %d", st.WriteOps, 32+pages)
	}
	err := diskmodel.Check(l, a, 0.8)
	if !errors.Is(err, diskmodel.ErrShortfall) || !strings.Contains(err.Error(), "throughput 125.0 MB/s asked, 52.4 MB/s achieved") {
		t.Fatalf("diskmodel.Check: %v; want a shortfall naming 125 MB/s asked and 52.4 achieved", err)
	}
}

// A sync costs its latency plus its per-MiB part for the bytes the file had not synced, counted
// from when it began: the host's own fsync runs within it, never on top of it.
func TestCapsSyncCost(t *testing.T) {
	l := diskmodel.Limits{SyncLatency: 4 * time.Millisecond, SyncPerMiB: 8 * time.Millisecond}
	c := newCaps(t, l)
	f := c.file()
	if held := c.fsync(f, 0); held != 4*time.Millisecond {
		t.Errorf("fsync of a clean file held %v; want the 4ms latency", held)
	}
	c.write(f, 0, diskmodel.ProbePage)
	if held, want := c.fsync(f, 0), 4*time.Millisecond+8*time.Millisecond*diskmodel.ProbePage/(1<<20); held != want {
		t.Errorf("fsync after 4 KiB held %v; want %v", held, want)
	}
	c.write(f, diskmodel.ProbePage, 1<<20)
	if held := c.fsync(f, 0); held != 12*time.Millisecond {
		t.Errorf("fsync after 1 MiB held %v; want 12ms", held)
	}
	// The host's fsync took 3 ms of the 4: the model adds 1 ms. It took 6: the model adds none.
	for _, real := range []time.Duration{3 * time.Millisecond, 6 * time.Millisecond} {
		before := c.m.c.stats().SyncWait
		if took := c.fsync(f, real); took != max(real, 4*time.Millisecond) {
			t.Errorf("a host fsync of %v made an fsync of %v; want %v", real, took, max(real, 4*time.Millisecond))
		}
		if wait := c.m.c.stats().SyncWait - before; wait != max(4*time.Millisecond-real, 0) {
			t.Errorf("a host fsync of %v: SyncWait grew %v; want %v", real, wait, max(4*time.Millisecond-real, 0))
		}
	}
}

// Each block written and fsynced, 32 MiB in all, at 4 ms per sync: a sync costs whichever is
// longer, its block's transfer at the cap or the 4 ms (the latency overlaps the transfer). At
// 125 MB/s a 1 MiB block's transfer (8.4 ms) already outlasts the latency, so larger blocks
// gain nothing; at 500 MB/s 1 MiB blocks pay 4 ms each and 16 MiB ones their transfer (33.6
// ms), so the gain is 1.91×.
func TestCapsBlockSizeEffect(t *testing.T) {
	const total = 32 << 20
	sync := 4 * time.Millisecond
	for _, c := range []struct {
		bw    int64
		ratio float64 // 1 MiB blocks' time over 16 MiB blocks'
	}{{125e6, 1}, {500e6, 128.0 / (2 * 33.554432)}} {
		l := diskmodel.Limits{Throughput: c.bw, SyncLatency: sync}
		took := map[int64]time.Duration{}
		for _, block := range []int64{1 << 20, 16 << 20} {
			cp := newCaps(t, l)
			f := cp.file()
			t0 := cp.clk.Now()
			for off := int64(0); off < total; off += block {
				cp.write(f, off, block)
				cp.fsync(f, 0)
			}
			took[block] = cp.clk.Now().Sub(t0)
			want := time.Duration(total/block) * max(seconds(block, c.bw), sync)
			if took[block] != want {
				t.Errorf("%d MiB blocks at %.0f MB/s took %v; want %v", block>>20, float64(c.bw)/1e6, took[block], want)
			}
		}
		ratio := float64(took[1<<20]) / float64(took[16<<20])
		if diff := ratio - c.ratio; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("at %.0f MB/s 1 MiB blocks took %.4f× the 16 MiB ones; want %.4f×", float64(c.bw)/1e6, ratio, c.ratio)
		}
	}
}

// Burst lets an idle disk take burst × rate at once; the byte past it waits its share.
func TestCapsBurst(t *testing.T) {
	l := diskmodel.Limits{Throughput: 1e6, Burst: 10 * time.Millisecond} // 10 kB at once
	c := newCaps(t, l)
	f := c.file()
	c.write(f, 0, 10_000)
	if held := c.fsync(f, 0); held != 0 {
		t.Fatalf("fsync after a burst's worth held %v; want 0", held)
	}
	c.clk.advance(time.Second) // idle: the schedule starts afresh
	c.write(f, 0, 11_000)
	if held := c.fsync(f, 0); held != time.Millisecond {
		t.Fatalf("fsync after 1 kB past the burst held %v; want 1ms", held)
	}
}

// Writers to different files share the caps: eight 1 MiB writes at once, on eight goroutines,
// land one after another whatever their order, and the last fsync returns when all eight have
// gone through. Under -race this is also the check that the caps' state is locked.
func TestCapsSharedByConcurrentWriters(t *testing.T) {
	l := diskmodel.Limits{Throughput: 100e6, IOPS: 10_000} // bytes bind: 10.5 ms a write, its 4 operations 0.4 ms
	c := newCaps(t, l)
	files := make([]*node, 8)
	var wg sync.WaitGroup
	for i := range files {
		files[i] = c.file()
		wg.Go(func() {
			files[i].write(0, 1<<20, func() (uint32, syscall.Errno) { return 1 << 20, 0 })
		})
	}
	wg.Wait()
	t0 := c.clk.Now()
	var lands []time.Duration
	for _, f := range files {
		f.mu.Lock()
		lands = append(lands, f.lands.Sub(t0))
		f.mu.Unlock()
	}
	slices.Sort(lands)
	perWrite := seconds(1<<20, l.Throughput)
	for i, d := range lands {
		if want := time.Duration(i+1) * perWrite; d != want {
			t.Fatalf("landing times %v; want multiples of %v", lands, perWrite)
		}
	}
	for _, f := range files {
		c.fsync(f, 0)
	}
	if got := c.clk.Now().Sub(t0); got != 8*perWrite {
		t.Fatalf("all eight synced after %v; want %v", got, 8*perWrite)
	}
}

// An fsync the kernel interrupts (a signal reached the writer) is restarted, and the restarted
// one still waits for the bytes the first was holding for: a signal must not let a sync past
// the caps. (Go retries an fsync that failed with EINTR, and the kernel restarts one a
// signal handler interrupted: before, the restart found nothing unsynced and returned at once.)
func TestCapsInterruptedFsyncKeepsItsWait(t *testing.T) {
	l := diskmodel.Limits{Throughput: 1e6, SyncLatency: 4 * time.Millisecond}
	c := newCaps(t, l)
	f := c.file()
	t0 := c.clk.Now()
	c.write(f, 0, 100_000) // lands after 100 ms
	c.clk.interrupt = 30 * time.Millisecond
	if errno := f.fsync(context.Background(), nil, func() syscall.Errno { return 0 }); errno != syscall.EINTR {
		t.Fatalf("interrupted fsync: %v; want EINTR", errno)
	}
	c.fsync(f, 0) // the restart
	if got := c.clk.Now().Sub(t0); got != 100*time.Millisecond {
		t.Fatalf("interrupted and restarted fsync returned after %v; want the 100ms the bytes take", got)
	}
	if st := c.m.c.stats(); st.SyncWait != 100*time.Millisecond {
		t.Fatalf("SyncWait %v; want 100ms, counted once", st.SyncWait)
	}
}

// A failed real fsync synced nothing: the next one still waits for the bytes.
func TestCapsFailedFsyncRequeues(t *testing.T) {
	l := diskmodel.Limits{Throughput: 1e6}
	c := newCaps(t, l)
	f := c.file()
	t0 := c.clk.Now()
	c.write(f, 0, 50_000)
	if errno := f.fsync(context.Background(), nil, func() syscall.Errno { return syscall.EIO }); errno != syscall.EIO {
		t.Fatalf("fsync: %v; want the host's EIO", errno)
	}
	if c.clk.Now() != t0 {
		t.Fatal("a failed fsync was held")
	}
	c.fsync(f, 0)
	if got := c.clk.Now().Sub(t0); got != 50*time.Millisecond {
		t.Fatalf("fsync after a failed one returned after %v; want 50ms", got)
	}
}

// Eight goroutines take 1000 B each from a 1 MB/s bucket at one instant: whatever their order,
// they wait 1, 2, ... 8 ms.
func TestBucketSharedAtOneInstant(t *testing.T) {
	b := newBucket(1_000_000, 0)
	t0 := time.Unix(1000, 0)
	waits := make([]time.Duration, 8)
	var wg sync.WaitGroup
	for i := range waits {
		wg.Go(func() { waits[i] = b.reserve(t0, 1000) })
	}
	wg.Wait()
	slices.Sort(waits)
	for i, w := range waits {
		if w != time.Duration(i+1)*time.Millisecond {
			t.Fatalf("waits %v; want 1ms to 8ms", waits)
		}
	}
}
