package loadgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/tools"
)

// writeSyntheticHlog writes three 1 s intervals through the same code the probe stream uses:
// 100 x 1 ms, 200 x 2 ms, then 99 x 3 ms and one 50 ms.
func writeSyntheticHlog(t *testing.T, path string) (origin int64) {
	t.Helper()
	origin = time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC).UnixNano()
	l, err := createIntervalLog(path, origin, int64(time.Second), "synthetic")
	if err != nil {
		t.Fatal(err)
	}
	add := func(k int64, v time.Duration, n int) {
		for range n {
			l.scheduled(k)
			l.answered(k, int64(v))
		}
	}
	add(0, time.Millisecond, 100)
	l.advance(int64(500 * time.Millisecond)) // interval 0 is not complete yet: nothing written
	if fi, _ := os.Stat(path); fi == nil {
		t.Fatal("no file")
	}
	add(1, 2*time.Millisecond, 200)
	add(2, 3*time.Millisecond, 99)
	add(2, 50*time.Millisecond, 1)
	l.scheduled(2)
	l.lost(2) // a lost probe: resolved, no value
	l.advance(int64(2 * time.Second))
	if err := l.close(int64(3*time.Second), "answered=400 lost=1"); err != nil {
		t.Fatal(err)
	}
	return origin
}

func TestIntervalLogReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.hlog")
	origin := writeSyntheticHlog(t, path)
	hs := readHlog(t, path)
	if len(hs) != 3 {
		t.Fatalf("%d intervals, want 3", len(hs))
	}
	for k, want := range []struct {
		n   int64
		max time.Duration
	}{{100, time.Millisecond}, {200, 2 * time.Millisecond}, {100, 50 * time.Millisecond}} {
		h := hs[k]
		if h.TotalCount() != want.n || !h.ValuesAreEquivalent(h.Max(), int64(want.max)) {
			t.Errorf("interval %d: %d values, max %d, want %d, %v", k, h.TotalCount(), h.Max(), want.n, want.max)
		}
		if start := h.StartTimeMs(); start != origin/1e6+int64(k)*1000 {
			t.Errorf("interval %d starts at %d ms, want %d", k, start, origin/1e6+int64(k)*1000)
		}
	}
}

// HdrHistogram's standard log processor (Java) reads the log (tools.Require: skipped where it
// is not installed, failed under CI=true).
func TestIntervalLogReadByHistogramLogProcessor(t *testing.T) {
	jar := tools.Require(t, "hdrhistogram.jar")
	java := tools.Require(t, "java")
	dir := t.TempDir()
	path := filepath.Join(dir, "x.hlog")
	writeSyntheticHlog(t, path)
	out, err := exec.CommandContext(t.Context(), java, "-cp", jar, "org.HdrHistogram.HistogramLogProcessor",
		"-i", path, "-o", filepath.Join(dir, "proc")).CombinedOutput()
	if err != nil {
		t.Fatalf("HistogramLogProcessor: %v\n%s", err, out)
	}
	intervals, err := os.ReadFile(filepath.Join(dir, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	var counts []string
	for _, line := range strings.Split(string(intervals), "\n") {
		if m := regexp.MustCompile(`I:(\d+)`).FindStringSubmatch(line); m != nil {
			counts = append(counts, m[1])
		}
	}
	if strings.Join(counts, ",") != "100,200,100" {
		t.Errorf("processor saw interval counts %v, want 100,200,100\n%s", counts, intervals)
	}
	hgrm, err := os.ReadFile(filepath.Join(dir, "proc.hgrm"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Max\s*=\s*([\d.]+), Total count\s*=\s*(\d+)`).FindStringSubmatch(string(hgrm))
	if m == nil {
		t.Fatalf("no totals in\n%s", hgrm)
	}
	maxMs, _ := strconv.ParseFloat(m[1], 64)
	if m[2] != "400" || maxMs < 49.9 || maxMs > 50.1 {
		t.Errorf("processor totals: max %s ms, count %s; want 50 ms (ns logged, reported in ms), 400", m[1], m[2])
	}
}
