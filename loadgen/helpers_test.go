package loadgen

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rig-dev/rig/loadgen/loadgentest"
	"github.com/rig-dev/rig/rundir"
)

func startCluster(t *testing.T, n int) *loadgentest.Cluster {
	t.Helper()
	c, err := loadgentest.Start(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// readSorted reads a probes file and sorts it by intended time.
func readSorted(t *testing.T, path string) []rundir.Probe {
	t.Helper()
	ps, err := rundir.ReadProbes(path)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].IntendedNs < ps[j].IntendedNs })
	return ps
}

// checkSchedule asserts that the records are exactly probes 0..n-1 of an open-loop schedule at
// rate: probe i intended at start + i/rate, each once, whatever happened on the wire.
func checkSchedule(t *testing.T, ps []rundir.Probe, rate float64) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatal("no probes recorded")
	}
	period := 1e9 / rate
	start := ps[0].IntendedNs
	for i, p := range ps {
		want := start + int64(float64(i)*period)
		if d := p.IntendedNs - want; d < -1 || d > 1 { // the 1 ns is float rounding of the origin
			t.Fatalf("probe %d intended at %d, want start + i/rate = %d (off by %d ns): the schedule is not open loop", i, p.IntendedNs, want, d)
		}
	}
}

func readStats(t *testing.T, dir string) rundir.ProbeStats {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rundir.StatsFile))
	if err != nil {
		t.Fatal(err)
	}
	var st rundir.ProbeStats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// readHlog reads an interval log with hdrhistogram-go's own log reader.
func readHlog(t *testing.T, path string) []*hdr.Histogram {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := hdr.NewHistogramLogReader(f)
	var out []*hdr.Histogram
	for {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if h == nil {
			return out
		}
		out = append(out, h)
	}
}

func checkAccounting(t *testing.T, st rundir.ProbeStats) {
	t.Helper()
	if st.Answered+st.Lost != st.Scheduled {
		t.Errorf("answered %d + lost %d != scheduled %d", st.Answered, st.Lost, st.Scheduled)
	}
	if st.Phase != "done" {
		t.Errorf("phase %q after the run, want done", st.Phase)
	}
	if st.Filled != 0 {
		t.Errorf("probes filled %d: they must cross nothing", st.Filled)
	}
}

// waitNoneLost waits for run to end and fails the test unless its accounting holds and every probe
// was answered; why says what should have saved them.
func waitNoneLost(t *testing.T, run *ProbeRun, why string) rundir.ProbeStats {
	t.Helper()
	st, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if st.Lost != 0 {
		t.Fatalf("lost %d probes: %s", st.Lost, why)
	}
	return st
}
