package rundir

import "encoding/binary"

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
var ackedFormat = &recordFormat[Acked]{
	magic: [8]byte{'R', 'I', 'G', 'A', 'C', 'K', '0', '1'},
	size:  8 + 4 + 1 + 8 + 8 + 8 + 8,
	what:  "acknowledged-order ledger",
	put: func(b []byte, r Acked) {
		binary.LittleEndian.PutUint64(b[0:], r.ID)
		binary.LittleEndian.PutUint32(b[8:], r.Instrument)
		b[12] = r.Side
		binary.LittleEndian.PutUint64(b[13:], uint64(r.Price))
		binary.LittleEndian.PutUint64(b[21:], uint64(r.Qty))
		binary.LittleEndian.PutUint64(b[29:], r.Index)
		binary.LittleEndian.PutUint64(b[37:], uint64(r.AckNs))
	},
	get: func(b []byte) Acked {
		return Acked{
			ID:         binary.LittleEndian.Uint64(b[0:]),
			Instrument: binary.LittleEndian.Uint32(b[8:]),
			Side:       b[12],
			Price:      int64(binary.LittleEndian.Uint64(b[13:])),
			Qty:        int64(binary.LittleEndian.Uint64(b[21:])),
			Index:      binary.LittleEndian.Uint64(b[29:]),
			AckNs:      int64(binary.LittleEndian.Uint64(b[37:])),
		}
	},
}

// AckedWriter appends acknowledged orders to a ledger file.
type AckedWriter = RecordWriter[Acked]

// CreateAcked creates a ledger at path.
func CreateAcked(path string) (*AckedWriter, error) { return ackedFormat.create(path) }

// ReadAcked reads a whole ledger. A truncated last record (a killed writer) is dropped.
func ReadAcked(path string) ([]Acked, error) { return ackedFormat.read(path) }

// AckedPath is loadgen/acked.bin, relative to the run folder.
const AckedPath = LoadgenDir + "/" + AckedFile

// Acked reads the run folder's ledger, refused when it holds more records than declared
// (ErrUndeclared).
func (f Folder) Acked(d Declared) ([]Acked, error) { return readDeclared(f, ackedFormat, AckedPath, d) }

// AckedRecords is how many records loadgen/acked.bin holds, by its size.
func (f Folder) AckedRecords() (int64, error) { return recordsIn(f, ackedFormat, AckedPath) }

// DeclaredAcked is how many orders the load generator says were answered (stats.json: the
// probes and its own bursts): the ledger holds those answered OK.
func (f Folder) DeclaredAcked() (Declared, error) {
	st, err := f.loadgenStats()
	if err != nil {
		return Declared{}, err
	}
	n := satAdd(st.Answered)
	for _, b := range st.Bursts {
		n = satAdd(n, b.Answered)
	}
	return Declared{N: n, Source: LoadgenDir + "/" + StatsFile}, nil
}
