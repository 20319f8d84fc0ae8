package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server/servertest"
)

// TestFlightRecorderCountsTheSnapshotsSyncs: with a flight recorder, GET /trace answers its
// window, and on an idle one-node engine at sync level 2 the fsyncs in it are the snapshot's
// own `syncs` figure (issue 37's check on the reference engine). Without one, /trace is 404.
func TestFlightRecorderCountsTheSnapshotsSyncs(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	cfg := servertest.Start(t, func(c *engine.Config) { c.SyncLevel = 2 }, func(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
		return New(node, log, token).WithFlightRecorder(fr).Run(ctx)
	})
	admin := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+cfg.AdminAddr+path, nil)
		engine.AuthorizeAdmin(req, testAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := admin("GET", engine.AdminTrace); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /trace before the recorder started: %s, want 404", resp.Status)
	}
	time.Sleep(200 * time.Millisecond) // let the start-up's log writes settle before recording
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	resp := admin("POST", engine.AdminSnapshot)
	var snap engine.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("snapshot: %s %v", resp.Status, err)
	}
	resp.Body.Close()
	resp = admin("GET", engine.AdminTrace)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /trace: %s", resp.Status)
	}
	got, err := analysis.ReadGoTrace(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot %+v; trace %+v", snap, got)
	// The engine's syncs figure counts the per-block syncs; the take then syncs the file and the
	// folder (engine/replica/snapwrite.go).
	perBlock, take := 0, 0
	for site, n := range got.FsyncSites {
		if strings.Contains(site, "replica.WriteSnapshotFile.func") {
			perBlock += n
		}
		if strings.Contains(site, "replica.WriteSnapshotFile") {
			take += n
		}
	}
	if snap.Syncs == 0 || perBlock != snap.Syncs || take != snap.Syncs+2 {
		t.Errorf("flight recorder saw %d per-block fsyncs and %d in the take (sites %v); the snapshot reports %d syncs", perBlock, take, got.FsyncSites, snap.Syncs)
	}
}
