package loadgen_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/loadgen/loadspec"
)

// settled waits until every running node has applied the same index and returns their statuses
// with state hashes.
func settled(t *testing.T, c *engineCluster) []engine.Status {
	t.Helper()
	var sts []engine.Status
	c.await("every node ready at one applied index", func(*replica.Node) bool {
		sts = sts[:0]
		for _, nd := range c.nodes {
			if nd != nil {
				sts = append(sts, nd.Status(true))
			}
		}
		for _, st := range sts {
			if st.Phase != engine.PhaseReady || st.AppliedIndex != sts[0].AppliedIndex {
				return false
			}
		}
		return true
	}, false)
	return sts
}

// TestStoredBookSameStateAsPreload: a book written once (the reference driver's WriteBook) and installed in
// every node's snapshots folder gives every node the state hash of the same book built order
// by order through the log; the log goes on after it (entries numbered after the stored index,
// the same on every node), and a follower restarted from it replays and catches up to the same
// state.
func TestStoredBookSameStateAsPreload(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	opts := loadgen.PreloadOptions{BookShape: loadspec.BookShape{Orders: 30_011, Instruments: 5, Levels: 40}, Batch: 1000, InFlight: 4}

	built := startEngines(t, 3, 1, nil)
	settled(t, built)
	po := opts
	// One batch in flight: a batch resent after a leader change (this machine is busy) still
	// enters the log in order, so this is the book built order by order.
	po.InFlight = 1
	po.Servers = built.addrs
	pst, err := loadgen.Preload(ctx, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("preload through the log: %d orders, connection %+v", pst.Orders, pst.Conn)
	want := settled(t, built)[0]
	if want.Orders != int(opts.Orders) || want.StateHash == "" {
		t.Fatalf("built through the log: %d orders, hash %q", want.Orders, want.StateHash)
	}

	file := filepath.Join(t.TempDir(), "book.snap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := reference.Driver{}.WriteBook(f, opts.BookShape)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || st.Orders != opts.Orders || st.Filled != 0 {
		t.Fatalf("write stored book: %+v, %v", st, err)
	}
	install := func(dir string) {
		b, err := os.ReadFile(file)
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, "snapshots"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.FromSlash(reference.Driver{}.BookFile())), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reused := startEngines(t, 3, 2, install)
	sts := settled(t, reused)
	for i, s := range sts {
		if s.StateHash != want.StateHash || s.Orders != want.Orders {
			t.Errorf("node-%d from the stored book: hash %s, %d orders; built order by order: %s, %d", i, s.StateHash, s.Orders, want.StateHash, want.Orders)
		}
		if ls := s.LastSnapshot; ls == nil || !ls.Restored || ls.Index != reference.StoredBookMeta.LogIndex {
			t.Errorf("node-%d last snapshot %+v, want the stored book restored at index %d", i, ls, reference.StoredBookMeta.LogIndex)
		}
	}

	// The log goes on after the stored index, identically everywhere.
	more := opts
	more.Servers, more.Orders, more.FirstID = reused.addrs, 2_000, uint64(opts.Orders)+1
	if _, err := loadgen.Preload(ctx, more); err != nil {
		t.Fatal(err)
	}
	after := settled(t, reused)
	for i, s := range after {
		if s.StateHash != after[0].StateHash || s.Orders != int(opts.Orders+more.Orders) || s.AppliedIndex <= reference.StoredBookMeta.LogIndex {
			t.Errorf("node-%d after more orders: hash %s, %d orders, applied %d; node-0: %s", i, s.StateHash, s.Orders, s.AppliedIndex, after[0].StateHash)
		}
	}

	// A follower restarted: it restores the stored book, replays its own log after it and
	// catches up with the same state.
	f1 := 0
	for i, nd := range reused.nodes {
		if !nd.IsLeader() {
			f1 = i
			break
		}
	}
	reused.stop(f1)
	reused.start(f1)
	again := settled(t, reused)
	for i, s := range again {
		if s.StateHash != after[0].StateHash || s.AppliedIndex != after[0].AppliedIndex {
			t.Errorf("after restarting node-%d: node %d hash %s at %d, want %s at %d", f1, i, s.StateHash, s.AppliedIndex, after[0].StateHash, after[0].AppliedIndex)
		}
	}
}
