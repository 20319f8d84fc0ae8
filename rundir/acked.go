package rundir

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// AckedFile (in the load generator's folder) is the acknowledged-order ledger: every order the
// engine answered OK (accepted and applied at a log index), in answer order. After the run the
// runner asks every server which of them it holds (engine.AdminOrders), so a lost acknowledged
// order is a counted finding (analysis: durability), not a guess.
const AckedFile = "acked.bin"

// Acked is one acknowledged order as the load generator sent it and was answered.
type Acked struct {
	ID         uint64
	Instrument uint32
	Side       uint8
	Price      int64
	Qty        int64
	Index      uint64 // the log index the engine said it applied the order at
	AckNs      int64  // unix nanoseconds the answer arrived
}

// acked.bin: an 8-byte magic, then fixed 45-byte little-endian records.
var ackedMagic = [8]byte{'R', 'I', 'G', 'A', 'C', 'K', '0', '1'}

const ackedRecordSize = 8 + 4 + 1 + 8 + 8 + 8 + 8

// AckedWriter appends acknowledged orders to a ledger file.
type AckedWriter struct {
	f   *os.File
	w   *bufio.Writer
	buf [ackedRecordSize]byte
}

// CreateAcked creates a ledger at path.
func CreateAcked(path string) (*AckedWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create acknowledged-order ledger: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	w.Write(ackedMagic[:])
	return &AckedWriter{f: f, w: w}, nil
}

// Write appends one acknowledged order.
func (a *AckedWriter) Write(r Acked) error {
	b := a.buf[:]
	binary.LittleEndian.PutUint64(b[0:], r.ID)
	binary.LittleEndian.PutUint32(b[8:], r.Instrument)
	b[12] = r.Side
	binary.LittleEndian.PutUint64(b[13:], uint64(r.Price))
	binary.LittleEndian.PutUint64(b[21:], uint64(r.Qty))
	binary.LittleEndian.PutUint64(b[29:], r.Index)
	binary.LittleEndian.PutUint64(b[37:], uint64(r.AckNs))
	_, err := a.w.Write(b)
	return err
}

// Flush pushes buffered records to the file.
func (a *AckedWriter) Flush() error { return a.w.Flush() }

// Close flushes and closes.
func (a *AckedWriter) Close() error {
	if err := a.w.Flush(); err != nil {
		a.f.Close()
		return err
	}
	return a.f.Close()
}

// ReadAcked reads a whole ledger. A truncated last record (a killed writer) is dropped.
func ReadAcked(path string) ([]Acked, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != ackedMagic {
		return nil, fmt.Errorf("%s: not an acknowledged-order ledger (bad magic)", path)
	}
	var out []Acked
	var b [ackedRecordSize]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, nil
			}
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		out = append(out, Acked{
			ID:         binary.LittleEndian.Uint64(b[0:]),
			Instrument: binary.LittleEndian.Uint32(b[8:]),
			Side:       b[12],
			Price:      int64(binary.LittleEndian.Uint64(b[13:])),
			Qty:        int64(binary.LittleEndian.Uint64(b[21:])),
			Index:      binary.LittleEndian.Uint64(b[29:]),
			AckNs:      int64(binary.LittleEndian.Uint64(b[37:])),
		})
	}
}
