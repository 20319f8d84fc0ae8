package analysis

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"testing"
	"time"
)

// TestReadGoTraceCountsFsyncs records a real flight-recorder trace of a goroutine calling
// fsync a known number of times and a forced GC, and reads the count and the STW back.
func TestReadGoTraceCountsFsyncs(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 10 * time.Second, MaxBytes: 16 << 20})
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "synced"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 17
	done := make(chan error)
	go func() { // its own goroutine, as an engine's apply path
		for range n {
			if _, err := f.Write([]byte("order\n")); err != nil {
				done <- err
				return
			}
			if err := f.Sync(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var buf bytes.Buffer
	if _, err := fr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	fr.Stop()
	got, err := ReadGoTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fsyncs != n || got.FsyncMs <= 0 {
		t.Errorf("fsyncs %d (%.3f ms), want %d", got.Fsyncs, got.FsyncMs, n)
	}
	if got.STWs < 2 || got.STWMs <= 0 { // a GC stops the world twice
		t.Errorf("stop-the-world %d ranges, %.3f ms; want the forced GC's", got.STWs, got.STWMs)
	}
	if _, err := ReadGoTrace(bytes.NewReader([]byte("not a trace"))); err == nil {
		t.Error("garbage read as a trace")
	}
}
