package diskmodel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"
)

// ProbeOptions size a probe; zero fields get defaults scaled to the asked limits, so a probe
// of a fast model is not over before the cap bites, nor one of a slow model needlessly long.
type ProbeOptions struct {
	Bytes        int64 // sequential phase: bytes written (default: 250 ms at the cap, 8..256 MiB)
	Block        int64 // its write size (default 1 MiB)
	RandomWrites int   // random phase: 4 KiB writes at scattered offsets (default: 250 ms at the cap, 256..4096)
	Syncs        int   // each sync phase: write+fsync rounds (default 9)
	// Repeats runs the whole probe this many times (default 1) and keeps each figure's best:
	// other load on the host can only slow a disk, and a model never runs faster than asked,
	// so the best of a few is what the disk can deliver, less the noise of a shared machine.
	Repeats int
}

// Achieved is what a probe measured.
type Achieved struct {
	// ThroughputBps: the sequential phase's bytes over the time to write and fsync them.
	ThroughputBps float64 `json:"throughput_bps"`
	// IOPS: the random phase's 4 KiB writes over the time to write and fsync them.
	IOPS float64 `json:"iops"`
	// SyncLatency: the median fsync after a 4 KiB write.
	SyncLatency time.Duration `json:"sync_latency_ns"`
	// SyncPerMiB: the median fsync after a Block-sized write less SyncLatency, per MiB.
	SyncPerMiB time.Duration `json:"sync_per_mib_ns"`
	Elapsed    time.Duration `json:"elapsed_ns"` // the whole probe
	// Passthrough: the kernel made the reads and writes on the backing files itself, so the
	// model cost what the bare folder does; its fsyncs still held sync_latency, and the bytes
	// each fsync flushed are the file's growth since its previous one. Set by the mount, not
	// the probe: a kernel without FUSE passthrough gets the model's own path.
	Passthrough bool `json:"passthrough,omitempty"`
}

// Record is a probe beside what was asked, as a run folder keeps it.
type Record struct {
	Asked    Limits    `json:"asked"`
	Achieved Achieved  `json:"achieved"`
	LoadAvg  []float64 `json:"load_avg,omitempty"` // the host's 1, 5, 15 min load average after the probe
}

const (
	// ProbePage is the probe's small write: one page.
	ProbePage = 4096
	phaseTime = 250 * time.Millisecond
)

func (o ProbeOptions) withDefaults(l Limits) ProbeOptions {
	if o.Block <= 0 {
		o.Block = 1 << 20
	}
	if o.Bytes <= 0 {
		o.Bytes = 8 << 20
		if l.Throughput > 0 {
			o.Bytes = min(max(int64(float64(l.Throughput)*phaseTime.Seconds()), 8<<20), 256<<20)
		}
	}
	o.Bytes = max(o.Block, o.Bytes/o.Block*o.Block)
	if o.RandomWrites <= 0 {
		o.RandomWrites = 256
		if l.IOPS > 0 {
			o.RandomWrites = int(min(max(int64(float64(l.IOPS)*phaseTime.Seconds()), 256), 4096))
		}
	}
	if o.Syncs <= 0 {
		o.Syncs = 9
	}
	return o
}

// Probe measures, in a file of its own in dir (removed after), what the disk under dir
// delivers: sequential write throughput, 4 KiB random-write IOPS and fsync latency. Each phase
// ends with an fsync so a real disk is measured, not the page cache; the throughput and IOPS
// phases count that closing fsync less its fixed part (SyncLatency, measured first), which
// would otherwise dominate a short phase on a fast disk. l (the asked limits) only sizes it.
func Probe(ctx context.Context, dir string, l Limits, o ProbeOptions) (Achieved, error) {
	o = o.withDefaults(l)
	start := time.Now()
	var best Achieved
	for i := range max(o.Repeats, 1) {
		a, err := probeOnce(ctx, dir, o)
		if err != nil {
			return Achieved{}, err
		}
		if i == 0 {
			best = a
			continue
		}
		best.ThroughputBps = max(best.ThroughputBps, a.ThroughputBps)
		best.IOPS = max(best.IOPS, a.IOPS)
		best.SyncLatency = min(best.SyncLatency, a.SyncLatency)
		best.SyncPerMiB = min(best.SyncPerMiB, a.SyncPerMiB)
	}
	best.Elapsed = time.Since(start)
	return best, nil
}

func probeOnce(ctx context.Context, dir string, o ProbeOptions) (Achieved, error) {
	start := time.Now()
	f, err := os.CreateTemp(dir, ".rig-disk-probe-")
	if err != nil {
		return Achieved{}, fmt.Errorf("disk probe in %s: %w", dir, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var a Achieved
	fail := func(what string, err error) (Achieved, error) {
		return Achieved{}, fmt.Errorf("disk probe in %s: %s: %w", dir, what, err)
	}

	// Sync latency: appends of one page, then of one block, each fsynced.
	page, block := make([]byte, ProbePage), make([]byte, o.Block)
	FillRandom(page)
	FillRandom(block)
	small, err := syncRounds(ctx, f, page, o.Syncs)
	if err != nil {
		return fail("fsync after 4 KiB", err)
	}
	large, err := syncRounds(ctx, f, block, o.Syncs)
	if err != nil {
		return fail("fsync after a block", err)
	}
	a.SyncLatency = small
	if extra := float64(large - small); extra > 0 && o.Block > ProbePage {
		a.SyncPerMiB = time.Duration(extra * (1 << 20) / float64(o.Block-ProbePage))
	}

	// Throughput: sequential blocks from the start of a fresh file, one fsync at the end.
	if err := f.Truncate(0); err != nil {
		return fail("truncate", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	t0 := time.Now()
	for off := int64(0); off < o.Bytes; off += o.Block {
		if err := ctx.Err(); err != nil {
			return fail("sequential writes", err)
		}
		if _, err := f.WriteAt(block, off); err != nil {
			return fail("sequential writes", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	a.ThroughputBps = float64(o.Bytes) / lessSync(time.Since(t0), a.SyncLatency).Seconds()

	// IOPS: pages at scattered offsets with a gap after each, so no write continues another.
	slots := rand.Perm(o.RandomWrites)
	t0 = time.Now()
	for _, s := range slots {
		if err := ctx.Err(); err != nil {
			return fail("random writes", err)
		}
		if _, err := f.WriteAt(page, o.Bytes+int64(s)*2*ProbePage); err != nil {
			return fail("random writes", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	a.IOPS = float64(o.RandomWrites) / lessSync(time.Since(t0), a.SyncLatency).Seconds()
	a.Elapsed = time.Since(start)
	return a, nil
}

// lessSync takes one fixed sync latency off a phase's time, never below a tenth of it.
func lessSync(d, sync time.Duration) time.Duration {
	return max(d-sync, d/10)
}

// syncRounds appends buf and fsyncs, n times, and returns the median fsync time.
func syncRounds(ctx context.Context, f *os.File, buf []byte, n int) (time.Duration, error) {
	times := make([]time.Duration, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		t := time.Now()
		if err := f.Sync(); err != nil {
			return 0, err
		}
		times = append(times, time.Since(t))
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// FillRandom fills b with random bytes: it keeps a compressing or deduplicating backing store from flattering the figures.
func FillRandom(b []byte) {
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
}

// ErrShortfall is a model that delivers less than a floor of what was asked.
var ErrShortfall = errors.New("disk delivers less than asked")

// Check compares a probe with what was asked and fails, naming both figures, for every capped
// figure achieved below floor (a fraction, e.g. 0.8) of it, or a sync latency above what was
// asked by more than the same margin. Uncapped figures are not checked.
func Check(asked Limits, got Achieved, floor float64) error {
	var short []string
	if asked.Throughput > 0 && got.ThroughputBps < floor*float64(asked.Throughput) {
		short = append(short, fmt.Sprintf("throughput %.1f MB/s asked, %.1f MB/s achieved (%.0f %%)",
			float64(asked.Throughput)/1e6, got.ThroughputBps/1e6, 100*got.ThroughputBps/float64(asked.Throughput)))
	}
	if asked.IOPS > 0 && got.IOPS < floor*float64(asked.IOPS) {
		short = append(short, fmt.Sprintf("iops %d asked, %.0f achieved (%.0f %%)",
			asked.IOPS, got.IOPS, 100*got.IOPS/float64(asked.IOPS)))
	}
	if want := asked.SyncCost(ProbePage); asked.SyncLatency > 0 && float64(got.SyncLatency) > float64(want)/floor {
		short = append(short, fmt.Sprintf("sync latency %v asked, %v achieved", want, got.SyncLatency))
	}
	if len(short) > 0 {
		return fmt.Errorf("%w (floor %.0f %%): %s", ErrShortfall, 100*floor, strings.Join(short, "; "))
	}
	return nil
}
