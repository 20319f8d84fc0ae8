package fusefs

import (
	"bytes"
	"context"
	"errors"
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
	mp := t.TempDir()
	d, err := Mount(context.Background(), Options{Backing: backing, Mountpoint: mp, Limits: l})
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

// TestThroughputCap writes 8 MiB at a 16 MB/s cap (best of three probes). The model cannot be
// faster than the cap but for the probe's one subtracted sync and the schedule's slack, and
// must not be slower than the floor a run accepts (diskmodel.Check's 80 %).
func TestThroughputCap(t *testing.T) {
	const bytes = 8 << 20
	l := diskmodel.Limits{Throughput: 16e6}
	d, _ := mountTmpfs(t, l)
	a, err := diskmodel.Probe(context.Background(), d.Dir(), l, diskmodel.ProbeOptions{Bytes: bytes, Block: 1 << 20, Syncs: 3, Repeats: 3})
	if err != nil {
		t.Fatal(err)
	}
	atCap := float64(bytes) / float64(l.Throughput) // seconds
	hi := float64(bytes) / (atCap - (a.SyncLatency + schedSlack).Seconds())
	lo := 0.8 * float64(l.Throughput)
	t.Logf("asked %.1f MB/s, achieved %.2f MB/s (accepted %.2f..%.2f); sync %v", float64(l.Throughput)/1e6, a.ThroughputBps/1e6, lo/1e6, hi/1e6, a.SyncLatency)
	if a.ThroughputBps > hi || a.ThroughputBps < lo {
		t.Fatalf("achieved %.2f MB/s at a %.1f MB/s cap; want %.2f..%.2f", a.ThroughputBps/1e6, float64(l.Throughput)/1e6, lo/1e6, hi/1e6)
	}
	if err := diskmodel.Check(l, a, 0.8); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.BytesWritten < bytes || st.SyncWait < time.Duration(0.8*atCap*float64(time.Second)) {
		t.Fatalf("stats %+v: want ≥ %d bytes written and most of %.2fs held by the cap (in the fsyncs)", st, bytes, atCap)
	}
}

// TestSyncLatency asks 4 ms per sync, then 4 ms + 8 ms per MiB unsynced, and reads both back.
func TestSyncLatency(t *testing.T) {
	for _, l := range []diskmodel.Limits{
		{SyncLatency: 4 * time.Millisecond},
		{SyncLatency: 4 * time.Millisecond, SyncPerMiB: 8 * time.Millisecond},
	} {
		t.Run(strings.ReplaceAll(l.String(), "/", " per "), func(t *testing.T) {
			d, _ := mountTmpfs(t, l)
			a, err := diskmodel.Probe(context.Background(), d.Dir(), l, diskmodel.ProbeOptions{Bytes: 1 << 20, RandomWrites: 16, Syncs: 9, Repeats: 3})
			if err != nil {
				t.Fatal(err)
			}
			want := l.SyncCost(diskmodel.ProbePage)
			t.Logf("asked %v, achieved sync %v, per MiB %v", l, a.SyncLatency, a.SyncPerMiB)
			// Never below what was asked (the model holds at least that), at most a quarter above.
			if a.SyncLatency < want || a.SyncLatency > want*5/4 {
				t.Fatalf("sync after 4 KiB took %v; want %v..%v", a.SyncLatency, want, want*5/4)
			}
			if lo, hi := l.SyncPerMiB*4/5, l.SyncPerMiB*5/4+time.Millisecond; a.SyncPerMiB < lo || a.SyncPerMiB > hi {
				t.Fatalf("per-MiB sync cost read back %v; want %v..%v", a.SyncPerMiB, lo, hi)
			}
			if st := d.Stats(); st.Syncs < 3*18 || st.SyncWait <= 0 {
				t.Fatalf("stats %+v: want the probe's 18+ syncs, held", st)
			}
		})
	}
}

// TestBlockSizeEffect writes the same bytes as 1 MiB and as 16 MiB blocks, each block fsynced,
// at 4 ms per sync: a snapshot written at a file sync level that forces every block. A sync
// costs whichever is longer, its block's transfer at the cap or the 4 ms (the latency overlaps
// the transfer), so at 125 MB/s, where a 1 MiB block's transfer (8.4 ms) already outlasts the
// sync latency, the larger block gains nothing; at 500 MB/s the 1 MiB blocks pay 4 ms each
// and the 16 MiB ones their transfer (33.6 ms), so the gain is the ratio of those times. Each
// time is checked against that arithmetic, and the gain against its ratio. The backing store
// is a tmpfs, so the host's disk does not bound the model; 500 MB/s, not 1,000, because a
// loaded 2-core machine moves 16 MiB through FUSE at 350 MB/s and the write would bound it.
func TestBlockSizeEffect(t *testing.T) {
	const total = 32 << 20
	sync := 4 * time.Millisecond
	for _, bw := range []int64{125e6, 500e6} {
		l := diskmodel.Limits{Throughput: bw, SyncLatency: sync}
		d, _ := mountTmpfs(t, l)
		model := func(block int64) time.Duration {
			perBlock := max(time.Duration(float64(block)/float64(bw)*float64(time.Second)), sync)
			return time.Duration(total/block) * perBlock
		}
		// The best of three: the model never runs faster than its arithmetic, and other load
		// on a shared machine only slows it.
		took := map[int64]time.Duration{}
		for range 3 {
			for _, block := range []int64{1 << 20, 16 << 20} {
				el, err := writeBlocks(d.Dir(), total, block)
				if err != nil {
					t.Fatal(err)
				}
				if took[block] == 0 || el < took[block] {
					took[block] = el
				}
			}
		}
		for _, block := range []int64{1 << 20, 16 << 20} {
			el, want := took[block], model(block)
			t.Logf("%4.0f MB/s, %2d MiB blocks: %v (model: %v)", float64(bw)/1e6, block>>20, el.Round(time.Millisecond), want.Round(time.Millisecond))
			if el < want-schedSlack {
				t.Errorf("%d MiB blocks at %.0f MB/s took %v, below the model's %v", block>>20, float64(bw)/1e6, el, want)
			}
			// The writes themselves (FUSE's round trips, the copies) and the scheduler of a
			// shared machine add to the model's time: a sync's latency starts after its write.
			if el > want*3/2+10*time.Millisecond {
				t.Errorf("%d MiB blocks at %.0f MB/s took %v, over 1.5 × the model's %v + 10 ms", block>>20, float64(bw)/1e6, el, want)
			}
		}
		ratio := float64(took[1<<20]) / float64(took[16<<20])
		modelRatio := float64(model(1<<20)) / float64(model(16<<20))
		t.Logf("%4.0f MB/s: 1 MiB / 16 MiB = %.2f (model %.2f)", float64(bw)/1e6, ratio, modelRatio)
		if modelRatio < 1.1 {
			// Throughput-bound: the larger block must not look like a gain.
			if ratio > 1.2 || ratio < 0.8 {
				t.Errorf("at %.0f MB/s 1 MiB blocks took %.2f× the 16 MiB ones; want about 1 (model %.2f×)", float64(bw)/1e6, ratio, modelRatio)
			}
		} else if lo := 1 + (modelRatio-1)/2; ratio < lo {
			t.Errorf("at %.0f MB/s 1 MiB blocks took %.2f× the 16 MiB ones; want ≥ %.2f× (model %.2f×)", float64(bw)/1e6, ratio, lo, modelRatio)
		}
	}
}

// writeBlocks writes total bytes into a new file as blocks of block bytes, fsyncing each.
func writeBlocks(dir string, total, block int64) (time.Duration, error) {
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
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// TestIOPSCapStarvesThroughput is the provisioning trap: 125 MB/s asked, but at 200 IOPS of
// 256 KiB the volume moves at most 52 MB/s; diskmodel.Check refuses it naming both figures.
func TestIOPSCapStarvesThroughput(t *testing.T) {
	l := diskmodel.Limits{Throughput: 125e6, IOPS: 200}
	d, _ := mountTmpfs(t, l)
	a, err := diskmodel.Probe(context.Background(), d.Dir(), l, diskmodel.ProbeOptions{Bytes: 8 << 20, RandomWrites: 40, Syncs: 3, Repeats: 3})
	if err != nil {
		t.Fatal(err)
	}
	ceiling := float64(l.IOPS * diskmodel.DefaultIOSize)
	t.Logf("throughput %.1f MB/s (IOPS ceiling %.1f MB/s), iops %.0f", a.ThroughputBps/1e6, ceiling/1e6, a.IOPS)
	if a.ThroughputBps > 1.1*ceiling || a.ThroughputBps < 0.8*ceiling {
		t.Fatalf("throughput %.1f MB/s; want about the IOPS ceiling %.1f MB/s", a.ThroughputBps/1e6, ceiling/1e6)
	}
	if a.IOPS > 1.1*float64(l.IOPS) || a.IOPS < 0.8*float64(l.IOPS) {
		t.Fatalf("iops %.0f; want %d within -20 %%..+10 %%", a.IOPS, l.IOPS)
	}
	err = diskmodel.Check(l, a, 0.8)
	if !errors.Is(err, diskmodel.ErrShortfall) || !strings.Contains(err.Error(), "throughput 125.0 MB/s asked") {
		t.Fatalf("diskmodel.Check: %v; want a shortfall naming the asked 125 MB/s", err)
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
