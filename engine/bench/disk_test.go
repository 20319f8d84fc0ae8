package bench

import (
	"context"
	"os"
	"testing"

	"github.com/rig-dev/rig/engine/snapshot"
)

// A disk bench over two plain folders: every (level, folder) point is measured from its own
// takes, the files are the engine's snapshot size, sync level 2 syncs every block, and each
// take's file is gone after it.
func TestRunDisk(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	rep, err := RunDisk(context.Background(), DiskOptions{Orders: 50_000, Takes: 5, BlockSize: 64 << 10,
		Folders: []Folder{{"a", a}, {"b", b}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 {
		t.Fatalf("%d results, want 2 levels x 2 folders", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Bytes != snapshot.Size(50_000) || r.Takes != 5 || r.TakeMsP50 <= 0 || r.TakeMsMin > r.TakeMsP50 || r.TakeMsMax < r.TakeMsP50 {
			t.Errorf("%+v", r)
		}
		if want := 0; r.SyncLevel == 0 && r.Syncs != want || r.SyncLevel == 2 && r.Syncs < int(r.Bytes/(64<<10)) {
			t.Errorf("sync level %d: %d syncs of %d bytes", r.SyncLevel, r.Syncs, r.Bytes)
		}
		if r.Folder == "a" && r.Ratio != 1 {
			t.Errorf("the first folder's ratio is %v, want 1", r.Ratio)
		}
	}
	for _, d := range []string{a, b} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s keeps %d files", d, len(ents))
		}
	}
	if _, err := RunDisk(context.Background(), DiskOptions{Folders: []Folder{{"a", a}}}); err == nil {
		t.Error("one folder accepted")
	}
}
