package rundir

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
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
var probeMagic = [8]byte{'R', 'I', 'G', 'P', 'R', 'B', '0', '1'}

const probeRecordSize = 17

// ProbeWriter appends probes to a file.
type ProbeWriter struct {
	f   *os.File
	w   *bufio.Writer
	buf [probeRecordSize]byte
}

// CreateProbes creates a probes file at path.
func CreateProbes(path string) (*ProbeWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create probe file: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	w.Write(probeMagic[:])
	return &ProbeWriter{f: f, w: w}, nil
}

// Write appends one probe.
func (p *ProbeWriter) Write(pr Probe) error {
	binary.LittleEndian.PutUint64(p.buf[0:], uint64(pr.IntendedNs))
	binary.LittleEndian.PutUint64(p.buf[8:], uint64(pr.LatencyNs))
	p.buf[16] = pr.Outcome
	_, err := p.w.Write(p.buf[:])
	return err
}

// Flush pushes buffered records to the file.
func (p *ProbeWriter) Flush() error { return p.w.Flush() }

// Close flushes and closes.
func (p *ProbeWriter) Close() error {
	if err := p.w.Flush(); err != nil {
		p.f.Close()
		return err
	}
	return p.f.Close()
}

// ReadProbes reads a whole probes file. A truncated last record (a killed writer) is dropped.
func ReadProbes(path string) ([]Probe, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != probeMagic {
		return nil, fmt.Errorf("%s: not a probe file (bad magic)", path)
	}
	var out []Probe
	var buf [probeRecordSize]byte
	for {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, Probe{
			IntendedNs: int64(binary.LittleEndian.Uint64(buf[0:])),
			LatencyNs:  int64(binary.LittleEndian.Uint64(buf[8:])),
			Outcome:    buf[16],
		})
	}
}
