package history

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/stats"
)

// benchRuns writes n run folders (testdata/run, 20 runs per engine version) under a temp folder.
func benchRuns(b *testing.B, n int) string {
	root := b.TempDir()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		v := i / 20
		base := 30.0 + float64(i%7)
		if v >= n/40 {
			base += 25
		}
		id := fmt.Sprintf("2026%04d-snapshots", i)
		writeRun(b, filepath.Join(root, id), id, engineVersion(fmt.Sprintf("v%d", v+1), start.Add(time.Duration(i)*time.Hour)),
			[]float64{base, base + 2, base - 1})
	}
	return root
}

// BenchmarkImport1000 rebuilds an index from 1,000 run folders (each a real run's manifest and
// summary, every figure of sweep.Metrics): the bound is 10 s.
func BenchmarkImport1000(b *testing.B) {
	root := benchRuns(b, 1000)
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		rep, err := Rebuild(context.Background(), filepath.Join(dir, fmt.Sprintf("index-%d.db", i)), []string{root}, nil)
		if err != nil || len(rep.Added) != 1000 {
			b.Fatalf("%v, %d added", err, len(rep.Added))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/1000, "ms/run")
}

// BenchmarkTrend1000 is `rig history trend snapshot.take` over an index of 1,000 runs in 50
// engine versions: the bound is 1 s.
func BenchmarkTrend1000(b *testing.B) {
	root := benchRuns(b, 1000)
	x, err := Open(filepath.Join(b.TempDir(), DefaultFile))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if _, err := Import(context.Background(), x, root, ImportOptions{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		t, err := x.Trend(context.Background(), TrendOptions{Figure: "snapshot.take", EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}})
		if err != nil || len(t.Versions) != 50 || len(t.Changes) == 0 {
			b.Fatalf("%v: %d versions, %d changes", err, len(t.Versions), len(t.Changes))
		}
	}
}

// BenchmarkTrend1000PerRun is the same trend with one point per run (1,000 points).
func BenchmarkTrend1000PerRun(b *testing.B) {
	root := benchRuns(b, 1000)
	x, err := Open(filepath.Join(b.TempDir(), DefaultFile))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if _, err := Import(context.Background(), x, root, ImportOptions{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := x.Trend(context.Background(), TrendOptions{Figure: "snapshot.take", PerRun: true, EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}}); err != nil {
			b.Fatal(err)
		}
	}
}
