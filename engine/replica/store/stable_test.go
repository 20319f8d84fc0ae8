package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func openStable(t *testing.T, dir string, level SyncLevel) *Stable {
	t.Helper()
	s, err := OpenStable(dir, Options{SyncLevel: level})
	if err != nil {
		t.Fatalf("OpenStable: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStableRoundTripAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir, SyncFull)
	// Raft tells "missing" from "broken" by the text alone (raft.go, api.go in v1.7.2).
	if _, err := s.Get([]byte("LastVoteCand")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key = %v, want exactly \"not found\"", err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a missing key = %d, %v", v, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("LastVoteTerm"), 6); err != nil {
		t.Fatal(err)
	}
	val := []byte("node-2")
	if err := s.Set([]byte("LastVoteCand"), val); err != nil {
		t.Fatal(err)
	}
	val[0] = 'X' // the store must have copied it
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Syncs != 8 { // 4 Sets × (temp file + directory)
		t.Fatalf("Syncs = %d after 4 Sets at level 2, want 8", st.Syncs)
	}
	check := func(s *Stable) {
		t.Helper()
		if v, err := s.GetUint64([]byte("CurrentTerm")); v != 7 || err != nil {
			t.Fatalf("CurrentTerm = %d, %v", v, err)
		}
		if v, err := s.GetUint64([]byte("LastVoteTerm")); v != 6 || err != nil {
			t.Fatalf("LastVoteTerm = %d, %v", v, err)
		}
		if v, err := s.Get([]byte("LastVoteCand")); !bytes.Equal(v, []byte("node-2")) || err != nil {
			t.Fatalf("LastVoteCand = %q, %v", v, err)
		}
		if v, err := s.Get([]byte("empty")); len(v) != 0 || err != nil {
			t.Fatalf("empty = %q, %v", v, err)
		}
	}
	check(s)
	s.Close()
	if err := s.Set([]byte("k"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close = %v", err)
	}
	// A temp file from a crash mid-Set is ignored and removed.
	if err := os.WriteFile(filepath.Join(dir, stableName+".tmp"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openStable(t, dir, SyncNone)
	check(s)
	if _, err := os.Stat(filepath.Join(dir, stableName+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 8); err != nil || s.Stats().Syncs != 0 {
		t.Fatalf("Set at level 0: %v, %d syncs", err, s.Stats().Syncs)
	}
}

func TestStableCorruptFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir, SyncNone)
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, stableName)
	b := fileBytes(t, path)
	b[len(b)-6] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStable(dir, Options{})
	if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(path)) {
		t.Fatalf("OpenStable of a damaged file = %v, want ErrCorrupt naming %s", err, path)
	}
}

// raft.HasExistingState goes through the same "not found" check raft uses at startup.
func TestStableWithRaftExistingState(t *testing.T) {
	dir := t.TempDir()
	logs := openLog(t, filepath.Join(dir, "log"), Options{})
	stable := openStable(t, filepath.Join(dir, "stable"), SyncNone)
	snaps := raft.NewInmemSnapshotStore()
	if has, err := raft.HasExistingState(logs, stable, snaps); has || err != nil {
		t.Fatalf("fresh stores: HasExistingState = %v, %v", has, err)
	}
	if err := stable.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if has, err := raft.HasExistingState(logs, stable, snaps); !has || err != nil {
		t.Fatalf("after a term: HasExistingState = %v, %v", has, err)
	}
}
