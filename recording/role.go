package recording

import (
	"path/filepath"
	"strings"

	"github.com/rig-dev/rig/rundir"
)

// FileRole makes a forced or written file's path relative to the engine's data folder (when it
// is inside it) and says which of the engine's files it is (rundir.Role*), from its name:
// an Aeron Archive recording segment (<recording id>-<base position>.rec: the cluster's log,
// or a snapshot's recording) is archive_segment; a file under a snapshots folder or named
// *.snap a snapshot; a raft log segment, Aeron's cluster recording.log or a mark file the log.
func FileRole(dataDir, path string) (rel, role string) {
	rel = path
	if dataDir != "" && filepath.IsAbs(path) {
		if r, err := filepath.Rel(dataDir, path); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			rel = r
		}
	}
	base := filepath.Base(rel)
	switch {
	case strings.HasSuffix(base, ".rec"):
		return rel, rundir.RoleArchiveSegment
	case strings.HasSuffix(base, ".snap") || strings.Contains(rel, "snapshots/"):
		return rel, rundir.RoleSnapshot
	case base == "recording.log" || strings.HasSuffix(base, "-mark.dat") || rundir.InRaftDir(rel) ||
		strings.HasSuffix(base, ".wal") || strings.HasSuffix(base, ".seg"):
		return rel, rundir.RoleLog
	}
	return rel, rundir.RoleOther
}
