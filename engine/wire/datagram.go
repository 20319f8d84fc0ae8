package wire

import (
	"encoding/binary"
	"fmt"
)

// UDP ingress datagrams (docs/wire.md, "UDP ingress"). A sender numbers its datagrams per
// session from 0; the receiver delivers them in order, detects gaps and asks for a resend with a
// NAK. Every datagram is one of:
//
//	DATA      header + a request body (the bytes of a TCP frame after its length), then padding
//	HEARTBEAT header with Seq = the next sequence number the sender will use and no body
//	NAK       receiver -> sender: header with Seq = first missing, Count = how many
//
// Header, little-endian:
//
//	0  kind    u8   DgramData | DgramHeartbeat | DgramNak
//	1  version u8   DgramVersion
//	2  body    u16  bytes of request body after the header (DATA; 0 otherwise)
//	4  session u32  chosen by the sender, unique among its concurrent senders
//	8  seq     u64
//	16 sent    i64  sender's clock (Unix ns) when the datagram was handed to the kernel
//	24 burst   u32  the sender's burst number (DATA), or the NAK's count
//	28 flags   u32  DgramRetransmit on a resent DATA; otherwise 0
const (
	DgramData      uint8 = 1
	DgramHeartbeat uint8 = 2
	DgramNak       uint8 = 3

	DgramVersion    uint8  = 1
	DgramHeader            = 32
	DgramRetransmit uint32 = 1

	// DgramMax is the largest datagram a sender may use (below a 1,500 B MTU with IP and UDP
	// headers); DgramMin fits the header and one order.
	DgramMax = 1400
	DgramMin = DgramHeader + 9 + orderSize
)

// Dgram is a decoded datagram header; Body aliases the buffer it was decoded from.
type Dgram struct {
	Kind    uint8
	Session uint32
	Seq     uint64
	SentNs  int64
	Burst   uint32 // DATA: burst number; NAK: count
	Flags   uint32
	Body    []byte
}

// PutDgramHeader writes a header at the start of b (len(b) >= DgramHeader).
func PutDgramHeader(b []byte, d *Dgram) {
	b[0], b[1] = d.Kind, DgramVersion
	binary.LittleEndian.PutUint16(b[2:], uint16(len(d.Body)))
	binary.LittleEndian.PutUint32(b[4:], d.Session)
	binary.LittleEndian.PutUint64(b[8:], d.Seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(d.SentNs))
	binary.LittleEndian.PutUint32(b[24:], d.Burst)
	binary.LittleEndian.PutUint32(b[28:], d.Flags)
}

// AppendDataDgram appends a DATA datagram of size bytes carrying the request r (padded with
// zeros after the body). Sent is left 0: the sender stamps it with StampDgram before each send.
func AppendDataDgram(dst []byte, session uint32, seq uint64, burst uint32, r *Request, size int) ([]byte, error) {
	body := AppendRequest(nil, r)[4:] // without the TCP length prefix
	if size < DgramHeader+len(body) || size > DgramMax {
		return dst, fmt.Errorf("datagram size %d: want %d..%d bytes", size, DgramHeader+len(body), DgramMax)
	}
	start := len(dst)
	dst = append(dst, make([]byte, size)...)
	b := dst[start:]
	PutDgramHeader(b, &Dgram{Kind: DgramData, Session: session, Seq: seq, Burst: burst, Body: body})
	copy(b[DgramHeader:], body)
	return dst, nil
}

// StampDgram sets a datagram's send time.
func StampDgram(b []byte, sentNs int64) { binary.LittleEndian.PutUint64(b[16:], uint64(sentNs)) }

// MarkRetransmit sets the retransmit flag of a DATA datagram.
func MarkRetransmit(b []byte) {
	binary.LittleEndian.PutUint32(b[28:], binary.LittleEndian.Uint32(b[28:])|DgramRetransmit)
}

// DecodeDgram parses a datagram's header. The body of DATA is checked only for length here;
// the receiver decodes it with DecodeRequest.
func DecodeDgram(b []byte, d *Dgram) error {
	if len(b) < DgramHeader {
		return fmt.Errorf("%w: datagram of %d bytes, need at least %d", ErrFrame, len(b), DgramHeader)
	}
	if b[1] != DgramVersion {
		return fmt.Errorf("%w: datagram version %d, want %d", ErrFrame, b[1], DgramVersion)
	}
	d.Kind = b[0]
	n := int(binary.LittleEndian.Uint16(b[2:]))
	d.Session = binary.LittleEndian.Uint32(b[4:])
	d.Seq = binary.LittleEndian.Uint64(b[8:])
	d.SentNs = int64(binary.LittleEndian.Uint64(b[16:]))
	d.Burst = binary.LittleEndian.Uint32(b[24:])
	d.Flags = binary.LittleEndian.Uint32(b[28:])
	d.Body = nil
	switch d.Kind {
	case DgramData:
		if DgramHeader+n > len(b) {
			return fmt.Errorf("%w: datagram body of %d bytes in %d", ErrFrame, n, len(b))
		}
		d.Body = b[DgramHeader : DgramHeader+n]
	case DgramHeartbeat, DgramNak:
	default:
		return fmt.Errorf("%w: datagram kind %d", ErrFrame, d.Kind)
	}
	return nil
}

// AppendNak appends a NAK asking session to resend count datagrams from seq.
func AppendNak(dst []byte, session uint32, seq uint64, count uint32) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, DgramHeader)...)
	PutDgramHeader(dst[start:], &Dgram{Kind: DgramNak, Session: session, Seq: seq, Burst: count})
	return dst
}

// AppendHeartbeat appends a HEARTBEAT telling the receiver the sender's next sequence number,
// so a loss at the tail of a burst is detected without a later datagram.
func AppendHeartbeat(dst []byte, session uint32, next uint64, sentNs int64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, DgramHeader)...)
	PutDgramHeader(dst[start:], &Dgram{Kind: DgramHeartbeat, Session: session, Seq: next, SentNs: sentNs})
	return dst
}
