package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/hashicorp/raft"
)

// A record is one raft.Log entry in a segment file:
//
//	header (24 bytes, little endian)
//	  0  u32 payload length
//	  4  u32 CRC-32C of the payload
//	  8  u64 raft index
//	 16  u32 position of the entry in its StoreLogs batch (index - first index of the batch)
//	 20  u32 CRC-32C of header bytes 0..19
//	payload
//	  u64 term | u8 type | u8 flags | i64 appended_at (unix ns) | u32 len | data | u32 len | extensions
//
// The header has its own CRC so a damaged length is detected before it is trusted, which is
// what lets recovery tell a torn tail from damage in the middle. The batch position lets it
// tell "a hole inside the last batch written" (never acknowledged) from "a hole in a batch that a
// later batch follows" (acknowledged, so an error).
const (
	headerSize   = 24
	payloadFixed = 8 + 1 + 1 + 8 + 4 + 4
	// RecordOverhead is what a log entry takes on disk besides its data (and extensions).
	RecordOverhead = headerSize + payloadFixed
	flagAppended   = 1 // appended_at is set (the zero time.Time has no unix-ns form)
	// maxRecord bounds one record so a header can never ask for more than this much memory.
	maxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type header struct {
	length   uint32
	crc      uint32
	index    uint64
	batchOff uint32
}

// appendRecord encodes l onto dst.
func appendRecord(dst []byte, l *raft.Log, batchOff uint32) ([]byte, error) {
	plen := payloadFixed + len(l.Data) + len(l.Extensions)
	if headerSize+plen > maxRecord {
		return dst, fmt.Errorf("log entry %d is %d bytes; the limit is %d", l.Index, headerSize+plen, maxRecord)
	}
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	p := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, l.Term)
	dst = append(dst, byte(l.Type))
	var flags byte
	var at int64
	if !l.AppendedAt.IsZero() {
		flags, at = flagAppended, l.AppendedAt.UnixNano()
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(at))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(l.Extensions)))
	dst = append(dst, l.Extensions...)

	h := dst[start:p]
	binary.LittleEndian.PutUint32(h[0:], uint32(plen))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(dst[p:], castagnoli))
	binary.LittleEndian.PutUint64(h[8:], l.Index)
	binary.LittleEndian.PutUint32(h[16:], batchOff)
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	return dst, nil
}

var (
	errHeaderCRC  = errors.New("header checksum mismatch")
	errPayloadCRC = errors.New("payload checksum mismatch")
	errBadLength  = errors.New("implausible record length")
)

// parseHeader checks the header CRC before trusting any field.
func parseHeader(b []byte) (header, error) {
	if crc32.Checksum(b[:20], castagnoli) != binary.LittleEndian.Uint32(b[20:]) {
		return header{}, errHeaderCRC
	}
	h := header{
		length:   binary.LittleEndian.Uint32(b[0:]),
		crc:      binary.LittleEndian.Uint32(b[4:]),
		index:    binary.LittleEndian.Uint64(b[8:]),
		batchOff: binary.LittleEndian.Uint32(b[16:]),
	}
	if h.length < payloadFixed || h.length > maxRecord-headerSize || uint64(h.batchOff) > h.index {
		return header{}, errBadLength
	}
	return h, nil
}

func (h header) batchFirst() uint64 { return h.index - uint64(h.batchOff) }

func (h header) checkPayload(p []byte) error {
	if crc32.Checksum(p, castagnoli) != h.crc {
		return errPayloadCRC
	}
	return nil
}

// decodePayload fills out from a payload whose CRC has been checked. Data and Extensions alias p,
// which the caller allocated for this entry alone (raft may keep them).
func decodePayload(h header, p []byte, out *raft.Log) error {
	if len(p) < payloadFixed {
		return errBadLength
	}
	*out = raft.Log{Index: h.index}
	out.Term = binary.LittleEndian.Uint64(p[0:])
	out.Type = raft.LogType(p[8])
	if p[9]&flagAppended != 0 {
		out.AppendedAt = time.Unix(0, int64(binary.LittleEndian.Uint64(p[10:])))
	}
	rest := p[18:]
	var err error
	if out.Data, rest, err = takeBytes(rest); err != nil {
		return err
	}
	if out.Extensions, rest, err = takeBytes(rest); err != nil {
		return err
	}
	if len(rest) != 0 {
		return errBadLength
	}
	return nil
}

func takeBytes(b []byte) (val, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, errBadLength
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) || n > math.MaxInt32 {
		return nil, nil, errBadLength
	}
	if n == 0 {
		return nil, b, nil
	}
	return b[:n:n], b[n:], nil
}
