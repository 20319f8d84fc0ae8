package analysis

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/rundir"
)

// countPauseLines counts the lines of a GC log that close a pause, by a rule independent of the
// parser's: a [gc] or [gc,phases] line with "Pause" that ends in a duration in ms.
func countPauseLines(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if (strings.Contains(l, "][gc ") || strings.Contains(l, "][gc,phases")) && strings.Contains(l, " Pause ") && strings.HasSuffix(l, "ms") {
			n++
		}
	}
	return n
}

func TestParseGCLogG1AndZGC(t *testing.T) {
	for _, c := range []struct {
		file    string
		n       int
		longest float64
	}{{"g1.log", 17, 1}, {"zgc.log", 31, 0}} {
		path := filepath.Join("testdata", "gc", c.file)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := ParseGCLog(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != c.n || len(ps) != countPauseLines(t, path) {
			t.Errorf("%s: %d pauses, want %d", c.file, len(ps), c.n)
		}
		var longest float64
		for _, p := range ps {
			if p.End.IsZero() || !strings.HasPrefix(p.What, "Pause ") || p.Ms <= 0 {
				t.Fatalf("%s: pause %+v", c.file, p)
			}
			longest = max(longest, p.Ms)
		}
		if longest < c.longest {
			t.Errorf("%s: longest pause %.3f ms, want at least %.0f ms (G1's young pauses in a 24 MB heap)", c.file, longest, c.longest)
		}
	}
}

// TestParseGCLogFromRealJVM runs a small Java program that churns a small heap and parses the GC
// log the JVM wrote.
func TestParseGCLogFromRealJVM(t *testing.T) {
	tools.Require(t, "java")
	log := filepath.Join(t.TempDir(), "gc.log")
	cmd := exec.Command("java", "-Xmx24m", "-XX:+UseSerialGC", "-Xlog:gc*:file="+log+":time,uptime,level,tags", "testdata/gc/GcChurn.java")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("java: %v\n%s", err, out)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := ParseGCLog(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 || len(ps) != countPauseLines(t, log) {
		t.Fatalf("%d pauses parsed, %d pause lines in the log", len(ps), countPauseLines(t, log))
	}
}

// TestSpikeQuotesEngineLogAndGC: the slowest probe, with no action near it, is reported with the
// engine's log lines and the GC pause around it; the GC table counts the measured window only.
func TestSpikeQuotesEngineLogAndGC(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 10_000; ms += 10 {
		lat := int64(time.Millisecond)
		if ms == 5000 {
			lat = 80 * int64(time.Millisecond)
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: lat, Outcome: rundir.ProbeOK})
	}
	f.probes(ps)
	f.run(10_000, "load_end")
	f.run(10_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	stamp := func(ms int64) string { return at(ms).Format("2006-01-02T15:04:05.000-0700") }
	os.WriteFile(filepath.Join(f.dir, "node-0", "engine.log"), []byte(
		`{"time":"`+at(4000).Format(time.RFC3339Nano)+`","level":"INFO","msg":"too early"}`+"\n"+
			`{"time":"`+at(5030).Format(time.RFC3339Nano)+`","level":"WARN","msg":"slow fsync"}`+"\n"+
			"no timestamp here\n"), 0o644)
	os.WriteFile(filepath.Join(f.dir, "node-0", "gc-4242.log"), []byte(
		"["+stamp(500)+"][0.5s][info][gc          ] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 6M->3M(24M) 3.000ms\n"+
			"["+stamp(5040)+"][5.0s][info][gc,start    ] GC(1) Pause Young (Normal) (G1 Evacuation Pause)\n"+
			"["+stamp(5040)+"][5.0s][info][gc          ] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 6M->3M(24M) 25.500ms\n"), 0o644)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.GCPauses) != 1 || s.GCPauses[0].Count != 1 || s.GCPauses[0].LongestMs != 25.5 || !s.GCPauses[0].Windowed {
		t.Errorf("gc pauses %+v, want node-0 with the one pause after warm-up", s.GCPauses)
	}
	sp := s.Spike
	if sp == nil {
		t.Fatal("no spike reported for an 80 ms probe among 1 ms ones")
	}
	if sp.AtS != 5 || sp.LatencyMs != 80 {
		t.Errorf("spike at %v s, %v ms", sp.AtS, sp.LatencyMs)
	}
	if l := sp.LogLines["node-0"]; len(l) != 1 || !strings.Contains(l[0], "slow fsync") {
		t.Errorf("log lines %q, want the slow fsync line only", sp.LogLines)
	}
	if len(sp.GC) != 1 || !strings.Contains(sp.GC[0], "25.500 ms") {
		t.Errorf("gc at the spike %q", sp.GC)
	}
	rep := renderReport(s)
	if !strings.Contains(rep, "### Unexplained spike") || !strings.Contains(rep, "slow fsync") || !strings.Contains(rep, "### GC pauses") {
		t.Errorf("report lacks the telemetry sections:\n%s", rep)
	}

	// An action at the spike explains it: nothing quoted.
	f2 := newFixture(t)
	f2.run(0, "load_start")
	f2.run(1000, "warmup_end")
	f2.probes(ps)
	f2.action(4990, "snapshot", "", nil)
	f2.run(10_000, "load_end")
	s, err = Analyze(f2.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Spike != nil {
		t.Errorf("spike %+v reported although a snapshot was under way", s.Spike)
	}
}
