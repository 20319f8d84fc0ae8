package rundir

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

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

// ReadProbes reads a whole probes file this process wrote (a test, the load generator's own
// checks). A truncated last record (a killed writer) is dropped. A run folder's is read with
// Folder.Probes, bounded by what the run declared.
func ReadProbes(path string) ([]Probe, error) { return probeFormat.read(path) }

// ProbesPath is loadgen/probes.bin, relative to the run folder.
const ProbesPath = LoadgenDir + "/" + ProbesFile

// Probes reads the run folder's loadgen/probes.bin, refusing it before anything is read when it
// holds more probes than declared (ErrUndeclared): a padded or foreign file must not cost the
// reader its memory.
func (f Folder) Probes(d Declared) ([]Probe, error) {
	return readDeclared(f, probeFormat, ProbesPath, d)
}

// ProbeRecords is how many probes loadgen/probes.bin holds, by its size.
func (f Folder) ProbeRecords() (int64, error) { return recordsIn(f, probeFormat, ProbesPath) }

// DeclaredProbes is how many probes the load generator says it wrote to probes.bin: every probe
// answered or lost (stats.json, written when its schedule ended), which is every probe it
// scheduled once it is done.
func (f Folder) DeclaredProbes() (Declared, error) {
	st, err := f.loadgenStats()
	if err != nil {
		return Declared{}, err
	}
	return Declared{N: max(st.Scheduled, satAdd(st.Answered, st.Lost)), Source: LoadgenDir + "/" + StatsFile}, nil
}

func (f Folder) loadgenStats() (ProbeStats, error) {
	var st ProbeStats
	b, err := f.ReadFile(LoadgenDir+"/"+StatsFile, StatsFile, MaxJSONBytes)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s/%s: %w", LoadgenDir, StatsFile, err)
	}
	return st, nil
}

// satAdd adds counts from a file, which may be anything: negative counts are none, and the sum
// stops at the largest int64.
func satAdd(a ...int64) int64 {
	var s int64
	for _, v := range a {
		if v > 0 {
			if s > math.MaxInt64-v {
				return math.MaxInt64
			}
			s += v
		}
	}
	return s
}
