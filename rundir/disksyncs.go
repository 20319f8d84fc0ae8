package rundir

import (
	"io"
	"os"

	"github.com/rig-dev/rig/internal/untrusted"
)

// DiskSyncsFile, in a node's folder, is every fsync the node's disk model completed
// (diskmodel/fusefs), one DiskSync JSON line each in completion order, so the analysis can count
// the forces, the bytes they flushed and the time they took in any window of the run (a
// snapshot's, the rest). Written where the rig runs the model (the local target).
const DiskSyncsFile = "disk-syncs.ndjson"

// DiskSync is one completed fsync of a file on a disk model.
type DiskSync struct {
	AtNs  int64  `json:"at_ns"`  // the fsync began, ns since the Unix epoch
	File  string `json:"file"`   // path relative to the model's mountpoint (the engine's data folder)
	Bytes int64  `json:"bytes"`  // bytes written to the file since its previous fsync: what this one flushed
	DurNs int64  `json:"dur_ns"` // begin to return, the model's hold included
}

// DiskSyncWriter appends DiskSync lines to a file; safe for concurrent use.
type DiskSyncWriter = lineWriter[DiskSync]

// CreateDiskSyncs creates (truncates) a disk syncs file.
func CreateDiskSyncs(path string) (*DiskSyncWriter, error) {
	return openLines[DiskSync](path, os.O_TRUNC, "disk syncs file")
}

// ReadDiskSyncs reads a disk syncs file. A line that does not decode (the torn last line of a
// killed writer) is skipped. The file is a run folder's: refused unless a regular file.
func ReadDiskSyncs(path string) ([]DiskSync, error) {
	f, err := untrusted.Open(path, "disk syncs file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readDiskSyncs(f)
}

// DiskSyncs is ReadDiskSyncs of node's disk syncs file in the run folder (Folder).
func (f Folder) DiskSyncs(node string) ([]DiskSync, error) {
	return readWith(f, node+"/"+DiskSyncsFile, "disk syncs file", readDiskSyncs)
}

func readDiskSyncs(r io.Reader) ([]DiskSync, error) { return readLines[DiskSync](r) }
