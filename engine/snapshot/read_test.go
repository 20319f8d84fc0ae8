package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

func mustFail(t *testing.T, data []byte, wantOff int64, wantWhat string) *FormatError {
	t.Helper()
	b, _, err := Read(bytes.NewReader(data))
	if err == nil || b != nil {
		t.Fatalf("accepted a bad stream (book %v, err %v)", b, err)
	}
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v (%T), want a *FormatError wrapping ErrCorrupt", err, err)
	}
	if wantOff >= 0 && fe.Offset != wantOff {
		t.Fatalf("offset %d, want %d (%v)", fe.Offset, wantOff, err)
	}
	if !strings.Contains(fe.What, wantWhat) {
		t.Fatalf("error %q, want it to mention %q", fe.What, wantWhat)
	}
	return fe
}

func TestReadTruncated(t *testing.T) {
	data := take(t, genBook(t, 5000, 5, 20), Meta{LogIndex: 9}, Options{}) // 3 batches
	cuts := []int{0, 1, 63, 64, 65, 79, 80, 81, len(data) - 33, len(data) - 32, len(data) - 31, len(data) - 1}
	for _, b := range []int64{0, 1, 2} { // around every batch boundary
		at := int(BeginSize + b*batchBytes)
		cuts = append(cuts, at-1, at, at+1, at+BatchHeader, at+BatchHeader+1)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		cuts = append(cuts, rng.IntN(len(data)))
	}
	for _, n := range cuts {
		mustFail(t, data[:n], int64(n), "truncated")
	}
}

// Every single-byte change anywhere in a stream is caught.
func TestReadEveryByteFlip(t *testing.T) {
	data := take(t, genBook(t, 9, 6, 3), Meta{LogIndex: 1, Term: 1}, Options{})
	for i := range data {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[i] ^= x
			mustFail(t, bad, -1, "")
		}
	}
}

func TestReadFlipsInLargeStream(t *testing.T) {
	data := take(t, genBook(t, 20_000, 7, 20), Meta{}, Options{})
	rng := rand.New(rand.NewPCG(2, 2))
	for range 200 {
		i := rng.IntN(len(data))
		bad := bytes.Clone(data)
		bad[i] ^= byte(1 + rng.IntN(255))
		fe := mustFail(t, bad, -1, "")
		// The error names the batch (or record) the flipped byte belongs to, not a later one.
		if i >= BeginSize && i < len(data)-EndSize {
			batchStart := BeginSize + int64(i-BeginSize)/batchBytes*batchBytes
			if fe.Offset < batchStart || fe.Offset > batchStart+batchBytes {
				t.Fatalf("flip at %d (batch at %d) reported at offset %d: %v", i, batchStart, fe.Offset, fe)
			}
		}
	}
}

func TestReadReorderedAndExtra(t *testing.T) {
	data := take(t, genBook(t, 3*BatchRecords, 8, 20), Meta{}, Options{}) // exactly 3 full batches
	batch := func(i int) []byte { return data[BeginSize+i*batchBytes : BeginSize+(i+1)*batchBytes] }
	head, end := data[:BeginSize], data[len(data)-EndSize:]
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	mustFail(t, cat(head, batch(1), batch(0), batch(2), end), BeginSize+4, "batch number 1, want 0")
	mustFail(t, cat(head, batch(0), batch(0), batch(2), end), BeginSize+batchBytes+4, "batch number 0, want 1")
	mustFail(t, cat(head, batch(0), batch(2), end), BeginSize+batchBytes+4, "batch number 2, want 1")
	mustFail(t, cat(head, batch(0), batch(1), end), BeginSize+2*batchBytes, "End after 2 of 3 batches")
	mustFail(t, cat(head, batch(0), batch(1), batch(2), batch(2), end), BeginSize+3*batchBytes, "want End")
	mustFail(t, cat(data, []byte{0}), int64(len(data)), "trailing data after End")
	mustFail(t, cat(batch(0), head), 0, "magic")
	mustFail(t, nil, 0, "truncated")
	// End moved before Begin's batches, End twice.
	mustFail(t, cat(head, end, batch(0)), BeginSize, "End after 0 of 3 batches")
}

// frame wraps raw records in valid framing (correct crcs and counts), to reach the semantic
// checks behind the checksums.
func frame(recs [][RecordSize]byte, levels uint64, instruments uint32) []byte {
	n := uint64(len(recs))
	out := make([]byte, BeginSize, Size(int64(n)))
	putBegin(out, begin{orders: n, levels: levels, instruments: instruments, batch: uint32(batchesFor(n))})
	sum := chain(0, le.Uint32(out[60:]))
	for i := 0; i < len(recs); i += BatchRecords {
		k := min(BatchRecords, len(recs)-i)
		p := make([]byte, BatchHeader, BatchHeader+k*RecordSize)
		for _, r := range recs[i : i+k] {
			p = append(p, r[:]...)
		}
		sum = chain(sum, sealBatch(p, uint32(i/BatchRecords), k))
		out = append(out, p...)
	}
	var e [EndSize]byte
	putEnd(e[:], sum, n, batchesFor(n))
	return append(out, e[:]...)
}

func rec(id uint64, inst uint32, side byte, price, qty int64) (r [RecordSize]byte) {
	binary.LittleEndian.PutUint64(r[0:], id)
	binary.LittleEndian.PutUint64(r[8:], uint64(price))
	binary.LittleEndian.PutUint64(r[16:], uint64(qty))
	binary.LittleEndian.PutUint32(r[24:], inst)
	r[28] = side
	return r
}

func TestReadSemanticErrors(t *testing.T) {
	first := int64(BeginSize + BatchHeader)
	second := first + RecordSize
	ok := [][RecordSize]byte{rec(1, 1, 0, 100, 5), rec(2, 1, 1, 101, 5)}
	if b, _, err := Read(bytes.NewReader(frame(ok, 2, 1))); err != nil || b.Orders() != 2 {
		t.Fatalf("valid framed stream: %v", err)
	}
	for _, tc := range []struct {
		name   string
		recs   [][RecordSize]byte
		lv     uint64
		ins    uint32
		off    int64
		phrase string
	}{
		{"bids ascending", [][RecordSize]byte{rec(1, 1, 0, 100, 5), rec(2, 1, 0, 101, 5)}, 2, 1, second, "levels must go best to worst"},
		{"sell before buy", [][RecordSize]byte{rec(1, 1, 1, 100, 5), rec(2, 1, 0, 99, 5)}, 2, 1, second, "buy before sell"},
		{"duplicate id", [][RecordSize]byte{rec(1, 1, 0, 100, 5), rec(1, 1, 0, 99, 5)}, 2, 1, second, "duplicate id"},
		{"zero qty", [][RecordSize]byte{rec(1, 1, 0, 100, 0)}, 1, 1, first, "qty 0"},
		{"bad side", [][RecordSize]byte{rec(1, 1, 2, 100, 1)}, 1, 1, first + 28, "side byte 2"},
		{"crossed", [][RecordSize]byte{rec(1, 1, 0, 100, 5), rec(2, 1, 1, 100, 5)}, 2, 1, -1, "crossed"},
		{"level count", [][RecordSize]byte{rec(1, 1, 0, 100, 5), rec(3, 1, 0, 100, 5), rec(2, 1, 1, 101, 5)}, 3, 1, 40, "3 levels, the records form 2"},
		{"instrument count", ok, 2, 2, 48, "2 instruments, the records hold 1"},
	} {
		t.Run(tc.name, func(t *testing.T) { mustFail(t, frame(tc.recs, tc.lv, tc.ins), tc.off, tc.phrase) })
	}
	r := rec(1, 1, 0, 100, 1)
	r[30] = 1
	mustFail(t, frame([][RecordSize]byte{r}, 1, 1), first+28, "reserved bytes")
}

type errReader struct {
	data []byte
	n    int
}

func (e *errReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, errors.New("EIO")
	}
	k := copy(p[:min(len(p), e.n)], e.data)
	e.data, e.n = e.data[k:], e.n-k
	return k, nil
}

func TestReadIOErrorIsNotCorrupt(t *testing.T) {
	data := take(t, genBook(t, 100, 1, 5), Meta{}, Options{})
	_, _, err := Read(&errReader{data: data, n: 70})
	if err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "offset 70") {
		t.Fatalf("err %v: want the reader's error, with its offset, not ErrCorrupt", err)
	}
}

func FuzzRead(f *testing.F) {
	for _, n := range []int{0, 1, 5, 40} {
		f.Add(take(f, genBook(f, n, uint64(n), 4), Meta{LogIndex: uint64(n)}, Options{}))
	}
	f.Add(frame([][RecordSize]byte{rec(1, 1, 0, 100, 5), rec(2, 1, 1, 101, 5)}, 2, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, m, err := Read(bytes.NewReader(data))
		if err != nil {
			if b != nil || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v with book %v", err, b)
			}
			return
		}
		// Whatever is accepted is canonical: writing it back gives the same bytes.
		var out bytes.Buffer
		if _, err := Write(&out, b, m, Options{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("accepted stream is not canonical")
		}
		_ = io.Discard
	})
}

// A large restore runs helper goroutines; a stream that fails half way must not leave any.
func TestReadFailureLeavesNoGoroutines(t *testing.T) {
	data := take(t, genBook(t, 300_000, 9, 50), Meta{}, Options{})
	before := runtime.NumGoroutine()
	for _, cut := range []int{len(data) / 2, len(data) - EndSize} {
		mustFail(t, data[:cut], int64(cut), "truncated")
	}
	bad := bytes.Clone(data)
	bad[len(data)/3] ^= 1
	mustFail(t, bad, -1, "checksum")
	checkGoroutines(t, before)
}

// checkGoroutines fails unless the goroutine count drops back to before. A goroutine that has
// signalled it is done (WaitGroup, closed channel) still needs a moment to exit, so it polls.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
