package recording

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime/trace"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// Three dumps of one real flight recorder, syncs between them, appended as the agent takes
// them: the file holds each generation once (smaller than the dumps together), reads as one
// trace, and has every sync exactly once.
func TestCopyGoTraceGensAppends(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	out, err := os.Create(filepath.Join(dir, "run"+FormatGoTrace.Ext()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var last uint64
	var dumped int64
	const takes, perTake = 3, 7
	for i := range takes {
		if err := syncer(f, perTake); err != nil {
			t.Fatal(err)
		}
		var dump bytes.Buffer
		if _, err := fr.WriteTo(&dump); err != nil {
			t.Fatal(err)
		}
		dumped += int64(dump.Len())
		c, err := CopyGoTraceGens(&dump, last, func(header []byte, first uint64) (io.Writer, error) {
			if last != 0 && first != last+1 {
				t.Errorf("take %d: first new generation %d after %d: a gap", i, first, last)
			}
			if last == 0 {
				out.Write(header)
			}
			return out, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.First == 0 || c.Last < c.First || c.First <= last {
			t.Fatalf("take %d copied generations %d..%d after %d", i, c.First, c.Last, last)
		}
		last = c.Last
	}
	st, _ := out.Stat()
	t.Logf("%d takes: %d bytes dumped, %d kept", takes, dumped, st.Size())
	if st.Size() >= dumped {
		t.Errorf("the appended file is %d bytes, the dumps %d: want each generation kept once", st.Size(), dumped)
	}
	forces := 0
	for _, s := range ofKind(read(t, out.Name()), rundir.InsideForce) {
		if s.Role == rundir.RoleOther {
			forces++
		}
	}
	if forces != takes*perTake {
		t.Errorf("%d fsyncs read from the appended file; want %d, each once", forces, takes*perTake)
	}
}

// A trace cut short keeps only its whole generations; what is not a Go >= 1.26 trace is
// refused before anything is written.
func TestCopyGoTraceGensCutShort(t *testing.T) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 30 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	_, err := fr.WriteTo(&dump)
	fr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	var whole bytes.Buffer
	full, err := CopyGoTraceGens(bytes.NewReader(dump.Bytes()), 0, func(h []byte, _ uint64) (io.Writer, error) { whole.Write(h); return &whole, nil })
	if err != nil || whole.Len() != dump.Len() {
		t.Fatalf("whole dump: copied %d of %d bytes: %v", whole.Len(), dump.Len(), err)
	}
	var cut bytes.Buffer
	c, err := CopyGoTraceGens(bytes.NewReader(dump.Bytes()[:dump.Len()-1]), 0, func(h []byte, _ uint64) (io.Writer, error) { cut.Write(h); return &cut, nil })
	if err != nil || c.Last != full.Last-1 && !(full.First == full.Last && c.Last == 0) {
		t.Errorf("cut short: %+v, %v; want generations up to %d", c, err, full.Last-1)
	}
	for in, want := range map[string]string{"go 1.25 trace\x00\x00\x00": "end-of-generation", "not a trace at all": "not a Go execution trace"} {
		_, err := CopyGoTraceGens(bytes.NewReader([]byte(in)), 0, func([]byte, uint64) (io.Writer, error) {
			t.Errorf("%q: dest called", in)
			return io.Discard, nil
		})
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) || want == "end-of-generation" && !errors.Is(err, ErrNoGenerations) {
			t.Errorf("%q: %v; want an error naming %q", in, err, want)
		}
	}
}
