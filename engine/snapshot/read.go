package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/rig-dev/rig/engine/book"
)

// maxHint caps the pre-sizing a Begin record can ask for (64M orders, about 3 GiB); a larger
// book still restores, growing as its records arrive. Begin's checksum guards its counts
// against damage, not against a deliberately forged file.
const maxHint = 1 << 26

// Read decodes a snapshot strictly: Begin first, End last, then end of stream; every batch in
// sequence with its exact record count and checksum; counts and the End checksum must match;
// records in walk order forming a valid, uncrossed book. Any violation is a *FormatError
// (errors.Is ErrCorrupt) naming the byte offset and what was wrong, and no book is returned.
// Errors from r itself are returned wrapped, with the offset. The rebuild is one linear pass.
func Read(r io.Reader) (*book.Book, Meta, error) {
	d := decoder{r: r}
	b, m, err := d.run()
	if err != nil {
		return nil, Meta{}, err
	}
	return b, m, nil
}

type decoder struct {
	r     io.Reader
	off   int64
	batch int64 // batch being read, for messages
}

// read fills p from the stream; a short stream is a FormatError saying what was being read
// ("batch" parts name the batch).
func (d *decoder) read(p []byte, what string) error {
	n, err := io.ReadFull(d.r, p)
	if err == nil {
		d.off += int64(n)
		return nil
	}
	if strings.HasPrefix(what, "batch") {
		what = fmt.Sprintf("%s of batch %d", what, d.batch)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt(d.off+int64(n), "truncated: stream ends %d bytes into %s (%d bytes)", n, what, len(p))
	}
	return fmt.Errorf("read snapshot at offset %d (%s): %w", d.off+int64(n), what, err)
}

func (d *decoder) run() (*book.Book, Meta, error) {
	var hdr [BeginSize]byte
	if err := d.read(hdr[:], "Begin"); err != nil {
		return nil, Meta{}, err
	}
	if !bytes.Equal(hdr[:8], magic[:]) {
		return nil, Meta{}, corrupt(0, "Begin: magic %q, want %q (not a rig snapshot)", hdr[:8], magic[:])
	}
	if c, want := crc32.Checksum(hdr[:60], castag), le.Uint32(hdr[60:]); c != want {
		return nil, Meta{}, corrupt(60, "Begin: checksum %08x, computed %08x", want, c)
	}
	if v := le.Uint16(hdr[8:]); v != Version {
		return nil, Meta{}, corrupt(8, "Begin: format version %d, this build reads %d", v, Version)
	}
	if rs := le.Uint16(hdr[10:]); rs != RecordSize {
		return nil, Meta{}, corrupt(10, "Begin: record size %d, want %d", rs, RecordSize)
	}
	if br := le.Uint32(hdr[12:]); br != BatchRecords {
		return nil, Meta{}, corrupt(12, "Begin: %d records per batch, want %d", br, BatchRecords)
	}
	if x := le.Uint32(hdr[56:]); x != 0 {
		return nil, Meta{}, corrupt(56, "Begin: reserved field %d, want 0", x)
	}
	h := begin{Meta: Meta{LogIndex: le.Uint64(hdr[16:]), Term: le.Uint64(hdr[24:])},
		orders: le.Uint64(hdr[32:]), levels: le.Uint64(hdr[40:]),
		instruments: le.Uint32(hdr[48:]), batch: le.Uint32(hdr[52:])}
	if h.orders > 1<<40 || uint64(h.batch) != batchesFor(h.orders) {
		return nil, Meta{}, corrupt(32, "Begin: %d orders in %d batches, want %d batches", h.orders, h.batch, batchesFor(h.orders))
	}
	if h.levels > h.orders || uint64(h.instruments) > h.levels {
		return nil, Meta{}, corrupt(40, "Begin: %d orders, %d levels, %d instruments: want orders >= levels >= instruments",
			h.orders, h.levels, h.instruments)
	}
	sum := chain(0, le.Uint32(hdr[60:]))

	bl := book.NewBuilder(int(min(h.orders, maxHint)), int(min(h.levels, maxHint)))
	defer bl.Discard() // releases a rebuild abandoned on error; no-op after Finish
	buf := getBuf(batchBytes)
	defer putBuf(buf)
	for i := uint32(0); i < h.batch; i++ {
		at := d.off
		d.batch = int64(i)
		p := buf[:BatchHeader]
		if err := d.read(p, "batch header"); err != nil {
			return nil, Meta{}, err
		}
		if bytes.Equal(p[:4], endTag[:]) {
			return nil, Meta{}, corrupt(at, "End after %d of %d batches", i, h.batch)
		}
		if !bytes.Equal(p[:4], batchTag[:]) {
			return nil, Meta{}, corrupt(at, "batch %d: tag %q, want %q", i, p[:4], batchTag[:])
		}
		if seq := le.Uint32(p[4:]); seq != i {
			return nil, Meta{}, corrupt(at+4, "batch number %d, want %d (batches missing or out of order)", seq, i)
		}
		want := uint64(BatchRecords)
		if i == h.batch-1 {
			want = h.orders - uint64(i)*BatchRecords
		}
		if n := le.Uint32(p[8:]); uint64(n) != want {
			return nil, Meta{}, corrupt(at+8, "batch %d: %d records, want %d", i, n, want)
		}
		n := int(want)
		p = buf[:BatchHeader+n*RecordSize]
		if err := d.read(p[BatchHeader:], "batch records"); err != nil {
			return nil, Meta{}, err
		}
		c := crc32.Update(crc32.Checksum(p[:12], castag), castag, p[BatchHeader:])
		if stored := le.Uint32(p[12:]); c != stored {
			return nil, Meta{}, corrupt(at+12, "batch %d: checksum %08x, computed %08x over bytes %d..%d",
				i, stored, c, at, d.off)
		}
		sum = chain(sum, c)
		if err := decodeBatch(bl, p[BatchHeader:], at+BatchHeader); err != nil {
			return nil, Meta{}, err
		}
	}

	at := d.off
	var end [EndSize]byte
	if err := d.read(end[:], "End"); err != nil {
		return nil, Meta{}, err
	}
	if !bytes.Equal(end[:4], endTag[:]) {
		return nil, Meta{}, corrupt(at, "tag %q after the last of %d batches, want End %q", end[:4], h.batch, endTag[:])
	}
	if o := le.Uint64(end[8:]); o != h.orders {
		return nil, Meta{}, corrupt(at+8, "End: %d orders, Begin said %d", o, h.orders)
	}
	if n := le.Uint64(end[16:]); n != uint64(h.batch) {
		return nil, Meta{}, corrupt(at+16, "End: %d batches, Begin said %d", n, h.batch)
	}
	if x := le.Uint32(end[4:]); x != 0 {
		return nil, Meta{}, corrupt(at+4, "End: reserved field %d, want 0", x)
	}
	if c := le.Uint64(end[24:]); c != sum {
		return nil, Meta{}, corrupt(at+24, "End: stream checksum %016x, computed %016x", c, sum)
	}
	var one [1]byte
	if n, err := io.ReadFull(d.r, one[:]); n > 0 {
		return nil, Meta{}, corrupt(d.off, "trailing data after End")
	} else if err != nil && !errors.Is(err, io.EOF) {
		return nil, Meta{}, fmt.Errorf("read snapshot at offset %d (after End): %w", d.off, err)
	}
	if got := bl.Levels(); uint64(got) != h.levels {
		return nil, Meta{}, corrupt(40, "Begin: %d levels, the records form %d", h.levels, got)
	}
	if got := bl.Instruments(); uint32(got) != h.instruments {
		return nil, Meta{}, corrupt(48, "Begin: %d instruments, the records hold %d", h.instruments, got)
	}
	b, err := bl.Finish()
	if err != nil {
		return nil, Meta{}, sequenceError(err)
	}
	return b, h.Meta, nil
}

// decodeBatch feeds a batch's records to the builder; off is the offset of the first record.
func decodeBatch(bl *book.Builder, p []byte, off int64) error {
	for o := 0; o+RecordSize <= len(p); o += RecordSize {
		r := p[o : o+RecordSize : o+RecordSize]
		side := r[28]
		if side > 1 || r[29]|r[30]|r[31] != 0 {
			return corrupt(off+int64(o)+28, "record: side byte %d and reserved bytes % x, want side 0 or 1 and zeros", side, r[29:32])
		}
		if err := bl.Add(le.Uint32(r[24:]), book.Side(side), int64(le.Uint64(r[8:])), le.Uint64(r[0:]), int64(le.Uint64(r[16:]))); err != nil {
			return sequenceError(err)
		}
	}
	return nil
}

// sequenceError turns a builder error into a FormatError at the offset of the order at fault.
func sequenceError(err error) error {
	var se *book.SequenceError
	if !errors.As(err, &se) {
		return err
	}
	ord := se.Ordinal
	off := BeginSize + ord/BatchRecords*batchBytes + BatchHeader + ord%BatchRecords*RecordSize
	return corrupt(off, "record %d: %s", ord, se.What)
}
