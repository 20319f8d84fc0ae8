package analysis

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// benchRun is the follower-restart fixture's timeline with n probes spread over its 60 s of load
// (300K is 5,000/s for a minute), latencies log-normal around 1 ms.
func benchRun(b *testing.B, n int) string {
	dir := followerRestartRun(b)
	rng := rand.New(rand.NewPCG(1, 2))
	ps := make([]rundir.Probe, n)
	step := int64(60*time.Second) / int64(n)
	for i := range ps {
		lat := int64(float64(time.Millisecond) * (0.5 + rng.ExpFloat64()))
		out := rundir.ProbeOK
		if rng.IntN(100_000) == 0 {
			out = rundir.ProbeLost
		}
		ps[i] = rundir.Probe{IntendedNs: t0.UnixNano() + int64(i)*step, LatencyNs: lat, Outcome: out}
	}
	f := &fixture{t: b, dir: dir}
	f.probes(ps)
	return dir
}

func BenchmarkAnalyze(b *testing.B) {
	for _, n := range []int{30_000, 300_000} {
		dir := benchRun(b, n)
		b.Run(fmt.Sprintf("probes=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Analyze(dir); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/probe")
		})
	}
}

// BenchmarkPlots draws the three PNGs from analysed data: the latency plot is downsampled to at
// most maxBuckets slices, so 10× the probes should cost far less than 10× the time.
func BenchmarkPlots(b *testing.B) {
	for _, n := range []int{30_000, 300_000} {
		dir := benchRun(b, n)
		s, err := Analyze(dir)
		if err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(b.TempDir(), "out")
		os.MkdirAll(out, 0o755)
		b.Run(fmt.Sprintf("probes=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := writePlots(out, s.data, s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/probe")
		})
	}
}

// BenchmarkAnalyzeInside: the same run with an engine recording on every server, a JFR-like
// stream of spans over the 60 s (an execution sample every 1 ms per node, a park every 2 ms, a
// force every 20 ms): what reading inside.ndjson and the window tables add to Analyze.
func BenchmarkAnalyzeInside(b *testing.B) {
	dir := benchRun(b, 30_000)
	for _, node := range []string{"node-0", "node-1", "node-2"} {
		w, err := rundir.CreateInside(filepath.Join(dir, node, rundir.InsideFile))
		if err != nil {
			b.Fatal(err)
		}
		for ms := int64(0); ms < 60_000; ms++ {
			at := t0.UnixNano() + ms*int64(time.Millisecond)
			w.Write(rundir.InsideSpan{AtNs: at, DurNs: int64(time.Millisecond), Kind: rundir.InsideCPU, Source: "jfr", Thread: "service", Detail: "Book.match"})
			if ms%2 == 0 {
				w.Write(rundir.InsideSpan{AtNs: at, DurNs: int64(time.Millisecond), Kind: rundir.InsidePark, Source: "jfr", Thread: "idle"})
			}
			if ms%20 == 0 {
				w.Write(rundir.InsideSpan{AtNs: at, DurNs: int64(2 * time.Millisecond), Kind: rundir.InsideForce, Source: "jfr", Thread: "log", Role: rundir.RoleLog, File: "raft/log"})
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := Analyze(dir); err != nil {
			b.Fatal(err)
		}
	}
}
