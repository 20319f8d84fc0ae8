package main

import (
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/loadgen/loadspec"
)

// The flags a command is given are set over the config file's values; the rest keep the file's.
func TestLoadgenFlagsOverTheFile(t *testing.T) {
	var flags lgFlags
	cmd := &cobra.Command{Use: "burst"}
	flags.register(cmd, loadspec.BurstFlags)
	if err := cmd.ParseFlags([]string{"--messages", "50k", "--udp", "--size", "200B", "--every", "250ms"}); err != nil {
		t.Fatal(err)
	}
	cfg := loadspec.Config{Burst: loadspec.BurstConfig{Count: 3, Messages: 10, Out: "file-dir"}}
	if err := flags.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	b := cfg.Burst
	if b.Messages != 50_000 || !b.UDP || b.Size != 200 || time.Duration(b.Every) != 250*time.Millisecond || b.Count != 3 || b.Out != "file-dir" {
		t.Errorf("burst config %+v", b)
	}
	bad := &cobra.Command{Use: "probe"}
	var pf lgFlags
	pf.register(bad, loadspec.ProbeFlags)
	if err := bad.ParseFlags([]string{"--rate", "fast"}); err == nil {
		t.Error("--rate fast was taken")
	}
}
