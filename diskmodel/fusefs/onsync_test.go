package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/testfs"
)

// Every fsync through a real mount is reported with its file (relative to the mountpoint), the
// bytes it flushed and how long the caller was held, which the modelled sync cost bounds below.
func TestOnSyncReportsEveryFsyncPerFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly (mount(2)) needs root")
	}
	var (
		mu  sync.Mutex
		got []Sync
	)
	mp := t.TempDir()
	l := diskmodel.Limits{SyncLatency: 2 * time.Millisecond}
	d, err := Mount(context.Background(), Options{Backing: testfs.Tmpfs(t, 64<<20), Mountpoint: mp, Limits: l,
		OnSync: func(s Sync) { mu.Lock(); got = append(got, s); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil && !errors.Is(err, ErrDetached) {
			t.Errorf("unmount: %v", err)
		}
	}()
	if err := os.Mkdir(filepath.Join(mp, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, sizes ...int) {
		f, err := os.Create(filepath.Join(mp, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, n := range sizes {
			if _, err := f.Write(make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := time.Now()
	write("log/segment-0", 4096, 100)
	write("snap.bin", 1<<20)
	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		file  string
		bytes int64
	}{{"log/segment-0", 4096}, {"log/segment-0", 100}, {"snap.bin", 1 << 20}}
	if len(got) != len(want) {
		t.Fatalf("%d syncs reported %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.File != w.file || g.Bytes != w.bytes {
			t.Errorf("sync %d: %s %d bytes, want %s %d", i, g.File, g.Bytes, w.file, w.bytes)
		}
		if g.Dur < l.SyncLatency || g.Start.Before(before) {
			t.Errorf("sync %d: held %v from %v, want at least the modelled %v from after %v", i, g.Dur, g.Start, l.SyncLatency, before)
		}
	}
	if st := d.Stats(); st.Syncs != int64(len(got)) {
		t.Errorf("Stats counts %d syncs, OnSync saw %d", st.Syncs, len(got))
	}
}
