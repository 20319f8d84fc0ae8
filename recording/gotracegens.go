package recording

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A flight recorder's dump is its whole window (up to engine.FlightRecorderBytes) each
// time, and the takes of a run overlap: rewriting it at every take would keep the same data
// once per take. A Go >= 1.26 trace is a header and a sequence of self-contained generations,
// each numbered and closed by an end-of-generation byte, so a take keeps only the generations
// the earlier ones did not have, appended to the same file: still one valid trace.

// The trace's wire format (golang.org/x/exp/trace/internal/tracev2, frozen per version): the
// bytes that start a batch, and the one that ends a generation.
const (
	evEventBatch        = 1
	evExperimentalBatch = 49
	evEndOfGeneration   = 52
	maxTraceBatch       = 64 << 10 // tracev2.MaxBatchSize
	traceHeaderLen      = 16       // "go 1.NN trace\x00\x00\x00"
	// maxTraceGen bounds the one generation held in memory before it is written (a generation
	// is about a second of the engine's events: a loaded engine's is a few MiB).
	maxTraceGen = 256 << 20
)

// ErrNoGenerations: the trace was written by a Go older than 1.26, whose generations have no end
// marker, so they cannot be told apart without parsing them.
var ErrNoGenerations = errors.New("go trace without end-of-generation markers (Go >= 1.26 writes them)")

// GoTraceCopy says what CopyGoTraceGens wrote.
type GoTraceCopy struct {
	Header      []byte // the trace's header: a file that starts with it takes the generations
	First, Last uint64 // the generations written (0, 0: none was newer)
	Bytes       int64  // written, header not counted
}

// CopyGoTraceGens reads a Go execution trace from in and writes each whole generation numbered
// above after to the writer dest returns; dest is called once, at the first such generation,
// with the trace's header and that generation's number (so the caller can append to the file
// holding generation after, or start a new one after a gap). A generation cut short at the end
// of in is left out: what was written is always whole generations. It returns what it wrote,
// with the error that stopped it.
func CopyGoTraceGens(in io.Reader, after uint64, dest func(header []byte, first uint64) (io.Writer, error)) (GoTraceCopy, error) {
	var c GoTraceCopy
	br := bufio.NewReaderSize(in, 1<<16)
	header := make([]byte, traceHeaderLen)
	if _, err := io.ReadFull(br, header); err != nil {
		return c, fmt.Errorf("go trace header: %w", err)
	}
	var minor int
	if _, err := fmt.Sscanf(string(header), "go 1.%d trace\x00\x00\x00", &minor); err != nil {
		return c, fmt.Errorf("go trace header %q: not a Go execution trace", header)
	}
	if minor < 26 {
		return c, fmt.Errorf("go 1.%d trace: %w", minor, ErrNoGenerations)
	}
	c.Header = header
	var (
		w    io.Writer
		gen  bytes.Buffer // the generation being read, while it is newer than after
		cur  uint64       // its number; 0 before its first batch
		keep bool
	)
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return c, nil // a generation under way is dropped: it has no end yet
		}
		if err != nil {
			return c, fmt.Errorf("go trace: %w", err)
		}
		if b == evEndOfGeneration {
			if keep {
				gen.WriteByte(b)
				if w == nil {
					if w, err = dest(header, cur); err != nil {
						return c, err
					}
					c.First = cur
				}
				if _, err := w.Write(gen.Bytes()); err != nil {
					return c, fmt.Errorf("write go trace generation %d: %w", cur, err)
				}
				c.Last, c.Bytes = cur, c.Bytes+int64(gen.Len())
			}
			gen.Reset()
			cur, keep = 0, false
			continue
		}
		if b != evEventBatch && b != evExperimentalBatch {
			return c, fmt.Errorf("go trace: byte %d where a batch or a generation's end belongs", b)
		}
		head := []byte{b}
		if b == evExperimentalBatch {
			exp, err := br.ReadByte()
			if err != nil {
				return c, fmt.Errorf("go trace batch: %w", err)
			}
			head = append(head, exp)
		}
		var fields [4]uint64 // generation, M, timestamp, size
		raw := rawBytes{r: br, b: head}
		for i := range fields {
			if fields[i], err = binary.ReadUvarint(&raw); err != nil {
				return c, fmt.Errorf("go trace batch header: %w", err)
			}
		}
		head = raw.b
		g, size := fields[0], fields[3]
		if size > maxTraceBatch {
			return c, fmt.Errorf("go trace batch of %d bytes: at most %d", size, maxTraceBatch)
		}
		if cur == 0 {
			cur, keep = g, g > after
		} else if g != cur {
			return c, fmt.Errorf("go trace: generation %d's batch inside generation %d", g, cur)
		}
		if !keep {
			if _, err := br.Discard(int(size)); err != nil {
				return c, fmt.Errorf("go trace batch: %w", err)
			}
			continue
		}
		if gen.Len()+len(head)+int(size) > maxTraceGen {
			return c, fmt.Errorf("go trace generation %d: more than %d bytes", cur, maxTraceGen)
		}
		gen.Write(head)
		if _, err := io.CopyN(&gen, br, int64(size)); err != nil {
			return c, fmt.Errorf("go trace batch: %w", err)
		}
	}
}

// rawBytes keeps the bytes read through it: a batch is copied as the runtime wrote it (its size
// a fixed-width varint).
type rawBytes struct {
	r *bufio.Reader
	b []byte
}

func (r *rawBytes) ReadByte() (byte, error) {
	c, err := r.r.ReadByte()
	if err == nil {
		r.b = append(r.b, c)
	}
	return c, err
}
