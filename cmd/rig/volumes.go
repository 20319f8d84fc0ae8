package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/plancheck"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

// checkPlanVolumes refuses a disk.volume the target cannot give (plancheck.Volumes), and says
// when it cannot be checked here.
func checkPlanVolumes(cmd *cobra.Command, plan *playbooks.Plan, src *plancheck.VolumeSource) error {
	probs, note := plancheck.Volumes(cmd.Context(), plan, src)
	if note != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", note)
	}
	if len(probs) > 0 {
		return probs
	}
	return nil
}

// newDiskCheckCmd is `rig disk-check`: fio on every server's data volumes, against what the
// stack provisioned, on demand (rig run checks a volume before its first run on it).
func newDiskCheckCmd() *cobra.Command {
	var o struct {
		sshOptions
		stack, remoteDir, dataMount, dataFS, size string
		volumes, nodes                            []string
		sudo, json                                bool
		runtime                                   time.Duration
	}
	cmd := &cobra.Command{
		Use:   "disk-check (--stack NAME | --inventory FILE) [--volume NAME]... [--node NAME]...",
		Short: "Measure every server's data volumes with fio and compare them with what the stack provisioned",
		Long: `Start each server's agent (as rig run does), mount each of its data volumes (or the --volume
ones) at --data-mount/NAME, and measure it with fio on a file in the mounted folder: sequential
1 MiB writes (MB/s), 4 KiB random writes (IOPS) and 4 KiB writes each followed by fdatasync
(latency). Each figure is compared with what the stack provisioned; below 80 % of either, the
check fails naming the figure, both numbers and by how much. The result replaces the one kept on
the volume, which rig run reuses before its runs. Exit status 1 when a volume falls short.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			size, err := units.ParseSize(o.size)
			if err != nil || size < 1<<20 || size > disk.MaxCheckSize {
				return fmt.Errorf("%w: --size %q: want 1MiB..1GiB", errUsage, o.size)
			}
			if o.runtime < 100*time.Millisecond || o.runtime > disk.MaxCheckRuntime {
				return fmt.Errorf("%w: --runtime %s: want 100ms..%s", errUsage, o.runtime, disk.MaxCheckRuntime)
			}
			var inv *inventory.Inventory
			switch {
			case (o.stack == "") == (o.inventory == ""):
				return fmt.Errorf("%w: give one of --stack and --inventory", errUsage)
			case o.stack != "":
				name, err := expandStack(o.stack)
				if err != nil {
					return err
				}
				if err := inventory.CheckStackName("--stack", name); err != nil {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
				if inv, err = stack.NewTarget(stack.TargetOptions{Stack: name}).Inventory(ctx); err != nil {
					return err
				}
			default:
				if inv, err = inventory.Load(o.inventory); err != nil {
					return fmt.Errorf("%w: %v", errUsage, err)
				}
			}
			servers, err := pickNodes(&inventory.Inventory{Nodes: inv.Servers()}, o.nodes)
			if err != nil {
				return err
			}
			for _, v := range o.volumes {
				have := map[string][]string{}
				for _, n := range servers {
					have[n.Name] = n.VolumeNames()
				}
				if err := runner.CheckVolumeNames([]string{v}, have, "the inventory"); err != nil {
					return fmt.Errorf("%w: --volume %s: %v", errUsage, v, err)
				}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			tr, err := sshtarget.Login{KeyFiles: o.keys, User: o.user, ConnectTimeout: o.connectTimeout}.Transport(log)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			defer tr.Close()
			wd, _ := os.Getwd()
			so := sshtarget.Options{Base: o.remoteDir, Sudo: o.sudo, SourceDir: sshtarget.FindSource(wd), Logger: log}
			type row struct {
				Node  string           `json:"node"`
				Check disk.VolumeCheck `json:"check"`
				Error string           `json:"error,omitempty"`
			}
			var mu sync.Mutex
			var rows []row
			add := func(r row) { mu.Lock(); rows = append(rows, r); mu.Unlock() }
			err = sshtarget.Parallel(ctx, servers, 8, func(ctx context.Context, _ int, n inventory.Node) error {
				vols := n.DataVolumes()
				if len(vols) == 0 {
					add(row{Node: n.Name, Error: "no data volume"})
					return nil
				}
				err := sshtarget.WithAgent(ctx, tr, n, so, func(c *agent.Client) error {
					var errs []error
					for _, v := range vols {
						if len(o.volumes) > 0 && !slices.Contains(o.volumes, v.Name) {
							continue
						}
						mp := n.MountPoint(o.dataMount, v)
						if _, err := runner.MountVolume(ctx, c, v, mp, o.dataFS); err != nil {
							err = fmt.Errorf("%s: mount data volume %s on %s: %w", n.Name, v.Name, mp, err)
							add(row{Node: n.Name, Check: disk.VolumeCheck{Volume: v.Name}, Error: err.Error()})
							errs = append(errs, err)
							continue
						}
						vc, err := runner.CheckVolume(ctx, c, n.Name, v, disk.CheckOptions{Dir: mp, SizeBytes: size, Runtime: o.runtime})
						r := row{Node: n.Name, Check: vc}
						if err != nil {
							r.Error = err.Error()
							errs = append(errs, err)
						}
						add(r)
					}
					return errors.Join(errs...)
				})
				if errors.Is(err, sshtarget.ErrStartAgent) {
					add(row{Node: n.Name, Error: err.Error()})
				}
				return err
			})
			slices.SortFunc(rows, func(a, b row) int {
				return strings.Compare(a.Node+"/"+a.Check.Volume, b.Node+"/"+b.Check.Volume)
			})
			if o.json {
				if werr := writeJSON(cmd.OutOrStdout(), rows); werr != nil && err == nil {
					err = werr
				}
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tVOLUME\tPROVISIONED\tSEQ WRITE MB/s\t4K RAND WRITE IOPS\tFDATASYNC MEAN/P99 us\tLOAD\tVERDICT")
			for _, r := range rows {
				m, p := r.Check.Measured, r.Check.Provisioned
				prov := "not known"
				if r.Check.Compared {
					prov = fmt.Sprintf("%s %d IOPS", p.Type, p.IOPS)
					if p.ThroughputMiBps > 0 {
						prov += fmt.Sprintf(", %d MiB/s", p.ThroughputMiBps)
					}
				}
				verdict := "ok"
				switch {
				case r.Error != "":
					verdict = r.Error
				case !r.Check.Compared:
					verdict = "measured (provisioning not in the inventory)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.0f\t%.0f/%.0f\t%.2f\t%s\n", r.Node, r.Check.Volume, prov,
					m.SeqWriteMBps, m.RandWriteIOPS, m.SyncMeanUs, m.SyncP99Us, m.LoadAvg, verdict)
			}
			tw.Flush()
			return err
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.Lookup("inventory").Usage = "inventory JSON of the cluster (or --stack)"
	f.StringVar(&o.stack, "stack", "", "the Pulumi stack whose servers to check (@NAME means $USER-NAME)")
	f.StringArrayVar(&o.volumes, "volume", nil, "check only this data volume (repeatable; default: every one)")
	f.StringArrayVar(&o.nodes, "node", nil, "check only this server (repeatable; default: every server)")
	f.StringVar(&o.remoteDir, "remote-dir", "", "the folder on the nodes that holds rig-NODE, as rig run --remote-dir (default: the login home)")
	f.StringVar(&o.dataMount, "data-mount", "/data", "where the data volumes are mounted, as rig run --data-mount")
	f.StringVar(&o.dataFS, "data-fs", "xfs", "filesystem made on a volume that has none, as rig run --data-fs")
	f.BoolVar(&o.sudo, "sudo", false, "run the agent as root through sudo -n (mounting needs root)")
	f.StringVar(&o.size, "size", "64MiB", "the file fio writes")
	f.DurationVar(&o.runtime, "runtime", disk.DefaultCheckRuntime, "how long each of fio's three jobs runs")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}
