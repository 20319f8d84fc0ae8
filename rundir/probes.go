package rundir

import "encoding/binary"

// Probe outcomes.
const (
	ProbeOK   uint8 = 0 // answered
	ProbeLost uint8 = 1 // never answered before the run ended (or the answer was an error)
)

// Probe is one probe as the load generator saw it. Latency is measured from the intended send
// time (open loop, no coordinated omission), so a probe that could not even be sent during a
// pause is charged the pause.
type Probe struct {
	IntendedNs int64 // unix nanoseconds of the scheduled send time
	LatencyNs  int64 // reply time - intended time; for lost probes, the time waited
	Outcome    uint8
}

// probes.bin and bursts.bin: an 8-byte magic, then fixed 17-byte little-endian records.
var probeFormat = &recordFormat[Probe]{
	magic: [8]byte{'R', 'I', 'G', 'P', 'R', 'B', '0', '1'},
	size:  17,
	what:  "probe file",
	put: func(b []byte, p Probe) {
		binary.LittleEndian.PutUint64(b[0:], uint64(p.IntendedNs))
		binary.LittleEndian.PutUint64(b[8:], uint64(p.LatencyNs))
		b[16] = p.Outcome
	},
	get: func(b []byte) Probe {
		return Probe{
			IntendedNs: int64(binary.LittleEndian.Uint64(b[0:])),
			LatencyNs:  int64(binary.LittleEndian.Uint64(b[8:])),
			Outcome:    b[16],
		}
	},
}

// ProbeWriter appends probes to a file.
type ProbeWriter = RecordWriter[Probe]

// CreateProbes creates a probes file at path.
func CreateProbes(path string) (*ProbeWriter, error) { return probeFormat.create(path) }

// ReadProbes reads a whole probes file. A truncated last record (a killed writer) is dropped.
func ReadProbes(path string) ([]Probe, error) { return probeFormat.read(path) }
