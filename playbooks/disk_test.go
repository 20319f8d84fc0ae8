package playbooks

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/units"
)

func TestDiskBlock(t *testing.T) {
	p := mustParse(t, base+"disk: {throughput: 125MB/s, iops: 3000, sync_latency: 4ms}\n")
	want := diskmodel.Limits{Throughput: 125e6, IOPS: 3000, SyncLatency: 4 * time.Millisecond}
	if p.Disk != want {
		t.Fatalf("disk = %+v, want %+v", p.Disk, want)
	}
	if p := mustParse(t, base); !p.Disk.Zero() {
		t.Fatalf("no disk: block gave %+v; want none (the target's own disk)", p.Disk)
	}
	full := mustParse(t, base+"disk:\n  throughput: 1GB/s\n  iops: 16k\n  io_size: 1MiB\n  burst: 2s\n  sync_latency: 500us\n  sync_per_mib: 1ms\n")
	if d := full.Disk; d.Throughput != 1e9 || d.IOPS != 16000 || d.IOSize != 1<<20 || d.Burst != 2*time.Second ||
		d.SyncLatency != 500*time.Microsecond || d.SyncPerMiB != time.Millisecond {
		t.Fatalf("every field: %+v", d)
	}
}

func TestDiskProblemsSayWhere(t *testing.T) {
	for _, c := range []struct{ src, at, msg string }{
		{"disk: {throughput: 125MB}\n", "t.yaml:5:20: disk.throughput", `"125MB" has no time unit; write 125MB/s`},
		{"disk: {throughput: 125M/s}\n", "t.yaml:5:20: disk.throughput", `unknown unit "M"`},
		{"disk: {iops: -5}\n", "t.yaml:5:14: disk.iops", "negative"},
		{"disk: {sync_latency: 4}\n", "t.yaml:5:22: disk.sync_latency", `"4" has no unit; write 4s or 4ms`},
		{"disk: {io_size: 1KiB}\n", "t.yaml:5:17: disk.io_size", "out of range; want 4KiB..16MiB"},
		{"disk: {sync_latncy: 4ms}\n", "t.yaml:5:8: disk.sync_latncy", `unknown key (did you mean "sync_latency"?)`},
		{"disk: {burst: 1s}\n", "t.yaml:5:15: disk.burst", "no disk.throughput or disk.iops cap to burst above"},
		// A block that models nothing is refused, not silently left unmounted
		{"disk: {}\n", "t.yaml:5:7: disk", "models nothing"},
		{"disk: {throughput: 0/s}\n", "t.yaml:5:7: disk", "want at least one of throughput (100kB/s..100GB/s), iops"},
		{"disk:\n  io_size: 4KiB\n", "t.yaml:6:3: disk", "models nothing"},
		// A model whose probe before load its own arithmetic makes absurd is refused at
		// the field that costs most, with the value that would do
		{"disk: {sync_latency: 10s}\n", "t.yaml:5:22: disk.sync_latency", "take 3m30s a pass by its own arithmetic, more than the 20s a pass allows; want sync_latency at most 952.1ms, with the rest as given"},
		{"disk: {throughput: 100kB/s, sync_latency: 4ms}\n", "t.yaml:5:20: disk.throughput", "want throughput at least 950kB/s, with the rest as given"},
		{"disk: {iops: 100, sync_per_mib: 2s}\n", "t.yaml:5:33: disk.sync_per_mib", "want sync_per_mib at most"},
		{"disk: {throughput: 100kB/s, iops: 10, sync_per_mib: 1s}\n", "t.yaml:5:20: disk.throughput", "no one field brings it within the bound"},
		{"disk: {iops: 0}\nmatrix: {disk.throughput: [0/s, 125MB/s]}\n", "t.yaml:5:7: disk", "models nothing (no throughput or iops cap, no sync_latency or sync_per_mib; 0 means no cap), so the engine data would sit on the target's own disk; want at least one of throughput (100kB/s..100GB/s), iops (10..10M), sync_latency or sync_per_mib (up to 10s), e.g. disk: {throughput: 125MB/s, sync_latency: 4ms}, or volume: on a stack, or leave disk: out (in the run with disk.throughput=0/s)"},
	} {
		probs := problemsOf(t, base+c.src)
		wantProblem(t, probs, c.at, c.msg)
	}
}

// The plan shows the model and what its probe before load costs and is given up after,
// the longest of the runs when a matrix varies the model.
func TestPlanShowsDiskProbe(t *testing.T) {
	p := mustParse(t, base+"disk: {throughput: 125MB/s, sync_latency: 4ms}\nmatrix: {disk.sync_latency: [4ms, 100ms]}\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	slow := diskmodel.Limits{Throughput: 125e6, SyncLatency: 100 * time.Millisecond}
	pass, bound := diskmodel.ProbeTime(slow, diskmodel.ProbeOptions{}), diskmodel.ProbeBound(slow, diskmodel.ProbeOptions{Repeats: diskmodel.ProbePasses})
	want := "disk       model 125.0 MB/s, sync 4ms, with disk.sync_latency [4ms, 100ms]; its probe before load takes " +
		units.FormatDuration(pass.Round(time.Millisecond)) + " a pass by the model's arithmetic, 3 passes, given up after " + units.FormatDuration(bound.Round(100*time.Millisecond))
	if !strings.Contains(buf.String(), want) {
		t.Errorf("plan lacks %q:\n%s", want, buf.String())
	}
	if pass < 2*time.Second || pass > diskmodel.MaxProbePass {
		t.Errorf("a pass at 100ms a sync: %v", pass)
	}
}

// A value that did not parse is reported once: the block is not also said to model nothing.
func TestDiskNothingStaysQuietOnABadValue(t *testing.T) {
	if probs := problemsOf(t, base+"disk: {throughput: fast}\n"); len(probs) != 1 {
		t.Errorf("want the one problem of the value; got:\n%v", probs)
	}
}

func TestDiskFieldsAreMatrixAxes(t *testing.T) {
	p := mustParse(t, base+"disk: {sync_latency: 4ms}\nmatrix:\n  disk.throughput: [125MB/s, 1GB/s]\n  engine.snapshot_block: [1MiB, 16MiB]\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, r := range pl.Runs {
		if r.Playbook.Disk.SyncLatency != 4*time.Millisecond {
			t.Errorf("run %d lost the block's sync_latency: %+v", r.Index, r.Playbook.Disk)
		}
		got[r.Playbook.Disk.Throughput]++
	}
	if got[125e6] != 2 || got[1e9] != 2 {
		t.Fatalf("throughputs over the runs: %v; want 2 runs each of 125MB/s and 1GB/s", got)
	}
	probs := problemsOf(t, base+"matrix:\n  disk.throughput: [125MB/s, fast]\n")
	wantProblem(t, probs, "t.yaml:6:30: matrix.disk.throughput[1]", "not a byte rate")
}

// disk.volume names the stack's data volume; as a matrix axis its rounds interleave on one stack.
func TestDiskVolume(t *testing.T) {
	if p := mustParse(t, base+"disk: {volume: gp3-1000}\n"); p.DiskVolume != "gp3-1000" || !p.Disk.Zero() {
		t.Fatalf("disk.volume alone: volume %q, model %+v (want no model)", p.DiskVolume, p.Disk)
	}
	p := mustParse(t, base+"rounds: 2\nmatrix:\n  disk.volume: [gp3-125, gp3-1000]\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range pl.Runs {
		order = append(order, r.Playbook.DiskVolume)
	}
	if len(order) != 4 || order[0] == order[1] || order[1] == order[2] || order[2] == order[3] {
		t.Fatalf("volumes in run order %v; want gp3-125 and gp3-1000 interleaved, two rounds each", order)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	if !strings.Contains(buf.String(), "disk       engine data on the stack's data volume [gp3-125, gp3-1000] (disk.volume)") {
		t.Errorf("plan:\n%s", buf.String())
	}
	probs := problemsOf(t, base+"disk: {volume: ../etc}\n")
	wantProblem(t, probs, "t.yaml:5:16: disk.volume", "one of the stack's data volumes")
}

// A model written as FIELD=VALUE pairs gets the disk: block's rules and messages.
func TestDiskLimitsFromFlag(t *testing.T) {
	l, err := DiskLimits("sync_latency=4ms, throughput=1000MB/s")
	if err != nil || l.SyncLatency != 4*time.Millisecond || l.Throughput != 1000e6 {
		t.Fatalf("DiskLimits = %+v, %v", l, err)
	}
	for spec, want := range map[string]string{
		"throughput=7":          `throughput: "7" has no time unit`,
		"bogus=1":               `"bogus=1": want FIELD=VALUE with FIELD one of throughput, iops, io_size, burst, sync_latency, sync_per_mib`,
		"volume=gp3-125":        "want FIELD=VALUE",
		"sync_latency":          "want FIELD=VALUE",
		"burst=1s":              "disk.burst: 1s of burst, but no disk.throughput or disk.iops cap",
		"sync_latency=11s":      "sync_latency:",
		"throughput=125MB/s,,x": "want FIELD=VALUE",
	} {
		if _, err := DiskLimits(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DiskLimits(%q) = %v; want an error containing %q", spec, err, want)
		}
	}
}
