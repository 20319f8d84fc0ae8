package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
)

func getChanges(t *testing.T, cfg engine.Config, query string) (engine.Changes, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+cfg.AdminAddr+"/changes?"+query, nil)
	engine.AuthorizeAdmin(req, testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ch engine.Changes
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&ch); err != nil {
			t.Fatal(err)
		}
	}
	return ch, resp.StatusCode
}

// A real one-node engine: its change stream holds the way to ready and leadership, a long poll
// answers at a snapshot and not before, and an idle long poll answers empty after its wait.
func TestChangesStream(t *testing.T) {
	cfg := startEngine(t, 0)
	var all engine.Changes
	waitUntil(t, "ready and leader in the change stream", func() bool {
		all, _ = getChanges(t, cfg, "since=0")
		last := all.Changes[len(all.Changes)-1].Status
		return last.Phase == engine.PhaseReady && last.Role == engine.RoleLeader
	})
	if all.Changes[0].Version != 1 || !all.Changes[0].PrevCheck.IsZero() || all.Truncated {
		t.Errorf("first change %+v (truncated %v): want version 1 without a previous check", all.Changes[0], all.Truncated)
	}
	for i, c := range all.Changes[1:] {
		prev := all.Changes[i]
		if c.Version != prev.Version+1 || c.PrevCheck.Before(prev.Status.Now) || !c.PrevCheck.Before(c.Status.Now) {
			t.Errorf("change %d: version %d after %d, previous check %v not in [%v, %v)", i+1, c.Version, prev.Version, c.PrevCheck, prev.Status.Now, c.Status.Now)
		}
		if keyOf(&c.Status) == keyOf(&prev.Status) {
			t.Errorf("change %d repeats the state of change %d", c.Version, prev.Version)
		}
	}

	// Idle: the long poll waits out its wait and answers with no change.
	start := time.Now()
	idle, code := getChanges(t, cfg, "since="+itoa(all.Version)+"&wait=150ms")
	if code != http.StatusOK || len(idle.Changes) != 0 || idle.Version != all.Version || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("idle long poll: %d %+v after %s", code, idle, time.Since(start))
	}

	// A snapshot is a change: the waiting long poll answers with it.
	got := make(chan engine.Changes, 1)
	go func() { ch, _ := getChanges(t, cfg, "since="+itoa(all.Version)+"&wait=10s"); got <- ch }()
	time.Sleep(50 * time.Millisecond)
	req, _ := http.NewRequest(http.MethodPost, "http://"+cfg.AdminAddr+"/snapshot", nil)
	engine.AuthorizeAdmin(req, testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var snap engine.Snapshot
	json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	select {
	case ch := <-got:
		last := ch.Changes[len(ch.Changes)-1].Status.LastSnapshot
		if len(ch.Changes) == 0 || last == nil || last.Index != snap.Index {
			t.Fatalf("long poll answered %+v, want the snapshot at %d", ch, snap.Index)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not answer the snapshot")
	}

	// A version from an earlier process starts over; bad parameters are refused.
	if ch, _ := getChanges(t, cfg, "since=999999"); len(ch.Changes) == 0 || ch.Changes[0].Version != 1 {
		t.Errorf("since beyond the latest version: %+v, want the whole stream", ch)
	}
	for _, q := range []string{"since=x", "wait=forever", "wait=2h", "wait=-1s"} {
		if _, code := getChanges(t, cfg, q); code != http.StatusBadRequest {
			t.Errorf("GET /changes?%s: %d, want 400", q, code)
		}
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
