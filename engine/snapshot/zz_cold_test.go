package snapshot_test

import (
	"bufio"
	"os"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/bench"
	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/snapshot"
)

func TestColdMake(t *testing.T) {
	if os.Getenv("COLD") != "make" {
		t.Skip()
	}
	b := book.New()
	bench.Preload(b, 5_000_000, 8, 1000, 1)
	f, _ := os.Create("/tmp/cold5m.snap")
	snapshot.Write(f, b, snapshot.Meta{}, snapshot.Options{})
	f.Close()
}

func TestColdRead(t *testing.T) {
	if os.Getenv("COLD") != "read" {
		t.Skip()
	}
	data, _ := os.ReadFile("/tmp/cold5m.snap")
	_ = data
	f, _ := os.Open("/tmp/cold5m.snap")
	c0 := cpuNow()
	w0 := time.Now()
	b, _, err := snapshot.Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold restore: %.1f ns/order wall, %.1f cpu-ns/order", float64(time.Since(w0))/float64(b.Orders()), float64(cpuNow()-c0)/float64(b.Orders()))
}
