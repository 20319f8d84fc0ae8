// Package snapshot is the book's snapshot codec: a stream of fixed-size records written through
// a block writer, and a strict reader.
//
// Wire format (little-endian), version 1:
//
//	Begin  64 B  magic "RIGSNAP\x00", version u16, record size u16, records per batch u32,
//	             log index u64, term u64, orders u64, levels u64, instruments u32, batches u32,
//	             reserved u32 (0), crc32c of bytes 0..59
//	Batch  16 B header: tag "BTCH", batch number u32 (from 0), record count u32,
//	             crc32c of header bytes 0..11 and the records
//	       then count records of 32 B: id u64, price i64, qty i64, instrument u32, side u8,
//	             3 reserved bytes (0)
//	End    32 B  tag "END.", reserved u32 (0), orders u64, batches u64, checksum u64
//
// Every batch but the last holds exactly BatchRecords records, so the layout is a pure function
// of the order count; parallel and linear encoders produce the same bytes. Records come in walk order
// (instrument ascending, buy then sell, best price first, time priority). The End checksum folds
// the Begin crc and every batch crc, in order, through a 64-bit mixer, so it covers the whole
// stream (and catches a batch dropped, repeated or moved together with its number).
package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Format constants.
const (
	Version      = 1
	RecordSize   = 32
	BatchRecords = 2048
	BeginSize    = 64
	BatchHeader  = 16
	EndSize      = 32
	batchBytes   = BatchHeader + BatchRecords*RecordSize
)

var (
	magic    = [8]byte{'R', 'I', 'G', 'S', 'N', 'A', 'P', 0}
	batchTag = [4]byte{'B', 'T', 'C', 'H'}
	endTag   = [4]byte{'E', 'N', 'D', '.'}
	castag   = crc32.MakeTable(crc32.Castagnoli)
	le       = binary.LittleEndian
)

// ErrCorrupt classifies a stream that is not a complete, valid snapshot. Errors wrapping it are
// *FormatError values naming the byte offset.
var ErrCorrupt = errors.New("corrupt snapshot")

// FormatError says where a snapshot stream went wrong and what was wrong.
type FormatError struct {
	Offset int64  // byte offset of the record or field at fault
	What   string // what was wrong
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("corrupt snapshot at offset %d: %s", e.Offset, e.What)
}

// Unwrap makes every FormatError match ErrCorrupt.
func (e *FormatError) Unwrap() error { return ErrCorrupt }

func corrupt(off int64, format string, args ...any) error {
	return &FormatError{Offset: off, What: fmt.Sprintf(format, args...)}
}

// Meta is what a snapshot records besides the book: the log position it was taken at.
type Meta struct {
	LogIndex, Term uint64
}

type begin struct {
	Meta
	orders, levels     uint64
	instruments, batch uint32
}

func batchesFor(orders uint64) uint64 { return (orders + BatchRecords - 1) / BatchRecords }

// Size is the exact stream size of a snapshot of that many orders.
func Size(orders int64) int64 {
	n := uint64(orders)
	return BeginSize + int64(batchesFor(n))*BatchHeader + int64(n)*RecordSize + EndSize
}

func putBegin(p []byte, h begin) {
	_ = p[BeginSize-1]
	copy(p, magic[:])
	le.PutUint16(p[8:], Version)
	le.PutUint16(p[10:], RecordSize)
	le.PutUint32(p[12:], BatchRecords)
	le.PutUint64(p[16:], h.LogIndex)
	le.PutUint64(p[24:], h.Term)
	le.PutUint64(p[32:], h.orders)
	le.PutUint64(p[40:], h.levels)
	le.PutUint32(p[48:], h.instruments)
	le.PutUint32(p[52:], h.batch)
	le.PutUint32(p[56:], 0)
	le.PutUint32(p[60:], crc32.Checksum(p[:60], castag))
}

func putEnd(p []byte, checksum, orders, batches uint64) {
	_ = p[EndSize-1]
	copy(p, endTag[:])
	le.PutUint32(p[4:], 0)
	le.PutUint64(p[8:], orders)
	le.PutUint64(p[16:], batches)
	le.PutUint64(p[24:], checksum)
}

// sealBatch writes the header of a batch whose records are already in p[BatchHeader:] and
// returns its crc.
func sealBatch(p []byte, seq uint32, count int) uint32 {
	copy(p, batchTag[:])
	le.PutUint32(p[4:], seq)
	le.PutUint32(p[8:], uint32(count))
	c := crc32.Update(crc32.Checksum(p[:12], castag), castag, p[BatchHeader:BatchHeader+count*RecordSize])
	le.PutUint32(p[12:], c)
	return c
}

// chain folds one record crc into the stream checksum (splitmix64 finalizer; order-sensitive).
func chain(sum uint64, c uint32) uint64 {
	x := sum ^ uint64(c) ^ 0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
