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
	"github.com/rig-dev/rig/playbooks"
)

// newBenchDiskCmd is `rig bench disk`: the disk model's own cost.
func newBenchDiskCmd() *cobra.Command {
	var (
		orders, block, dir string
		models             []string
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
medians is what the model itself adds to a take. A third folder is the same model mounted with
passthrough (the kernel does the reads and writes on the backing file; the model sees the opens
and fsyncs and holds sync_latency, but can neither cap throughput or IOPS nor model a power
loss: docs/disks.md). Each --model adds a model with limits, written
as the playbook's disk: fields (docs/disks.md), taken in the same rounds: what a modelled
volume costs a take beside what the model alone costs. Needs root (the model mounts with
mount(2)).`,
		Example: "  rig bench disk --orders 1m --takes 9\n" +
			"  rig bench disk --sync-levels 2 --block-size 16MiB --dir /dev/shm --model sync_latency=4ms,throughput=1000MB/s --model sync_latency=4ms,throughput=125MB/s",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := countFlag("--orders", orders, 100_000_000)
			if err != nil {
				return err
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
			var limits []diskmodel.Limits
			for _, m := range models {
				l, err := playbooks.DiskLimits(m)
				if err != nil {
					return fmt.Errorf("%w: --model %s: %v", errUsage, m, err)
				}
				limits = append(limits, l)
			}
			if os.Geteuid() != 0 {
				return fmt.Errorf("%w: rig bench disk mounts a disk model with mount(2), which needs root", errUsage)
			}
			o.Orders, o.BlockSize = int(n), int(bs)
			if !quiet {
				o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			rep, err := benchDisk(cmd.Context(), dir, limits, o)
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
	f.StringArrayVar(&models, "model", nil, "also take through a model with these limits, e.g. sync_latency=4ms,throughput=125MB/s (repeatable)")
	f.StringVar(&dir, "dir", os.TempDir(), "the filesystem to measure: the bare folder and the model's backing are made under it")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	return cmd
}

// benchDisk makes a bare folder, a model with no limits, the same with passthrough and one model
// for each of limits, each over a folder of its own under dir, and times the takes into all of
// them; everything it made is removed after.
func benchDisk(ctx context.Context, dir string, limits []diskmodel.Limits, o bench.DiskOptions) (rep bench.DiskReport, err error) {
	base, err := os.MkdirTemp(dir, "rig-bench-disk-")
	if err != nil {
		return rep, fmt.Errorf("bench disk: %w", err)
	}
	defer os.RemoveAll(base)
	bare := filepath.Join(base, "bare")
	if err := os.Mkdir(bare, 0o755); err != nil {
		return rep, fmt.Errorf("bench disk: %w", err)
	}
	o.Folders = []bench.Folder{{Name: "bare", Path: bare}}
	type model struct {
		l           diskmodel.Limits
		passthrough bool
	}
	models := []model{{}, {passthrough: true}}
	for _, l := range limits {
		models = append(models, model{l: l})
	}
	for i, md := range models {
		l := md.l
		backing := filepath.Join(base, fmt.Sprintf("backing-%d", i))
		if err := os.Mkdir(backing, 0o755); err != nil {
			return rep, fmt.Errorf("bench disk: %w", err)
		}
		disk, err := fusefs.Mount(ctx, fusefs.Options{Backing: backing, Mountpoint: filepath.Join(base, fmt.Sprintf("model-%d", i)), Limits: l, Passthrough: md.passthrough, Logger: o.Log, Owner: "rig bench disk"})
		if err != nil {
			return rep, fmt.Errorf("bench disk: mount the model %s: %w", l, err)
		}
		defer func() {
			if cerr := disk.Close(); cerr != nil && !errors.Is(cerr, fusefs.ErrDetached) && err == nil {
				err = fmt.Errorf("bench disk: unmount the model %s: %w", l, cerr)
			}
		}()
		name := "model"
		switch {
		case md.passthrough:
			name = "model passthrough"
		case !l.Zero():
			name = "model " + l.String()
		}
		o.Folders = append(o.Folders, bench.Folder{Name: name, Path: disk.Dir()})
	}
	return bench.RunDisk(ctx, o)
}
