package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/testfs"
	"golang.org/x/sys/unix"
)

// mountT mounts a model for the test on a fresh folder over another on the host's disk; it is
// unmounted (lazily if a failed test left a file open) when the test ends, so no mount
// outlives a test.
func mountT(t testing.TB, l diskmodel.Limits) (*Disk, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly (mount(2)) needs root")
	}
	return mountOver(t, t.TempDir(), l)
}

// mountTmpfs mounts a model over a tmpfs: for the tests of the model's own figures, whose
// backing store should cost nothing next to the model, not a disk other sessions share, where
// one fsync of 16 MiB takes from 40 ms to 300 ms.
func mountTmpfs(t testing.TB, l diskmodel.Limits) (*Disk, string) {
	t.Helper()
	return mountOver(t, testfs.Tmpfs(t, 256<<20), l)
}

func mountOver(t testing.TB, backing string, l diskmodel.Limits) (*Disk, string) {
	t.Helper()
	return mountOpts(t, Options{Backing: backing, Limits: l})
}

// mountOpts mounts a model of o on a fresh mountpoint, over a fresh folder unless o.Backing
// names one, and unmounts it when the test ends.
func mountOpts(t testing.TB, o Options) (*Disk, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly (mount(2)) needs root")
	}
	if o.Backing == "" {
		o.Backing = t.TempDir()
	}
	mp := t.TempDir()
	o.Mountpoint = mp
	backing := o.Backing
	d, err := Mount(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil && !errors.Is(err, ErrDetached) {
			t.Errorf("unmount: %v", err)
		}
		if mounted(mp) {
			t.Errorf("%s still mounted after Close", mp)
		}
	})
	return d, backing
}

// mounted reads the kernel's mount table, not our own idea of it.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func TestPassThroughKeepsFiles(t *testing.T) {
	d, backing := mountT(t, diskmodel.Limits{})
	if !mounted(d.Dir()) {
		t.Fatalf("%s not in /proc/self/mountinfo", d.Dir())
	}
	if err := os.MkdirAll(filepath.Join(d.Dir(), "raft", "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Dir(), "raft", "snapshots", "1.tmp")
	if err := os.WriteFile(p, []byte("state"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, filepath.Join(d.Dir(), "raft", "snapshots", "1")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(backing, "raft", "snapshots", "1"))
	if err != nil || string(got) != "state" {
		t.Fatalf("backing file = %q, %v; want the bytes written through the mount", got, err)
	}
	if st := d.Stats(); st.BytesWritten != 5 || st.Writes != 1 {
		t.Fatalf("stats %+v: want 5 bytes in 1 write", st)
	}
}

// The tests below run the caps on real mounts, against the wall clock. The model's arithmetic
// is caps_test.go's, exact on a fake clock; here each time is bounded from below by that
// arithmetic, which no load can break (FUSE, the host's own fsync and a shared machine's
// scheduler only add time, and a sync never returns before its bytes have gone through the
// caps), and from above only by generous, which a model that works misses however loaded the
// machine: it catches a unit off by a thousand or a hang, not a slow machine. How fast the
// model is on a quiet machine is for `rig bench disk` and BenchmarkPassThrough to measure.

// generous is the most a real mount may take for what the model makes want.
func generous(want time.Duration) time.Duration { return 20*want + 5*time.Second }

// inBounds fails the test when took is below want (less the schedule's slack) or above
// generous(want).
func inBounds(t *testing.T, what string, took, want time.Duration) {
	t.Helper()
	t.Logf("%s: %v (model: %v)", what, took.Round(time.Microsecond), want)
	if took < want-schedSlack {
		t.Errorf("%s took %v, below the model's %v: the caps let it through early", what, took, want)
	}
	if took > generous(want) {
		t.Errorf("%s took %v, over %v (20 × the model's %v + 5 s)", what, took, generous(want), want)
	}
}

// TestThroughputCap writes 8 MiB in 1 MiB blocks at a 16 MB/s cap and fsyncs: the fsync
// returns no sooner than the bytes take at the cap.
func TestThroughputCap(t *testing.T) {
	const total = 8 << 20
	l := diskmodel.Limits{Throughput: 16e6}
	d, _ := mountTmpfs(t, l)
	took, err := writeBlocks(d.Dir(), total, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	inBounds(t, "8 MiB at 16 MB/s", took, seconds(total, l.Throughput))
	// At least one sync: an fsync a signal interrupted is counted again when it is restarted.
	if st := d.Stats(); st.BytesWritten != total || st.Syncs < 1 {
		t.Fatalf("stats %+v: want %d bytes and a sync", st, total)
	}
}

// diskmodel.Probe on a real mount: whatever the load, the probe as a whole cannot have taken
// less than all it wrote takes at the cap, nor any sync less than the latency asked.
func TestProbeOnAMount(t *testing.T) {
	l := diskmodel.Limits{Throughput: 16e6, SyncLatency: 4 * time.Millisecond}
	d, _ := mountTmpfs(t, l)
	a, err := diskmodel.Probe(context.Background(), d.Dir(), l, diskmodel.ProbeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	inBounds(t, fmt.Sprintf("the probe's %d bytes", st.BytesWritten), a.Elapsed, seconds(st.BytesWritten, l.Throughput))
	if a.SyncLatency < l.SyncLatency {
		t.Errorf("the probe read a sync latency of %v; the model holds every sync %v", a.SyncLatency, l.SyncLatency)
	}
	if !(a.ThroughputBps > 0 && a.IOPS > 0) {
		t.Errorf("probe figures %+v: want throughput and IOPS measured", a)
	}
}

// TestSyncLatency asks 4 ms per sync, then 4 ms + 8 ms per MiB unsynced: no fsync returns
// sooner than that after a 4 KiB write, or after a 1 MiB one.
func TestSyncLatency(t *testing.T) {
	for _, l := range []diskmodel.Limits{
		{SyncLatency: 4 * time.Millisecond},
		{SyncLatency: 4 * time.Millisecond, SyncPerMiB: 8 * time.Millisecond},
	} {
		t.Run(strings.ReplaceAll(l.String(), "/", " per "), func(t *testing.T) {
			d, _ := mountTmpfs(t, l)
			for _, block := range []int64{diskmodel.ProbePage, 1 << 20} {
				took, err := writeBlocks(d.Dir(), 5*block, block, true)
				if err != nil {
					t.Fatal(err)
				}
				inBounds(t, fmt.Sprintf("5 × (%d B + fsync)", block), took, 5*l.SyncCost(block))
			}
			if st := d.Stats(); st.Syncs < 10 {
				t.Fatalf("stats %+v: want 10 syncs (more if a signal restarted one)", st)
			}
		})
	}
}

// TestBlockSizeEffect writes 32 MiB as 1 MiB and as 16 MiB blocks, each fsynced, at 4 ms per
// sync and 125 or 500 MB/s: each takes at least what caps_test.go's TestCapsBlockSizeEffect
// computes, whichever is longer of a block's transfer and the latency, per block. The backing
// store is a tmpfs, so the host's disk does not slow the model.
func TestBlockSizeEffect(t *testing.T) {
	const total = 32 << 20
	sync := 4 * time.Millisecond
	for _, bw := range []int64{125e6, 500e6} {
		l := diskmodel.Limits{Throughput: bw, SyncLatency: sync}
		d, _ := mountTmpfs(t, l)
		for _, block := range []int64{1 << 20, 16 << 20} {
			took, err := writeBlocks(d.Dir(), total, block, true)
			if err != nil {
				t.Fatal(err)
			}
			want := time.Duration(total/block) * max(seconds(block, bw), sync)
			inBounds(t, fmt.Sprintf("%d MiB blocks at %.0f MB/s", block>>20, float64(bw)/1e6), took, want)
		}
	}
}

// writeBlocks writes total bytes into a new file as blocks of block bytes, fsyncing each (or
// only the last), and says how long that took.
func writeBlocks(dir string, total, block int64, each bool) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "blocks-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, block)
	diskmodel.FillRandom(buf)
	t0 := time.Now()
	for off := int64(0); off < total; off += block {
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, err
		}
		if each || off+block >= total {
			if err := f.Sync(); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(t0), nil
}

// TestIOPSCapStarvesThroughput is the provisioning trap on a real mount: 125 MB/s asked, but at
// 200 IOPS of 256 KiB, 8 MiB take at least 160 ms (52.4 MB/s), and 40 scattered pages 200 ms;
// the operations are counted as EBS counts them.
func TestIOPSCapStarvesThroughput(t *testing.T) {
	l := diskmodel.Limits{Throughput: 125e6, IOPS: 200}
	d, _ := mountTmpfs(t, l)
	const total = 8 << 20
	took, err := writeBlocks(d.Dir(), total, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	inBounds(t, "8 MiB at 200 IOPS", took, seconds(total/diskmodel.DefaultIOSize, l.IOPS))

	f, err := os.CreateTemp(d.Dir(), "pages-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, diskmodel.ProbePage)
	const pages = 40
	t0 := time.Now()
	for i := range pages { // a gap after each: no write continues another
		if _, err := f.WriteAt(page, int64(i)*2*diskmodel.ProbePage); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	inBounds(t, "40 scattered pages at 200 IOPS", time.Since(t0), seconds(pages, l.IOPS))
	if st := d.Stats(); st.WriteOps != total/diskmodel.DefaultIOSize+pages {
		t.Errorf("counted %d operations; want %d (32 of 256 KiB, 40 pages)", st.WriteOps, total/diskmodel.DefaultIOSize+pages)
	}
}

func TestCloseDetachesABusyMount(t *testing.T) {
	d, _ := mountT(t, diskmodel.Limits{})
	f, err := os.Create(filepath.Join(d.Dir(), "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = d.Close()
	if !errors.Is(err, ErrDetached) {
		t.Fatalf("Close with a file open: %v; want ErrDetached", err)
	}
	if mounted(d.Dir()) {
		t.Fatalf("%s still mounted", d.Dir())
	}
}

func TestContextEndUnmounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx, cancel := context.WithCancel(context.Background())
	mp := t.TempDir()
	d, err := Mount(ctx, Options{Backing: t.TempDir(), Mountpoint: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for mounted(mp) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still mounted 5s after its context ended", mp)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMountRefusesBadInput(t *testing.T) {
	_, err := Mount(context.Background(), Options{Backing: filepath.Join(t.TempDir(), "missing"), Mountpoint: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "backing folder") {
		t.Fatalf("missing backing: %v", err)
	}
	_, err = Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: t.TempDir(), Limits: diskmodel.Limits{IOPS: -1}})
	if !errors.Is(err, diskmodel.ErrLimits) {
		t.Fatalf("negative iops: %v", err)
	}
}

// A write-only file's writes go past the mount's page cache (directIO), each write(2) one
// request to the model of up to maxWrite bytes; a file open for reading keeps its cached pages
// and still reads what a write-only handle wrote since (the kernel drops the pages a direct
// write overlaps).
func TestWriteOnlyFilesSkipThePageCache(t *testing.T) {
	d, backing := mountT(t, diskmodel.Limits{})
	p := filepath.Join(d.Dir(), "f")
	old := bytes.Repeat([]byte("a"), 3<<20)
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadAll(r); err != nil { // the mount's page cache now holds the file
		t.Fatal(err)
	}
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := d.Stats().Writes
	blk := bytes.Repeat([]byte("b"), maxWrite)
	for i := range 2 {
		if _, err := w.WriteAt(blk, int64(i)*maxWrite); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.Stats().Writes - before; n != 2 {
		t.Errorf("two %d-byte writes reached the model as %d requests; want 2", maxWrite, n)
	}
	want := append(bytes.Repeat([]byte("b"), 2<<20), old[2<<20:]...)
	got := make([]byte, len(want))
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("a handle opened before the direct writes reads %q...; want them", got[:8])
	}
	if b, _ := os.ReadFile(filepath.Join(backing, "f")); !bytes.Equal(b, want) {
		t.Errorf("backing file differs from what was written")
	}
}

// The model has no extended attributes: the kernel is told so once (ENOSYS), and then stops
// asking for security.capability before every write.
func TestNoExtendedAttributes(t *testing.T) {
	d, _ := mountT(t, diskmodel.Limits{})
	p := filepath.Join(d.Dir(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Getxattr(p, "user.k", make([]byte, 16)); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("getxattr: %v; want EOPNOTSUPP", err)
	}
	if err := unix.Setxattr(p, "user.k", []byte("v"), 0); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("setxattr: %v; want EOPNOTSUPP", err)
	}
}
