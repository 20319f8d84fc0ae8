package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/engine/bench"
	"github.com/rig-dev/rig/internal/units"
)

// newBenchDiskCmd is `rig bench disk`: the disk model's own cost.
func newBenchDiskCmd() *cobra.Command {
	var (
		orders, block, dir string
		o                  bench.DiskOptions
		asJSON, quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "disk",
		Short: "The disk model's own cost: the engine's snapshot take on a bare folder and through a model with no limits",
		Long: `Builds one book, then writes it as the reference engine takes a snapshot (block writer,
a sync per block at sync level > 0, file sync, rename, folder sync) into a bare folder and into
the same filesystem through a disk model with no limits set (a FUSE mount, docs/disks.md),
--takes times each, the two interleaved take by take at every sync level. The ratio of the
medians is what the model itself adds to a take. Needs root (the model mounts with mount(2)).`,
		Example: "  rig bench disk --orders 1m --takes 9",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := units.ParseCount(orders)
			if err != nil || n < 1 || n > 100_000_000 {
				if err == nil {
					err = fmt.Errorf("%q is out of range; want 1..100M", orders)
				}
				return fmt.Errorf("%w: --orders: %v", errUsage, err)
			}
			bs, err := units.ParseSize(block)
			if err != nil || bs < 4<<10 || bs > 1<<30 {
				if err == nil {
					err = fmt.Errorf("%q is out of range; want 4KiB..1GiB, e.g. 1MiB or 16MiB", block)
				}
				return fmt.Errorf("%w: --block-size: %v", errUsage, err)
			}
			if o.Takes < 5 {
				return fmt.Errorf("%w: --takes %d: want at least 5", errUsage, o.Takes)
			}
			if os.Geteuid() != 0 {
				return fmt.Errorf("%w: rig bench disk mounts a disk model with mount(2), which needs root", errUsage)
			}
			o.Orders, o.BlockSize = int(n), int(bs)
			if !quiet {
				o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			rep, err := benchDisk(cmd.Context(), dir, o)
			if err != nil {
				return err
			}
			if asJSON {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&orders, "orders", "1m", "resting orders in the book taken")
	f.StringVar(&block, "block-size", "1MiB", "snapshot block size")
	f.IntVar(&o.Takes, "takes", 9, "takes per (sync level, folder)")
	f.IntSliceVar(&o.SyncLevels, "sync-levels", []int{0, 2}, "engine sync levels to take at (0 none, 1 fdatasync, 2 fsync)")
	f.StringVar(&dir, "dir", os.TempDir(), "the filesystem to measure: the bare folder and the model's backing are made under it")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	return cmd
}

// benchDisk makes a bare folder and a model with no limits over a folder beside it, under dir,
// and times the takes into both; everything it made is removed after.
func benchDisk(ctx context.Context, dir string, o bench.DiskOptions) (rep bench.DiskReport, err error) {
	base, err := os.MkdirTemp(dir, "rig-bench-disk-")
	if err != nil {
		return rep, fmt.Errorf("bench disk: %w", err)
	}
	defer os.RemoveAll(base)
	bare, backing := filepath.Join(base, "bare"), filepath.Join(base, "backing")
	for _, d := range []string{bare, backing} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return rep, fmt.Errorf("bench disk: %w", err)
		}
	}
	disk, err := fusefs.Mount(ctx, fusefs.Options{Backing: backing, Mountpoint: filepath.Join(base, "model"), Limits: diskmodel.Limits{}, Logger: o.Log})
	if err != nil {
		return rep, fmt.Errorf("bench disk: mount the model: %w", err)
	}
	defer func() {
		if cerr := disk.Close(); cerr != nil && !errors.Is(cerr, fusefs.ErrDetached) && err == nil {
			err = fmt.Errorf("bench disk: unmount the model: %w", cerr)
		}
	}()
	o.Folders = []bench.Folder{{Name: "bare", Path: bare}, {Name: "model", Path: disk.Dir()}}
	return bench.RunDisk(ctx, o)
}
