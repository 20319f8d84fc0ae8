package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rig-dev/rig/diskmodel"
)

// writeAt opens name through the mount, writes data at off and, with sync, fsyncs (fdatasync
// when datasync) before closing.
func writeAt(t *testing.T, name string, flags int, off int64, data string, sync, datasync bool) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|flags, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		t.Fatal(err)
	}
	switch {
	case datasync:
		err = syscall.Fdatasync(int(f.Fd()))
	case sync:
		err = f.Sync()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A power loss reverts every file to its content at its last fsync or fdatasync, whatever
// happened since (appends, overwrites, O_TRUNC rewrites, truncations), through the mount and in
// the backing folder alike, and leaves synced files alone.
func TestDropUnsyncedRevertsToLastSync(t *testing.T) {
	d, backing := mountT(t, diskmodel.Limits{SyncLatency: 100_000})
	dir := d.Dir()
	p := func(n string) string { return filepath.Join(dir, n) }

	// A log: synced records, then an unsynced append and an overwrite of a synced record.
	writeAt(t, p("log"), 0, 0, "rec1rec2", true, false)
	writeAt(t, p("log"), 0, 8, "rec3", false, false)
	writeAt(t, p("log"), 0, 0, "XXXX", false, false)
	// A file that never was synced.
	writeAt(t, p("never"), 0, 0, "lost", false, false)
	// A stable store rewritten in place (O_TRUNC) and not synced.
	writeAt(t, p("stable"), 0, 0, "term=5", true, false)
	writeAt(t, p("stable"), os.O_TRUNC, 0, "term=6 vote=n1", false, false)
	// fdatasync makes a write durable as fsync does.
	writeAt(t, p("datasync"), 0, 0, "kept", false, true)
	// Cut below the synced size, then written past it.
	writeAt(t, p("cut"), 0, 0, "0123456789", true, false)
	if err := os.Truncate(p("cut"), 3); err != nil {
		t.Fatal(err)
	}
	writeAt(t, p("cut"), 0, 5, "abcdefgh", false, false)
	// Synced after every change: nothing to revert.
	writeAt(t, p("synced"), 0, 0, "a", true, false)
	writeAt(t, p("synced"), 0, 1, "b", true, false)
	// Changed, then unlinked: nothing to revert it to.
	writeAt(t, p("gone"), 0, 0, "tmp", false, false)
	if err := os.Remove(p("gone")); err != nil {
		t.Fatal(err)
	}
	// The kernel caches the mount's pages: read them before the loss, so a stale cache shows.
	for _, n := range []string{"log", "stable", "cut"} {
		if _, err := os.ReadFile(p(n)); err != nil {
			t.Fatal(err)
		}
	}

	got, err := d.DropUnsynced()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"log": "rec1rec2", "never": "", "stable": "term=5", "datasync": "kept", "cut": "0123456789", "synced": "ab"}
	for n, w := range want {
		for _, path := range []string{p(n), filepath.Join(backing, n)} {
			b, err := os.ReadFile(path)
			if err != nil || string(b) != w {
				t.Errorf("%s after power loss: %q, %v; want %q", path, b, err, w)
			}
		}
	}
	// log: 4 appended + 4 overwritten; never: 4; stable: 6 cut by O_TRUNC and 14 written
	// (8 past the synced size); cut: 7 truncated + 13 - 10 past the end.
	if got.Files != 4 || got.Gone != 1 || got.Bytes != 8+4+(6+8)+(7+3) {
		t.Errorf("dropped %+v; want 4 files reverted, 1 gone, %d bytes", got, 8+4+(6+8)+(7+3))
	}
	// A second loss finds nothing unsynced; writes after the first are tracked afresh.
	if again, err := d.DropUnsynced(); err != nil || again != (Dropped{}) {
		t.Errorf("second power loss dropped %+v, %v; want nothing", again, err)
	}
	writeAt(t, p("log"), 0, 8, "rec3", false, false)
	if _, err := d.DropUnsynced(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p("log")); !bytes.Equal(b, []byte("rec1rec2")) {
		t.Errorf("log after the third loss: %q", b)
	}
}

// Without a power loss the model changes nothing: the undo log is only kept, never applied.
func TestUnsyncedWritesStayWithoutPowerLoss(t *testing.T) {
	d, backing := mountT(t, diskmodel.Limits{})
	writeAt(t, filepath.Join(d.Dir(), "f"), 0, 0, "synced", true, false)
	writeAt(t, filepath.Join(d.Dir(), "f"), 0, 0, "UNSYNCED", false, false)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(backing, "f")); string(b) != "UNSYNCED" {
		t.Errorf("after unmount: %q, want the unsynced write kept", b)
	}
}
