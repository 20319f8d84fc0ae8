// Package wire is the reference engine's client protocol: length-prefixed binary frames over TCP.
// A request carries a correlation id that its response echoes, so a client can pipeline.
// A follower answers every command with StatusNotLeader and the leader's client address, which is
// how clients discover the leader and follow it across elections.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Message types.
const (
	TypeOrder  uint8 = 1 // one order (Order)
	TypeCancel uint8 = 2 // cancel by id
	TypeBatch  uint8 = 3 // many GTC orders in one log entry (preload)
	TypePing   uint8 = 4 // keepalive; answered by the server without touching the log
)

// Response statuses.
const (
	StatusOK        uint8 = 0
	StatusNotLeader uint8 = 1 // payload: leader client address ("" when unknown)
	StatusRejected  uint8 = 2 // the book refused the command (payload: reason)
	StatusError     uint8 = 3 // the server could not apply it (payload: reason); may be retried
)

// MaxFrame bounds a frame so a corrupt length cannot make either side allocate gigabytes.
const MaxFrame = 16 << 20

// Order sides and time-in-force, mirrored from engine/book so clients need not import it.
const (
	Buy  uint8 = 0
	Sell uint8 = 1
	GTC  uint8 = 0
	IOC  uint8 = 1
)

// Order is a new order.
type Order struct {
	ID         uint64
	Instrument uint32
	Side       uint8
	TIF        uint8
	Market     bool
	Price      int64
	Qty        int64
}

const orderSize = 8 + 4 + 1 + 1 + 1 + 8 + 8

// Request is one client command.
type Request struct {
	Type   uint8
	Corr   uint64
	Order  Order   // TypeOrder
	Cancel uint64  // TypeCancel
	Batch  []Order // TypeBatch
}

// Response answers one request.
type Response struct {
	Type   uint8
	Corr   uint64
	Status uint8
	Filled int64  // quantity filled (TypeOrder, TypeBatch: total)
	Rested int64  // quantity left resting
	Index  uint64 // raft log index the command was applied at
	Text   string // leader address (NotLeader) or reason (Rejected, Error)
}

// ErrFrame classifies malformed frames.
var ErrFrame = errors.New("malformed frame")

func putOrder(b []byte, o Order) {
	binary.LittleEndian.PutUint64(b[0:], o.ID)
	binary.LittleEndian.PutUint32(b[8:], o.Instrument)
	b[12] = o.Side
	b[13] = o.TIF
	b[14] = 0
	if o.Market {
		b[14] = 1
	}
	binary.LittleEndian.PutUint64(b[15:], uint64(o.Price))
	binary.LittleEndian.PutUint64(b[23:], uint64(o.Qty))
}

func getOrder(b []byte) Order {
	return Order{
		ID:         binary.LittleEndian.Uint64(b[0:]),
		Instrument: binary.LittleEndian.Uint32(b[8:]),
		Side:       b[12],
		TIF:        b[13],
		Market:     b[14] == 1,
		Price:      int64(binary.LittleEndian.Uint64(b[15:])),
		Qty:        int64(binary.LittleEndian.Uint64(b[23:])),
	}
}

// AppendRequest appends the frame of r to dst.
func AppendRequest(dst []byte, r *Request) []byte {
	var body int
	switch r.Type {
	case TypeOrder:
		body = orderSize
	case TypeCancel:
		body = 8
	case TypeBatch:
		body = 4 + orderSize*len(r.Batch)
	}
	n := 1 + 8 + body
	start := len(dst)
	dst = append(dst, make([]byte, 4+n)...)
	b := dst[start:]
	binary.LittleEndian.PutUint32(b[0:], uint32(n))
	b[4] = r.Type
	binary.LittleEndian.PutUint64(b[5:], r.Corr)
	p := b[13:]
	switch r.Type {
	case TypeOrder:
		putOrder(p, r.Order)
	case TypeCancel:
		binary.LittleEndian.PutUint64(p, r.Cancel)
	case TypeBatch:
		binary.LittleEndian.PutUint32(p, uint32(len(r.Batch)))
		for i, o := range r.Batch {
			putOrder(p[4+i*orderSize:], o)
		}
	}
	return dst
}

// CheckRequest validates a request body (a frame without its length prefix) as DecodeRequest
// does and returns its type and correlation id, without decoding its orders: a server that
// hands a batch to the log as it came need not materialise 32K orders to answer it.
func CheckRequest(b []byte) (typ uint8, corr uint64, err error) {
	if len(b) < 9 {
		return 0, 0, fmt.Errorf("%w: %d bytes, need at least 9", ErrFrame, len(b))
	}
	typ, corr = b[0], binary.LittleEndian.Uint64(b[1:])
	p := b[9:]
	switch typ {
	case TypeOrder:
		if len(p) != orderSize {
			return typ, corr, fmt.Errorf("%w: order body %d bytes, want %d", ErrFrame, len(p), orderSize)
		}
	case TypeCancel:
		if len(p) != 8 {
			return typ, corr, fmt.Errorf("%w: cancel body %d bytes, want 8", ErrFrame, len(p))
		}
	case TypeBatch:
		if len(p) < 4 {
			return typ, corr, fmt.Errorf("%w: batch body %d bytes", ErrFrame, len(p))
		}
		n := int(binary.LittleEndian.Uint32(p))
		if len(p) != 4+n*orderSize {
			return typ, corr, fmt.Errorf("%w: batch of %d orders has %d bytes, want %d", ErrFrame, n, len(p), 4+n*orderSize)
		}
	case TypePing:
	default:
		return typ, corr, fmt.Errorf("%w: unknown type %d", ErrFrame, typ)
	}
	return typ, corr, nil
}

// DecodeRequest parses a request body (a frame without its length prefix). It is also the
// decoder of raft log entries: the leader appends the client's bytes as they came.
func DecodeRequest(b []byte, r *Request) error {
	typ, corr, err := CheckRequest(b)
	if err != nil {
		return err
	}
	r.Type, r.Corr = typ, corr
	p := b[9:]
	switch r.Type {
	case TypeOrder:
		r.Order = getOrder(p)
	case TypeCancel:
		r.Cancel = binary.LittleEndian.Uint64(p)
	case TypeBatch:
		n := int(binary.LittleEndian.Uint32(p))
		r.Batch = r.Batch[:0]
		for i := 0; i < n; i++ {
			r.Batch = append(r.Batch, getOrder(p[4+i*orderSize:]))
		}
	}
	return nil
}

// AppendResponse appends the frame of r to dst.
func AppendResponse(dst []byte, r *Response) []byte {
	n := 1 + 8 + 1 + 8 + 8 + 8 + 2 + len(r.Text)
	start := len(dst)
	dst = append(dst, make([]byte, 4+n)...)
	b := dst[start:]
	binary.LittleEndian.PutUint32(b[0:], uint32(n))
	b[4] = r.Type
	binary.LittleEndian.PutUint64(b[5:], r.Corr)
	b[13] = r.Status
	binary.LittleEndian.PutUint64(b[14:], uint64(r.Filled))
	binary.LittleEndian.PutUint64(b[22:], uint64(r.Rested))
	binary.LittleEndian.PutUint64(b[30:], r.Index)
	binary.LittleEndian.PutUint16(b[38:], uint16(len(r.Text)))
	copy(b[40:], r.Text)
	return dst
}

// DecodeResponse parses a response body.
func DecodeResponse(b []byte, r *Response) error {
	if len(b) < 36 {
		return fmt.Errorf("%w: response %d bytes, need at least 36", ErrFrame, len(b))
	}
	r.Type = b[0]
	r.Corr = binary.LittleEndian.Uint64(b[1:])
	r.Status = b[9]
	r.Filled = int64(binary.LittleEndian.Uint64(b[10:]))
	r.Rested = int64(binary.LittleEndian.Uint64(b[18:]))
	r.Index = binary.LittleEndian.Uint64(b[26:])
	tl := int(binary.LittleEndian.Uint16(b[34:]))
	if len(b) != 36+tl {
		return fmt.Errorf("%w: response text length %d does not fit %d bytes", ErrFrame, tl, len(b))
	}
	r.Text = string(b[36:])
	return nil
}

// ReadFrame reads one length-prefixed frame body into buf (grown as needed).
func ReadFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return buf, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrFrame, n, MaxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}
