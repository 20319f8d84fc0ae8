package snapshot_test

import (
	"bytes"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/bench"
	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/snapshot"
)

// Take and restore per order. 5M is only built when selected, e.g.
// go test -run x -bench 'Take/orders=5M' ./engine/snapshot. Besides wall time each reports
// cpu-ns/order (process CPU time, all threads), which the shared machine's load inflates less.

var benchSizes = []int{100_000, 1_000_000, 5_000_000}

type drain struct{}

func (drain) Write(p []byte) (int, error) { return len(p), nil }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func preload(b *testing.B, n int) *book.Book {
	bk := book.New()
	if err := bench.Preload(bk, n, 8, 1000, 1); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	return bk
}

func BenchmarkTake(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("orders="+bench.FormatCount(n), func(b *testing.B) {
			bk := preload(b, n)
			for _, th := range []int{1, 2} {
				b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
					opts := snapshot.Options{Threads: th}
					b.ReportAllocs()
					c0 := cpuNow()
					for b.Loop() {
						if _, err := snapshot.Write(drain{}, bk, snapshot.Meta{}, opts); err != nil {
							b.Fatal(err)
						}
					}
					per := float64(b.N) * float64(n)
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/order")
					b.ReportMetric(float64((cpuNow()-c0).Nanoseconds())/per, "cpu-ns/order")
				})
			}
		})
	}
}

func BenchmarkRestore(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("orders="+bench.FormatCount(n), func(b *testing.B) {
			var buf bytes.Buffer
			if _, err := snapshot.Write(&buf, preload(b, n), snapshot.Meta{}, snapshot.Options{}); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			runtime.GC()
			var cpu time.Duration
			for b.Loop() {
				c0 := cpuNow()
				rb, _, err := snapshot.Read(bytes.NewReader(data))
				cpu += cpuNow() - c0
				if err != nil || rb.Orders() != n {
					b.Fatal(err)
				}
				b.StopTimer()
				rb = nil
				runtime.GC()
				b.StartTimer()
			}
			per := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/order")
			b.ReportMetric(float64(cpu.Nanoseconds())/per, "cpu-ns/order")
		})
	}
}
