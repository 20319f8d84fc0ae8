package replica

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine/replica/store"
)

// The newest entries are read back from memory once stored (a closed store can no longer
// answer, the cache still does), older ones and truncated ones from the store.
func TestCachedLogServesNewestEntries(t *testing.T) {
	l, err := store.OpenLog(t.TempDir(), store.Options{SyncLevel: store.SyncFull})
	if err != nil {
		t.Fatal(err)
	}
	c := newCachedLog(guardedLog{l, &Node{}}, 4)
	var logs []*raft.Log
	for i := uint64(1); i <= 6; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(6, 6); err != nil { // a follower's truncated suffix
		t.Fatal(err)
	}
	if err := c.StoreLogs([]*raft.Log{{Index: 6, Term: 2, Type: raft.LogCommand, Data: []byte{60}}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	var e raft.Log
	if err := c.GetLog(6, &e); err != nil || e.Term != 2 || e.Data[0] != 60 {
		t.Fatalf("entry 6 after truncation and rewrite: %+v, %v; want term 2 from memory", e, err)
	}
	for _, i := range []uint64{3, 5} { // 3..5 were forgotten by the truncation
		if err := c.GetLog(i, &e); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("entry %d: %v; want the closed store's error (not cached)", i, err)
		}
	}
}
