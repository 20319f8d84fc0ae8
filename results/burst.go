package results

import (
	"fmt"
	"path/filepath"

	"github.com/rig-dev/rig/rundir"
)

// BurstRow is one micro-burst: B messages sent back to back, as the load generator saw them.
type BurstRow struct {
	AtS          float64 `json:"at_s"` // the burst's due time
	Sent         int     `json:"sent"`
	Lost         int     `json:"lost"`
	PeakPerMs    int     `json:"peak_per_ms"`    // most messages sent in any 1 ms window
	SendMs       float64 `json:"send_ms"`        // first to last send
	AbsorbMs     float64 `json:"absorb_ms"`      // first send to last reply: how long the burst took to drain
	MaxLatencyMs float64 `json:"max_latency_ms"` // worst message, from the burst's due time
	// Planned is the burst's size as asked; NotSent how many of those were never sent; Answered
	// how many sent got a reply. With nothing answered, absorption and latency mean nothing
	// (the report shows n/a).
	Planned  int `json:"planned,omitempty"`
	NotSent  int `json:"not_sent"`
	Answered int `json:"answered"`
}

// burstRows reads the bursts from the manifest's load generator stats, and the UDP receive
// buffer errors from each node's OS samples.
func (d *runData) burstRows(s *Summary) {
	if d.man.Loadgen == nil {
		return
	}
	for _, series := range d.man.Loadgen.Bursts {
		for _, b := range series.Bursts {
			row := BurstRow{
				AtS: d.off(b.Due.UnixNano()), Sent: b.Sent, Lost: b.Lost, PeakPerMs: b.PeakPerMs,
				SendMs: nsToMs(b.SendNs), AbsorbMs: nsToMs(b.DrainNs), MaxLatencyMs: nsToMs(b.MaxLatencyNs),
				Answered: b.Answered, Planned: series.Messages,
			}
			if series.Messages > b.Sent {
				row.NotSent = series.Messages - b.Sent
			}
			s.Bursts = append(s.Bursts, row)
		}
	}
}

// sampleFigures reads every node's OS samples: UDP receive-buffer drops, and how often the
// node's own load average exceeded its CPUs (the controller's load says nothing about a remote
// node's).
func (d *runData) sampleFigures(s *Summary) []string {
	var warn []string
	files, _ := filepath.Glob(filepath.Join(d.dir, "*", rundir.SamplesDir, "*.ndjson"))
	for _, f := range files {
		node := filepath.Base(filepath.Dir(filepath.Dir(f)))
		st, ok := readSampleFile(f)
		if !ok {
			continue
		}
		if s.UDPRcvbufErrors == nil {
			s.UDPRcvbufErrors = map[string]uint64{}
		}
		s.UDPRcvbufErrors[node] += st.rcvbuf
		// On the local target every node is this machine: the run-level load warning says it once.
		if st.overloaded > 0 && d.man.Target != "local" {
			warn = append(warn, fmt.Sprintf("%s: load average above its %d CPUs in %d of %d OS samples (up to %.2f): timings from it are upper bounds", node, st.cpus, st.overloaded, st.n, st.maxLoad))
		}
	}
	return warn
}

type sampleFile struct {
	n, overloaded, cpus int
	rcvbuf              uint64
	maxLoad             float64
}

func readSampleFile(path string) (sampleFile, bool) {
	var out sampleFile
	samples, _ := rundir.ReadSamplesFile(path) // what decodes counts; a damaged file is not a finding
	for _, s := range samples {
		out.n++
		out.rcvbuf += s.UDP.RcvbufErrorsDelta
		out.cpus = max(out.cpus, s.CPUs)
		out.maxLoad = max(out.maxLoad, s.Load.Load1)
		if s.Load.Overloaded {
			out.overloaded++
		}
	}
	return out, out.n > 0
}
