package disk

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/tools"
)

// fio itself, on a folder of this machine's disk (not /tmp if that were a tmpfs: O_DIRECT), its
// JSON parsed into the three figures, the result kept and reused, the work files removed.
func TestCheckRealFio(t *testing.T) {
	tools.Require(t, "fio")
	dir := t.TempDir()
	start := time.Now()
	m, err := Check(t.Context(), CheckOptions{Dir: dir, SizeBytes: 8 << 20, Runtime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("fio %s in %s: %.1f MB/s sequential, %.0f IOPS 4 KiB random, fdatasync mean %.0f us p99 %.0f us over %d syncs, load %.2f (took %s)",
		m.FioVersion, dir, m.SeqWriteMBps, m.RandWriteIOPS, m.SyncMeanUs, m.SyncP99Us, m.Syncs, m.LoadAvg, took.Round(time.Millisecond))
	if !strings.HasPrefix(m.FioVersion, "fio-") || m.SeqWriteMBps <= 0 || m.RandWriteIOPS <= 0 || m.Syncs <= 0 ||
		m.SyncMeanUs <= 0 || m.SyncP99Us < m.SyncMeanUs/10 || m.Reused || len(m.Args) == 0 || m.MeasuredAt.IsZero() {
		t.Fatalf("measured %+v", m)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rig-disk-check")); !os.IsNotExist(err) {
		t.Errorf("fio's files left behind: %v", err)
	}
	again, err := Check(t.Context(), CheckOptions{Dir: dir, Reuse: true})
	if err != nil || !again.Reused || again.SeqWriteMBps != m.SeqWriteMBps || !again.MeasuredAt.Equal(m.MeasuredAt) {
		t.Fatalf("reused %+v, %v", again, err)
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, o := range []CheckOptions{
		{Dir: "relative"},
		{Dir: "/x", SizeBytes: 4 << 30},
		{Dir: "/x", Runtime: time.Hour},
	} {
		if _, err := Check(t.Context(), o); !errors.Is(err, ErrBadOption) {
			t.Errorf("%+v: %v, want ErrBadOption", o, err)
		}
	}
	_, err := Check(t.Context(), CheckOptions{Dir: t.TempDir(), Fio: "/nonexistent/fio"})
	if !errors.Is(err, ErrNoFio) || !strings.Contains(err.Error(), "package fio") {
		t.Fatalf("no fio: %v", err)
	}
}

func TestParseFio(t *testing.T) {
	out := `note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{"fio version": "fio-3.33", "jobs": [
 {"jobname": "seq", "error": 0, "write": {"bw_bytes": 131072000, "iops": 125.0}, "sync": {"lat_ns": {"N": 0}}},
 {"jobname": "rand", "error": 0, "write": {"bw_bytes": 12288000, "iops": 3000.5}},
 {"jobname": "sync", "error": 0, "write": {"bw_bytes": 409600, "iops": 100},
  "sync": {"total_ios": 0, "lat_ns": {"N": 250, "mean": 4100000.0, "percentile": {"99.000000": 6500000}}}}]}`
	m, err := ParseFio([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if m.FioVersion != "fio-3.33" || m.SeqWriteMBps != 131.072 || m.RandWriteIOPS != 3000.5 || m.Syncs != 250 || m.SyncMeanUs != 4100 || m.SyncP99Us != 6500 {
		t.Fatalf("%+v", m)
	}
	for name, bad := range map[string]string{
		"not json":   "fio: failed to open",
		"job error":  `{"fio version": "fio-3.33", "jobs": [{"jobname": "seq", "error": 5}]}`,
		"a job lost": `{"fio version": "fio-3.33", "jobs": [{"jobname": "seq", "write": {"bw_bytes": 1}}, {"jobname": "rand", "write": {"iops": 1}}]}`,
	} {
		if _, err := ParseFio([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestCompare(t *testing.T) {
	gp3 := Provisioned{Type: "gp3", ThroughputMiBps: 125, IOPS: 3000} // 131.1 MB/s
	cases := []struct {
		name string
		p    Provisioned
		m    Measured
		want []string // nil: passes
	}{
		{"both delivered", gp3, Measured{SeqWriteMBps: 130, RandWriteIOPS: 3010}, nil},
		{"both at the floor", gp3, Measured{SeqWriteMBps: 0.8 * 131.072, RandWriteIOPS: 2400}, nil},
		{"throughput short", gp3, Measured{SeqWriteMBps: 95, RandWriteIOPS: 3000},
			[]string{"sequential write 95.0 MB/s is 72 % of the provisioned 125 MiB/s (131.1 MB/s), 28 % short", "restored from a snapshot", "initialise"}},
		{"iops short", gp3, Measured{SeqWriteMBps: 131, RandWriteIOPS: 2399},
			[]string{"4 KiB random write 2399 IOPS is 80 % of the provisioned 3000 IOPS, 20 % short"}},
		{"both short", Provisioned{Type: "gp3", ThroughputMiBps: 1000, IOPS: 4000}, Measured{SeqWriteMBps: 500, RandWriteIOPS: 1000},
			[]string{"sequential write 500.0 MB/s is 48 %", "1048.6 MB/s", "4 KiB random write 1000 IOPS is 25 %"}},
		{"io2: IOPS only", Provisioned{Type: "io2", IOPS: 16000}, Measured{SeqWriteMBps: 1, RandWriteIOPS: 16000}, nil},
		{"nothing provisioned known", Provisioned{}, Measured{SeqWriteMBps: 1, RandWriteIOPS: 1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Compare(c.p, c.m, CheckFloor)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBelowProvisioned) {
				t.Fatalf("%v, want ErrBelowProvisioned", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
}
