package runq

import (
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkProgramCost prices the program, per run (the kernel's run_time_ns / run_cnt) and
// in runs per second, over b.N windows of 200 ms:
//
//   - idle: this machine's own events, nothing tracked;
//   - pingpong: two threads on one CPU hand a byte back and forth through pipes, the busiest
//     switching there is (untracked: every run returns at the tracked check; tracked: every
//     run does the rest, though the waits are too short to report);
//   - contention: four threads spin on one CPU, three tracked, so waits are reported;
//   - sleepers: 32 threads on one CPU, half tracked, each sleeping 2 ms over and over, as a
//     pool of an engine's threads: many TIDs, each woken and switched 500 times a second.
//
// Three tracers are attached at once, so all see the same events: a program that returns at
// once (the floor: the kernel's statistics and the call), then this package's twice, as the
// second finds the task's fields in a warm cache.
func BenchmarkProgramCost(b *testing.B) {
	for _, sc := range []struct {
		name    string
		workers int
		tracked int
	}{
		{name: "idle"},
		{name: "pingpong-untracked", workers: 2},
		{name: "pingpong-tracked", workers: 2, tracked: 2},
		{name: "contention", workers: 4, tracked: 3},
		{name: "sleepers", workers: 32, tracked: 16},
	} {
		b.Run(sc.name, func(b *testing.B) {
			labels := []string{"empty", "slots", "slots2"}
			type tracer struct {
				track func(int) error
				stats func() ([]ProgStats, error)
				drain func() error
			}
			trs := make([]tracer, len(labels))
			for i, l := range labels {
				if l == "empty" {
					o := openEmptyTracer(b)
					stats := func() ([]ProgStats, error) {
						st, err := o.Stats()
						return []ProgStats{st}, err
					}
					trs[i] = tracer{func(int) error { return nil }, stats, func() error { return nil }}
					continue
				}
				tr := openTracer(b, Options{})
				trs[i] = tracer{func(tid int) error { return tr.Track(tid) }, tr.Stats,
					func() error { return tr.Drain(func(Wait) {}) }}
			}
			if sc.workers > 0 {
				var stop atomic.Bool
				var ws []*worker
				switch {
				case strings.HasPrefix(sc.name, "pingpong"):
					ws = startPingPong(b, contendedCPU(b), &stop)
				case sc.name == "sleepers":
					ws = startWorkers(b, sc.workers, contendedCPU(b), &stop, sleepBriefly)
				default:
					ws = startWorkers(b, sc.workers, contendedCPU(b), &stop, spin)
				}
				for _, tr := range trs {
					for _, w := range ws[:sc.tracked] {
						if err := tr.track(w.tid); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.Cleanup(func() { stopWorkers(ws, &stop); releaseWorkers(ws) })
			}
			stats, err := EnableStats()
			if err != nil {
				b.Fatal(err)
			}
			defer stats.Close()
			snap := func() [][]ProgStats {
				out := make([][]ProgStats, len(trs))
				for i, tr := range trs {
					if out[i], err = tr.stats(); err != nil {
						b.Fatal(err)
					}
				}
				return out
			}
			before := snap()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				time.Sleep(200 * time.Millisecond)
				for _, tr := range trs {
					if err := tr.drain(); err != nil {
						b.Fatal(err)
					}
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			after := snap()
			for i := range trs {
				for j, x := range after[i] {
					runs := x.RunCount - before[i][j].RunCount
					ns := float64(x.RunTime-before[i][j].RunTime) / float64(max(runs, 1))
					b.ReportMetric(ns, labels[i]+"-"+strings.TrimPrefix(x.Tracepoint, "sched_")+"-ns/run")
					if i == 0 {
						b.ReportMetric(float64(runs)/elapsed.Seconds(), strings.TrimPrefix(x.Tracepoint, "sched_")+"-runs/s")
					}
				}
			}
			la, _ := os.ReadFile("/proc/loadavg")
			b.Logf("load average %s", strings.TrimSpace(string(la)))
		})
	}
}

// startPingPong starts two threads pinned to cpu that pass a byte back and forth through two
// pipes until stopped: each pass is a wake-up and a switch.
func startPingPong(b *testing.B, cpu int, stop *atomic.Bool) []*worker {
	var ab, ba [2]int
	if err := unix.Pipe2(ab[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	if err := unix.Pipe2(ba[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	pass := func(in, out int, first bool) func(*atomic.Bool) {
		return func(stop *atomic.Bool) {
			buf := []byte{0}
			if first {
				_, _ = unix.Write(out, buf)
			}
			for {
				if _, err := unix.Read(in, buf); err != nil || buf[0] == 1 {
					_, _ = unix.Write(out, []byte{1}) // pass the stop on
					return
				}
				if stop.Load() {
					buf[0] = 1
				}
				_, _ = unix.Write(out, buf)
			}
		}
	}
	ws := append(startWorkers(b, 1, cpu, stop, pass(ba[0], ab[1], true)),
		startWorkers(b, 1, cpu, stop, pass(ab[0], ba[1], false))...)
	b.Cleanup(func() {
		for _, fd := range []int{ab[0], ab[1], ba[0], ba[1]} {
			unix.Close(fd)
		}
	})
	return ws
}

// BenchmarkRoundTrip prices the program without the kernel's statistics (which add clock
// reads of their own): one op is a round trip between two threads on one CPU through pipes
// (two wake-ups, two switches), with no tracer attached, or one with nothing tracked, or one
// tracking both threads.
func BenchmarkRoundTrip(b *testing.B) {
	for _, name := range []string{"none", "slots", "slots-tracked"} {
		b.Run(name, func(b *testing.B) {
			track := func(int) error { return nil }
			switch strings.TrimSuffix(name, "-tracked") {
			case "slots":
				tr := openTracer(b, Options{})
				track = func(tid int) error { return tr.Track(tid) }
			}
			if !strings.HasSuffix(name, "-tracked") {
				track = func(int) error { return nil }
			}
			var ab, ba [2]int
			if err := unix.Pipe2(ab[:], unix.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
			if err := unix.Pipe2(ba[:], unix.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
			defer func() {
				for _, fd := range []int{ab[0], ab[1], ba[0], ba[1]} {
					unix.Close(fd)
				}
			}()
			cpu := contendedCPU(b)
			var stop atomic.Bool
			echo := func(stop *atomic.Bool) {
				buf := []byte{0}
				for {
					if _, err := unix.Read(ab[0], buf); err != nil || buf[0] == 1 {
						return
					}
					_, _ = unix.Write(ba[1], buf)
				}
			}
			ws := startWorkers(b, 1, cpu, &stop, echo)
			done, start, tidc := make(chan struct{}), make(chan struct{}), make(chan int)
			go func() {
				runtime.LockOSThread() // never unlocked: the pinned thread exits
				var set unix.CPUSet
				set.Set(cpu)
				_ = unix.SchedSetaffinity(0, &set)
				tidc <- unix.Gettid()
				<-start
				buf := []byte{0}
				for range b.N {
					_, _ = unix.Write(ab[1], buf)
					_, _ = unix.Read(ba[0], buf)
				}
				close(done)
			}()
			for _, tid := range []int{<-tidc, ws[0].tid} {
				if err := track(tid); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			close(start)
			<-done
			b.StopTimer()
			_, _ = unix.Write(ab[1], []byte{1})
			<-ws[0].done
			releaseWorkers(ws)
			la, _ := os.ReadFile("/proc/loadavg")
			b.Logf("load average %s", strings.TrimSpace(string(la)))
		})
	}
}

// sleepBriefly sleeps 2 ms over and over (a real nanosleep, off the run queue).
func sleepBriefly(stop *atomic.Bool) {
	for !stop.Load() {
		ts := unix.NsecToTimespec(2e6)
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	}
}
