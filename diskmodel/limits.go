// Package diskmodel is the shape of a modelled disk: the Limits a model imposes on a folder —
// a throughput and an IOPS cap on writes, and every fsync taking at least a fixed latency plus
// a cost per byte the file had not yet synced, the shape of a network volume such as EBS gp3
// whose sync costs milliseconds whatever the local disk could do — and Probe, which measures
// what a folder delivers so a run records the achieved figures beside the asked ones (Check
// compares them). diskmodel/fusefs mounts a model; this package imports nothing beyond the
// standard library, so playbooks, the runner and the run folder's formats can share the shape.
package diskmodel

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultIOSize is the largest write one I/O operation counts for: EBS counts an SSD volume's
// I/O in units of up to 256 KiB, merging sequential writes into one.
const DefaultIOSize = 256 << 10

// Limits are what a model imposes. A zero field imposes nothing, so the zero Limits is a plain
// pass-through (whose own cost BenchmarkPassThrough measures).
type Limits struct {
	// Throughput caps bytes written per second (a token bucket on bytes).
	Throughput int64 `json:"throughput_bps,omitempty"`
	// IOPS caps write operations per second; a write of n bytes is ceil(n/IOSize) operations,
	// and a write that continues the previous one on the same file fills its operation first.
	IOPS int64 `json:"iops,omitempty"`
	// IOSize is the largest write one operation counts for (DefaultIOSize when 0).
	IOSize int64 `json:"io_size,omitempty"`
	// Burst lets writes run uncapped for this long's worth of the rates after the disk was idle
	// (both buckets hold Burst × rate); 0: every write waits its own share.
	Burst time.Duration `json:"burst_ns,omitempty"`
	// SyncLatency is the least time an fsync takes; the real fsync runs within it.
	SyncLatency time.Duration `json:"sync_latency_ns,omitempty"`
	// SyncPerMiB adds this much to an fsync for every MiB written to the file since its last
	// sync (the transfer a network volume does at sync time).
	SyncPerMiB time.Duration `json:"sync_per_mib_ns,omitempty"`
}

// ErrLimits is an invalid Limits value.
var ErrLimits = errors.New("invalid disk model limits")

// Validate says which field is out of range.
func (l Limits) Validate() error {
	var bad []string
	if l.Throughput < 0 {
		bad = append(bad, fmt.Sprintf("throughput %d B/s is negative", l.Throughput))
	}
	if l.IOPS < 0 {
		bad = append(bad, fmt.Sprintf("iops %d is negative", l.IOPS))
	}
	if l.IOSize < 0 || (l.IOSize > 0 && l.IOSize < 512) {
		bad = append(bad, fmt.Sprintf("io_size %d is below 512 B", l.IOSize))
	}
	if l.Burst < 0 || l.SyncLatency < 0 || l.SyncPerMiB < 0 {
		bad = append(bad, "burst, sync_latency and sync_per_mib must not be negative")
	}
	if l.Burst > 0 && l.Throughput == 0 && l.IOPS == 0 {
		bad = append(bad, "burst needs a throughput or iops cap to burst above")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrLimits, strings.Join(bad, "; "))
	}
	return nil
}

// Zero reports whether l imposes nothing.
func (l Limits) Zero() bool {
	return l.Throughput == 0 && l.IOPS == 0 && l.SyncLatency == 0 && l.SyncPerMiB == 0
}

// PassthroughCaps names the caps a model can hold only by seeing each write (throughput and
// IOPS book every write as it is made; sync_per_mib charges an fsync for the bytes it flushes):
// a model with none of them may let the kernel make the writes itself (fusefs's passthrough).
func (l Limits) PassthroughCaps() []string {
	var caps []string
	if l.Throughput > 0 {
		caps = append(caps, "throughput")
	}
	if l.IOPS > 0 {
		caps = append(caps, "iops")
	}
	if l.SyncPerMiB > 0 {
		caps = append(caps, "sync_per_mib")
	}
	return caps
}

// EffectiveIOSize is IOSize, or DefaultIOSize when it is 0.
func (l Limits) EffectiveIOSize() int64 {
	if l.IOSize > 0 {
		return l.IOSize
	}
	return DefaultIOSize
}

// SyncCost is the least time an fsync of a file with unsynced bytes takes.
func (l Limits) SyncCost(unsynced int64) time.Duration {
	return l.SyncLatency + time.Duration(float64(l.SyncPerMiB)*float64(unsynced)/(1<<20))
}

// String is a one-line description for progress lines and errors.
func (l Limits) String() string {
	if l.Zero() {
		return "pass-through (no limits)"
	}
	var parts []string
	if l.Throughput > 0 {
		parts = append(parts, fmt.Sprintf("%.1f MB/s", float64(l.Throughput)/1e6))
	}
	if l.IOPS > 0 {
		parts = append(parts, fmt.Sprintf("%d IOPS (%d KiB I/O)", l.IOPS, l.EffectiveIOSize()>>10))
	}
	if l.Burst > 0 {
		parts = append(parts, "burst "+l.Burst.String())
	}
	if l.SyncLatency > 0 || l.SyncPerMiB > 0 {
		s := "sync " + l.SyncLatency.String()
		if l.SyncPerMiB > 0 {
			s += " + " + l.SyncPerMiB.String() + "/MiB unsynced"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Dropped is what a power loss of a model discarded (diskmodel/fusefs: every write since each
// file's last fsync).
type Dropped struct {
	Files int   `json:"files"` // files whose content reverted
	Bytes int64 `json:"bytes"` // unsynced bytes discarded (cut off the end, or overwritten below it)
	Gone  int   `json:"gone"`  // changed files unlinked since: nothing to revert
}
