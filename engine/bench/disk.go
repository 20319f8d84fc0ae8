package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/snapshot"
)

// Folder is a folder a disk bench writes its takes into, by name.
type Folder struct{ Name, Path string }

// DiskOptions of a disk bench: one book, taken Takes times into each folder at each sync level
// the way the engine takes a snapshot (replica.WriteSnapshotFile), the folders and levels
// interleaved take by take so that a change in the machine's load reaches every point alike.
type DiskOptions struct {
	Orders     int   // default 1M
	Takes      int   // per (level, folder), at least 5 (default 9)
	SyncLevels []int // default 0, 2
	BlockSize  int   // default snapshot.DefaultBlockSize
	Folders    []Folder
	Log        *slog.Logger
}

// DiskResult is one (sync level, folder) point; Ratio is its median over the first folder's at
// the same level.
type DiskResult struct {
	SyncLevel   int     `json:"sync_level"`
	Folder      string  `json:"folder"`
	TakeMsP50   float64 `json:"take_ms_p50"`
	TakeMsMin   float64 `json:"take_ms_min"`
	TakeMsMax   float64 `json:"take_ms_max"`
	Ratio       float64 `json:"ratio"`
	Bytes       int64   `json:"bytes"`
	Syncs       int     `json:"syncs"`
	Takes       int     `json:"takes"`
	LoadAvgHigh float64 `json:"load_avg"` // highest 1-minute load average while the point ran
}

// DiskReport of a disk bench.
type DiskReport struct {
	Orders  int          `json:"orders"`
	Block   int          `json:"block_size"`
	LoadAvg float64      `json:"load_avg"`
	CPUs    int          `json:"cpus"`
	Results []DiskResult `json:"results"`
}

// RunDisk runs a disk bench.
func RunDisk(ctx context.Context, o DiskOptions) (DiskReport, error) {
	if o.Orders == 0 {
		o.Orders = 1_000_000
	}
	if o.Takes == 0 {
		o.Takes = 9
	}
	if len(o.SyncLevels) == 0 {
		o.SyncLevels = []int{0, 2}
	}
	if o.BlockSize == 0 {
		o.BlockSize = snapshot.DefaultBlockSize
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Takes < 5:
		return DiskReport{}, fmt.Errorf("takes %d: want at least 5", o.Takes)
	case len(o.Folders) < 2:
		return DiskReport{}, fmt.Errorf("%d folder(s): want two or more to compare", len(o.Folders))
	}
	for _, l := range o.SyncLevels {
		if l < 0 || l > 2 {
			return DiskReport{}, fmt.Errorf("sync level %d: want 0, 1 or 2", l)
		}
	}
	b := book.New()
	if err := Preload(b, o.Orders, 8, 1000, 1); err != nil {
		return DiskReport{}, err
	}
	rep := DiskReport{Orders: o.Orders, Block: o.BlockSize, CPUs: runtime.NumCPU()}
	type point struct {
		d    []time.Duration
		last replica.SnapshotTimes
		load float64
	}
	pts := make([][]point, len(o.SyncLevels))
	for i := range pts {
		pts[i] = make([]point, len(o.Folders))
	}
	for k := range o.Takes {
		for i, level := range o.SyncLevels {
			for j, f := range o.Folders {
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				t, err := replica.WriteSnapshotFile(f.Path, b, snapshot.Meta{LogIndex: uint64(k + 1), Term: 1},
					replica.SnapshotWrite{SyncLevel: store.SyncLevel(level), BlockSize: o.BlockSize, Threads: 1})
				if err != nil {
					return rep, fmt.Errorf("take into %s at sync level %d: %w", f.Name, level, err)
				}
				os.Remove(filepath.Join(f.Path, replica.SnapshotFileName(uint64(k+1)))) // the folder stays small
				p := &pts[i][j]
				p.d, p.last, p.load = append(p.d, t.Persisted), t, max(p.load, loadAvg())
			}
		}
		o.Log.Info("disk bench", "take", k+1, "of", o.Takes, "load_avg", loadAvg())
	}
	for i, level := range o.SyncLevels {
		base := ms(median(pts[i][0].d))
		for j, f := range o.Folders {
			p := pts[i][j]
			r := DiskResult{SyncLevel: level, Folder: f.Name, TakeMsP50: ms(median(p.d)),
				TakeMsMin: ms(slices.Min(p.d)), TakeMsMax: ms(slices.Max(p.d)), Bytes: p.last.Bytes, Syncs: p.last.Syncs,
				Takes: len(p.d), LoadAvgHigh: p.load}
			if base > 0 {
				r.Ratio = r.TakeMsP50 / base
			}
			rep.LoadAvg = max(rep.LoadAvg, p.load)
			rep.Results = append(rep.Results, r)
		}
	}
	return rep, nil
}

// WriteTable prints one row per (sync level, folder), with each folder's median over the
// first's.
func (r DiskReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "snapshot take of %s orders, %d-byte blocks, into each folder: %d CPUs, highest 1-min load average %.2f\n",
		FormatCount(r.Orders), r.Block, r.CPUs, r.LoadAvg)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Sync level\tFolder\tTake p50 ms\t[min-max]\tvs first\tBytes\tSyncs\tTakes\tLoad avg\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t[%.1f-%.1f]\t%.2fx\t%d\t%d\t%d\t%.2f\t\n",
			x.SyncLevel, x.Folder, x.TakeMsP50, x.TakeMsMin, x.TakeMsMax, x.Ratio, x.Bytes, x.Syncs, x.Takes, x.LoadAvgHigh)
	}
	return tw.Flush()
}
