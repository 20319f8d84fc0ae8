package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/internal/untrusted"
)

// newTuneCmd is `rig tune`: kernel tuning on this machine by hand (a run tunes its nodes through
// their agents).
func newTuneCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Apply or revert a kernel tuning profile on this machine (prior values recorded first)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTuneApplyCmd(), newTuneRevertCmd())
	return cmd
}

func newTuneApplyCmd() *cobra.Command {
	var o struct {
		root, dir, profile string
		json               bool
	}
	cmd := &cobra.Command{
		Use:   "apply --profile FILE --dir DIR [--root /]",
		Short: "Apply a tuning profile here: record prior values, write, read every value back",
		Long: `Apply a tuning profile (YAML or JSON: setting -> value) to this machine, or to a fake tree of
/proc/sys and /sys files under --root. Every prior value is recorded in DIR/` + tune.StateFileName + `
before anything changes; every setting is read back and rig fails naming each one that did not
take. ` + "`rig tune revert`" + ` restores the recorded values. Settings: ` + strings.Join(tune.ValidNames(), ", ") + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.profile == "" {
				return fmt.Errorf("%w: --profile is required", errUsage)
			}
			b, err := untrusted.ReadFile(o.profile, "tuning profile")
			if err != nil {
				return fmt.Errorf("%w: --profile: %v", errUsage, err)
			}
			p, err := tune.ParseProfile(o.profile, b)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			opts, err := tuneOptions(o.root, o.dir)
			if err != nil {
				return err
			}
			rep, err := tune.Apply(cmd.Context(), opts, p)
			return errors.Join(err, printReport(cmd.OutOrStdout(), rep, o.json))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "/", "filesystem root of /proc and /sys (a fake tree for tests)")
	f.StringVar(&o.dir, "dir", "", "folder that keeps "+tune.StateFileName+", the record revert restores from (required)")
	f.StringVar(&o.profile, "profile", "", "tuning profile, YAML or JSON (required)")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	return cmd
}

func newTuneRevertCmd() *cobra.Command {
	var o struct {
		root, dir string
		json      bool
	}
	cmd := &cobra.Command{
		Use:   "revert --dir DIR [--root /]",
		Short: "Restore every value the last tuning recorded, and read each back",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := tuneOptions(o.root, o.dir)
			if err != nil {
				return err
			}
			rep, err := tune.Revert(cmd.Context(), opts)
			if errors.Is(err, tune.ErrNotApplied) {
				fmt.Fprintf(cmd.OutOrStdout(), "nothing to revert: %v\n", err)
				return nil
			}
			return errors.Join(err, printReport(cmd.OutOrStdout(), rep, o.json))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "/", "filesystem root of /proc and /sys")
	f.StringVar(&o.dir, "dir", "", "folder that keeps "+tune.StateFileName+" (as given to rig tune apply; required)")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	return cmd
}

func tuneOptions(root, dir string) (tune.Options, error) {
	if root == "" {
		return tune.Options{}, fmt.Errorf("%w: --root is empty (use / for this machine)", errUsage)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return tune.Options{}, fmt.Errorf("%w: --root %q: %v", errUsage, root, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return tune.Options{}, fmt.Errorf("%w: --root %q is not a folder", errUsage, root)
	}
	if dir == "" {
		return tune.Options{}, fmt.Errorf("%w: --dir is required: the folder that keeps %s", errUsage, tune.StateFileName)
	}
	// The report printed is the record of what happened; no log lines besides it.
	return tune.Options{Root: abs, StateFile: filepath.Join(dir, tune.StateFileName), Logger: slog.New(slog.DiscardHandler)}, nil
}

// printReport writes what apply or revert changed; only the JSON form's write error is
// returned (the table is for a terminal).
func printReport(w io.Writer, rep tune.Report, asJSON bool) error {
	if asJSON {
		return writeJSON(w, rep)
	}
	changes := append([]tune.Change(nil), rep.Changes...)
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Name < changes[j].Name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tBEFORE\tWANT\tREAD BACK")
	for _, c := range changes {
		mark := ""
		if c.After != c.Want {
			mark = "  <- did not take"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\n", c.Name, c.Before, c.Want, c.After, mark)
	}
	tw.Flush()
	if rep.StateFile != "" {
		fmt.Fprintf(w, "state: %s\n", rep.StateFile)
	}
	return nil
}
