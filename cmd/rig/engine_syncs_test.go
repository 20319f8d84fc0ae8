package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/rundir"
)

// A log sync's line names its file relative to the data folder, and is a force on the commit path.
func TestLogSyncLine(t *testing.T) {
	data := t.TempDir()
	at := time.Unix(1_700_000_000, 5)
	sp := logSync(data, store.SyncSpan{Path: filepath.Join(data, "raft", "log", "log-1.seg"), Level: store.SyncFull, Start: at, Dur: 3 * time.Millisecond})
	want := rundir.InsideSpan{AtNs: at.UnixNano(), DurNs: 3e6, Kind: rundir.InsideForce, Source: rundir.SourceEngineSyncs,
		File: "raft/log/log-1.seg", Role: rundir.RoleLog, Blocks: rundir.BlocksCommit, Detail: "fsync of raft/log/log-1.seg"}
	if sp != want {
		t.Fatalf("line %+v, want %+v", sp, want)
	}
	if sp := logSync(data, store.SyncSpan{Path: "/elsewhere/x", Level: store.SyncData, Start: at, Dur: time.Millisecond}); sp.File != "/elsewhere/x" || sp.Detail != "fdatasync of /elsewhere/x" {
		t.Fatalf("a sync outside the data folder: %+v, want its path as it is", sp)
	}
}

// BenchmarkLogSyncLine is what the engine's writer goroutine pays per recorded sync: its line
// made, written and flushed to the pauses file (one write syscall), off raft's goroutine.
func BenchmarkLogSyncLine(b *testing.B) {
	data := b.TempDir()
	w, err := rundir.CreatePauses(filepath.Join(data, rundir.PausesFile))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	s := store.SyncSpan{Path: filepath.Join(data, "raft", "log", "log-00000000000000000001.seg"), Level: store.SyncFull, Start: time.Now(), Dur: 2 * time.Millisecond}
	for b.Loop() {
		w.Write(logSync(data, s))
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
