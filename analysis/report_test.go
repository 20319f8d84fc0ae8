package analysis

import (
	"encoding/json"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/linkproxy"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteOutputs(t *testing.T) {
	dir := followerRestartRun(t)
	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}

	// summary.json: the contract's field names, read the way another tool would.
	var raw map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	get := func(path ...any) any {
		var v any = raw
		for _, p := range path {
			switch k := p.(type) {
			case string:
				m, _ := v.(map[string]any)
				v = m[k]
			case int:
				a, _ := v.([]any)
				if k >= len(a) {
					return nil
				}
				v = a[k]
			}
		}
		return v
	}
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"status"}, "interrupted"},
		{[]any{"nodes", "node-2", "state_hash"}, "h2"},
		{[]any{"nodes", "node-1", "phase"}, "restoring"},
		{[]any{"state_hash_agree"}, false},
		{[]any{"probes", "n"}, 5797.0},
		{[]any{"probes", "lost"}, 3.0},
		{[]any{"probes", "p50_us"}, 1500.0},
		{[]any{"probes", "p99_us"}, 3000.0},
		{[]any{"probes", "p999_us"}, 3000.0},
		{[]any{"probes", "max_us"}, 450000.0},
		{[]any{"snapshots", 0, "at_s"}, 10.0},
		{[]any{"snapshots", 0, "index"}, 500.0},
		{[]any{"snapshots", 0, "take_ms", "node-1"}, 180.0},
		{[]any{"snapshots", 0, "client_pause_ms"}, 450.0},
		{[]any{"snapshots", 1, "client_pause_ms"}, 10000.0},
		{[]any{"restarts", 0, "node"}, "node-2"},
		{[]any{"restarts", 0, "launch_to_ready_ms"}, 1000.0},
		{[]any{"restarts", 0, "phases_ms", "catching-up"}, 500.0},
		{[]any{"restarts", 0, "windows", "all_up", "n"}, 1549.0},
		{[]any{"restarts", 0, "windows", "one_down", "max_us"}, 2500.0},
		{[]any{"restarts", 0, "windows", "rejoining", "lost"}, 1.0},
		{[]any{"restarts", 0, "windows", "rejoining", "p99_us"}, nil}, // n = 99: omitted
		{[]any{"restarts", 1, "ready_s"}, nil},
		{[]any{"restarts", 1, "launch_to_ready_ms"}, nil},
		{[]any{"restarts", 1, "windows", "rejoining", "open"}, true},
	} {
		if got := get(c.path...); got != c.want {
			t.Errorf("summary.json %v = %v, want %v", c.path, got, c.want)
		}
	}
	if _, ok := get("restarts", 1).(map[string]any)["ready_s"]; !ok {
		t.Error("ready_s must be present as null when the node never became ready")
	}

	// Every plot is a PNG that decodes, at the size asked for.
	if len(s.Plots) != 3 {
		t.Errorf("plots: %v", s.Plots)
	}
	for _, rel := range s.Plots {
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if w := img.Bounds().Dx(); w != 1152 {
			t.Errorf("%s: %d px wide, want 1152", rel, w)
		}
	}

	report, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(report)
	for _, want := range []string{
		"# Run 20250301-120000-follower-restart — follower-restart (interrupted)",
		"3 server node(s) · 2 CPUs · load average 1.00 at start, 3.50 at end (1 min) · load 60.5 s, warm-up 2.0 s · 99.2 probes/s measured (100/s planned) · book 5M orders · sync level 2 · snapshot block 16 MiB · encode ×8",
		"| # | at | index | take node-0 | take node-1 | take node-2 | client pause | pause window | normal p50 |",
		"| 1 | 10.0 s | 500 | 150 ms | 180 ms | 200 ms | 450 ms | 10.0 s – 11.5 s | 1.00 ms |",
		"| 2 | 50.0 s | 900 | 300 ms | 250 ms | 320 ms | ≥ 10.0 s (1 lost) | 50.0 s – 51.6 s | 1.00 ms |",
		"Normal latency (post-warm-up probes outside every snapshot and fault window): n = 2248, lost 0, p50 1.00 ms, p99 1.00 ms, max 7.00 ms. Left out: snapshot [9.0 s – 11.5 s], kill node-2 [19.0 s – 31.0 s], kill node-1 [39.0 s – 60.5 s], snapshot [49.0 s – 51.6 s]",
		"| 1 | node-2 | 20.0 s | 30.0 s (10.0 s down) | 200 ms | 200 ms | — | 100 ms | 500 ms | 1.00 s |",
		"| 2 | node-1 | 40.0 s | 45.0 s (5.00 s down) | 1.00 s | ≥ 15.0 s (open) | — | — | — | never ready (still restoring at the end) |",
		"| all up | 2.0 s – 20.0 s, less 2.50 s of snapshot windows | 1549 | 1.00 ms | 1.00 ms | 1.00 ms | 1.00 ms | 7.00 ms | 0 |",
		"| #1 node-2 one down | 20.0 s – 30.0 s (10.0 s) | 999 | 2.00 ms | 2.00 ms | 2.00 ms | n/a (n<1000) | 2.50 ms | 1 |",
		"| #1 node-2 rejoining | 30.0 s – 31.0 s (1.00 s) | 99 | 3.00 ms | 3.00 ms | n/a (n<100) | n/a (n<1000) | 4.00 ms | 1 |",
		"| #2 node-1 rejoining¹ | 45.0 s – end (15.5 s, open) | 1499 | 1.50 ms | 1.50 ms | 1.50 ms | 1.50 ms | 1.50 ms | 1 |",
		"| 5797 | 1.50 ms | 2.00 ms | 3.00 ms | 3.00 ms | 450 ms | 3 |",
		"200 probe(s) sent before the warm-up ended (2.0 s) are excluded",
		"| node-2 | follower | ready | 999 | 41 | `h2` | state at 999 |",
		"Final state hashes agree on every node: not checked — hashes of different log positions (node-2 at 999; node-0, node-1 at 1000).",
		"Leader: node-0 at load start, no leader change during the load.",
		"- load average 3.50 at end exceeds 2 CPUs",
		"![Probe latency over time, with event markers](plots/latency.png)",
		"![Restart phases from relaunch](plots/restarts.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report.md:\n%s", md)
	}

	// `rig report` path: a Summary read back from summary.json has no cached inputs; WriteOutputs
	// reads the folder again and rewrites the same files.
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "plots"))
	if err := WriteOutputs(dir, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PlotLatency)); err != nil {
		t.Errorf("plots not redrawn: %v", err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if string(again) != md {
		t.Error("report.md differs when rewritten from summary.json")
	}
}

// The disk and the links a run had are in its report, asked beside read back, and a volume
// that fell short says so.
func TestReportShowsDiskAndLinksReadBack(t *testing.T) {
	s := &Summary{RunID: "r", Status: "ok",
		DiskModels: map[string]diskmodel.Record{"node-0": {Asked: diskmodel.Limits{Throughput: 125e6, SyncLatency: 4 * time.Millisecond},
			Achieved: diskmodel.Achieved{ThroughputBps: 126.7e6, IOPS: 17466, SyncLatency: 4100 * time.Microsecond}, LoadAvg: []float64{1.5, 1, 1}}},
		DiskChecks: map[string]disk.VolumeCheck{"node-1": {Volume: "gp3-1000", Provisioned: disk.Provisioned{Type: "gp3", ThroughputMiBps: 1000, IOPS: 6000},
			Measured: disk.Measured{SeqWriteMBps: 430, RandWriteIOPS: 6100, SyncMeanUs: 900, SyncP99Us: 2100, LoadAvg: 0.4}, Compared: true,
			Error: "throughput 1048.6 MB/s provisioned, 430.0 MB/s measured (41 %)"}},
		LinkRTTs: []linkproxy.PairProbe{{From: "node-0", To: "node-1", Probe: linkproxy.Probe{Set: 4 * time.Millisecond,
			Min: 4140 * time.Microsecond, Median: 4160 * time.Microsecond, Max: 5240 * time.Microsecond}}},
		LinkRTTsLoad: []linkproxy.PairProbe{{From: "node-0", To: "node-1", Probe: linkproxy.Probe{Set: 4 * time.Millisecond,
			Min: 4200 * time.Microsecond, Median: 4290 * time.Microsecond, Max: 4780 * time.Microsecond}}},
	}
	md := renderReport(s)
	for _, want := range []string{
		"## Disk and links, asked and read back",
		"| node-0 | 125.0 MB/s, sync 4ms | 126.7 MB/s | 17466 | 4.1ms | 0s | through the model | 1.50 |",
		"| node-1 | gp3-1000 | gp3 1000 MiB/s, 6000 IOPS | 430 MB/s | 6100 | 900 / 2100 µs | **short**: throughput 1048.6 MB/s provisioned",
		"| node-0 | node-1 | 4ms | 4.16ms [4.14ms–5.24ms] | 4.29ms [4.2ms–4.78ms] |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	s.Placement = &Placement{Stack: "multi-az", AZ: map[string]string{"node-0": "us-east-1a", "node-1": "us-east-1b"}}
	if md := renderReport(s); !strings.Contains(md, "Placement: stack placement multi-az · node-0 in us-east-1a · node-1 in us-east-1b.") {
		t.Errorf("report lacks the stack's placement:\n%s", md)
	}
	s.Placement = &Placement{Zones: linkproxy.Placement{Zones: map[string][]string{"a": {"node-0", "client-0"}, "b": {"node-1"}},
		Between: linkproxy.Shape{Delay: 2 * time.Millisecond}}}
	if md := renderReport(s); !strings.Contains(md, "Placement: zone a: node-0, client-0 · zone b: node-1 · between zones 2ms each way.") {
		t.Errorf("report lacks the zones:\n%s", md)
	}
	// A model mounted with passthrough says the kernel made the writes, and what its flushed
	// bytes then are.
	s.DiskModels["node-2"] = diskmodel.Record{Asked: diskmodel.Limits{SyncLatency: 2 * time.Millisecond},
		Achieved: diskmodel.Achieved{ThroughputBps: 900e6, IOPS: 90000, SyncLatency: 2100 * time.Microsecond, Passthrough: true}}
	md = renderReport(s)
	for _, want := range []string{"| node-2 | sync 2ms | 900.0 MB/s | 90000 | 2.1ms | 0s | by the kernel (passthrough) |", "the file's growth since its previous one"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if md := renderReport(&Summary{RunID: "r", Status: "ok"}); strings.Contains(md, "Disk and links") {
		t.Error("a run with no disk model, volume check or routed links has the section")
	}
}
