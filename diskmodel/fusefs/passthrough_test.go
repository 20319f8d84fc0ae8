package fusefs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/testfs"
)

// With passthrough the kernel reads and writes the backing files itself: no read or write
// request reaches the model (without it, every one does), what was written is in the backing
// file and reads back through another handle, and every fsync still reaches the model, is held
// for the sync latency and reported with the bytes the file grew by.
func TestPassthroughServesReadsAndWritesInTheKernel(t *testing.T) {
	for _, pt := range []bool{false, true} {
		t.Run(map[bool]string{false: "model", true: "passthrough"}[pt], func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []Sync
			)
			l := diskmodel.Limits{SyncLatency: 2 * time.Millisecond}
			d, backing := mountOpts(t, Options{Backing: testfs.Tmpfs(t, 64<<20), Limits: l, Passthrough: pt,
				OnSync: func(s Sync) { mu.Lock(); got = append(got, s); mu.Unlock() }})
			p := filepath.Join(d.Dir(), "snap")
			w, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644) // as a snapshot take
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// A reader open alongside the writer: every open of the inode must be of one mode.
			r, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			want := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
			diskmodel.FillRandom(want)
			for i := range 3 {
				if _, err := w.Write(want[i<<20 : (i+1)<<20]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte("tail")); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			want = append(want, "tail"...)
			back := make([]byte, len(want))
			if _, err := r.ReadAt(back, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, want) {
				t.Errorf("read back through the mount differs from what was written")
			}
			if b, _ := os.ReadFile(filepath.Join(backing, "snap")); !bytes.Equal(b, want) {
				t.Errorf("backing file differs from what was written")
			}
			st := d.Stats()
			if pt && (st.Writes != 0 || st.Reads != 0) {
				t.Errorf("passthrough: %d writes and %d reads reached the model; want none", st.Writes, st.Reads)
			}
			if !pt && (st.Writes < 4 || st.Reads == 0) {
				t.Errorf("without passthrough: %d writes and %d reads reached the model; want every one", st.Writes, st.Reads)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 || got[0].Bytes != 3<<20 || got[1].Bytes != 4 {
				t.Fatalf("syncs reported %+v; want 3 MiB then 4 bytes", got)
			}
			for i, s := range got {
				if s.Dur < l.SyncLatency || s.File != "snap" {
					t.Errorf("sync %d: %s held %v; want snap held at least %v", i, s.File, s.Dur, l.SyncLatency)
				}
			}
		})
	}
}

// Passthrough is refused with a cap it could not hold, naming it, and mounts nothing; a power
// loss on a passthrough model is refused and changes nothing.
func TestPassthroughRefusesWhatItCannotHold(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly (mount(2)) needs root")
	}
	for name, l := range map[string]diskmodel.Limits{
		"throughput":   {Throughput: 125e6, SyncLatency: time.Millisecond},
		"iops":         {IOPS: 3000},
		"sync_per_mib": {SyncLatency: time.Millisecond, SyncPerMiB: time.Millisecond},
	} {
		mp := t.TempDir()
		_, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: mp, Limits: l, Passthrough: true})
		if !errors.Is(err, diskmodel.ErrLimits) || !strings.Contains(err.Error(), "passthrough with "+name) {
			t.Errorf("passthrough with %s: %v; want it refused naming %s", l, err, name)
		}
		if mounted(mp) {
			t.Errorf("%s: mounted after the refusal", mp)
		}
	}

	d, backing := mountOpts(t, Options{Passthrough: true})
	mp := d.Dir()
	writeAt(t, filepath.Join(mp, "f"), 0, 0, "synced", true, false)
	writeAt(t, filepath.Join(mp, "f"), 0, 6, "+unsynced", false, false)
	if _, err := d.DropUnsynced(); !errors.Is(err, ErrPassthrough) {
		t.Errorf("power loss on a passthrough model: %v; want ErrPassthrough", err)
	}
	if b, _ := os.ReadFile(filepath.Join(backing, "f")); string(b) != "synced+unsynced" {
		t.Errorf("after the refused power loss the file holds %q; want it unchanged", b)
	}
}

// On the fake clock: with passthrough every fsync is held for exactly the sync latency, and
// reports as its bytes what the file grew by since its previous sync (written behind the
// model's back, as the kernel does), nothing for bytes rewritten in place, and counts again
// from the size an O_TRUNC left.
func TestCapsPassthroughSync(t *testing.T) {
	c := newCaps(t, diskmodel.Limits{SyncLatency: 4 * time.Millisecond})
	c.m.passthrough = true
	var got []Sync
	c.m.onSync = func(s Sync) { got = append(got, s) }
	path, n := filepath.Join(t.TempDir(), "f"), c.file()
	open := func(flags int) (*os.File, *ptFile) {
		t.Helper()
		k, err := os.OpenFile(path, flags, 0o644) // the kernel's side: writes the model never sees
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		fd, err := syscall.Dup(int(k.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		fh, _, errno := n.openPassthrough(fs.NewLoopbackFile(fd), 0, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		return k, fh.(*ptFile)
	}
	k, f := open(os.O_RDWR | os.O_CREATE)
	sync := func(want int64) {
		t.Helper()
		t0 := c.clk.Now()
		if errno := f.Fsync(context.Background(), 0); errno != 0 {
			t.Fatal(errno)
		}
		if held := c.clk.Now().Sub(t0); held != 4*time.Millisecond {
			t.Errorf("fsync held %v; want the 4ms latency", held)
		}
		if s := got[len(got)-1]; s.Bytes != want {
			t.Errorf("fsync %d reported %d bytes; want %d", len(got), s.Bytes, want)
		}
	}
	k.WriteAt(make([]byte, 3000), 0)
	sync(3000)
	k.WriteAt(make([]byte, 100), 0)
	sync(0)
	k.WriteAt(make([]byte, 200), 2900)
	sync(100)
	k, f = open(os.O_RDWR | os.O_TRUNC)
	k.WriteAt(make([]byte, 50), 0)
	sync(50)
	if st := c.m.c.stats(); st.Syncs != 4 || st.Writes != 0 {
		t.Errorf("stats %+v: want 4 syncs and no writes", st)
	}
}

// A backing folder on an overlayfs (a container's /tmp) is one filesystem deeper: passthrough
// still serves it, where with the default stacking depth the kernel would refuse every backing
// file and the writes would go through the model.
func TestPassthroughOverOverlay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an overlayfs needs root")
	}
	base := t.TempDir()
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(base, "merged")
	opts := "lowerdir=" + filepath.Join(base, "lower") + ",upperdir=" + filepath.Join(base, "upper") + ",workdir=" + filepath.Join(base, "work")
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("no overlayfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(merged, syscall.MNT_DETACH) })
	d, _ := mountOpts(t, Options{Backing: merged, Passthrough: true})
	if err := os.WriteFile(filepath.Join(d.Dir(), "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Writes != 0 {
		t.Errorf("%d writes reached the model over an overlayfs; want none (passthrough)", st.Writes)
	}
}
