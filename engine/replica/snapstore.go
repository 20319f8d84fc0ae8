package replica

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// restoredSnapshot is raft's view of the engine's own snapshots: it lists the snapshot the FSM
// restored at launch, so raft starts its indexes after it (last applied, last snapshot, the
// configuration as of it) instead of expecting a log that reaches back to index 1. That is what
// lets a node start from a snapshot with no log before it — a stored book installed in every
// node's snapshots folder (see SnapshotFileName) — and keep numbering entries after it. Raft
// never opens it (NoSnapshotRestoreOnStart: the FSM restored it already) and never creates one
// (its own snapshots are off).
type restoredSnapshot struct {
	f     *fsm
	peers raft.Configuration
}

func (s *restoredSnapshot) List() ([]*raft.SnapshotMeta, error) {
	snap := s.f.lastSnap.Load()
	if snap == nil || !snap.Restored {
		return nil, nil
	}
	return []*raft.SnapshotMeta{{
		Version: raft.SnapshotVersionMax, ID: snapshotName(snap.Index), Index: snap.Index, Term: snap.Term,
		// The engine's membership never changes: the peers of its config are the configuration
		// at every index.
		Configuration: s.peers, ConfigurationIndex: snap.Index, Size: snap.Bytes,
	}}, nil
}

func (s *restoredSnapshot) Create(raft.SnapshotVersion, uint64, uint64, raft.Configuration, uint64, raft.Transport) (raft.SnapshotSink, error) {
	return nil, errors.New("raft snapshots are disabled: the engine snapshots at replicated markers (POST /snapshot)")
}

func (s *restoredSnapshot) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	return nil, nil, fmt.Errorf("raft snapshot %s: sending snapshots is not supported; every node restores its own", id)
}

// SnapshotFileName is the name a snapshot of log index idx has in a node's snapshots folder
// (<dir>/snapshots/): a snapshot file placed there before launch is restored like one the node
// took itself.
func SnapshotFileName(idx uint64) string { return snapshotName(idx) + ".bin" }

func snapshotName(idx uint64) string { return fmt.Sprintf("snap-%020d", idx) }
