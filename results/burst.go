package results

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
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
}

// burstRows reads the bursts from the manifest's load generator stats, and the UDP receive
// buffer errors from each node's OS samples.
func (d *runData) burstRows(s *Summary) {
	for _, series := range d.man.Loadgen.Bursts {
		for _, b := range series.Bursts {
			s.Bursts = append(s.Bursts, BurstRow{
				AtS: d.off(b.Due.UnixNano()), Sent: b.Sent, Lost: b.Lost, PeakPerMs: b.PeakPerMs,
				SendMs: nsToMs(b.SendNs), AbsorbMs: nsToMs(b.DrainNs), MaxLatencyMs: nsToMs(b.MaxLatencyNs),
			})
		}
	}
	files, _ := filepath.Glob(filepath.Join(d.dir, "*", "samples", "*.ndjson"))
	for _, f := range files {
		node := filepath.Base(filepath.Dir(filepath.Dir(f)))
		if n, ok := rcvbufErrors(f); ok {
			if s.UDPRcvbufErrors == nil {
				s.UDPRcvbufErrors = map[string]uint64{}
			}
			s.UDPRcvbufErrors[node] += n
		}
	}
}

// rcvbufErrors sums the per-interval RcvbufErrors deltas of a samples file.
func rcvbufErrors(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var sum uint64
	var n int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s struct {
			UDP struct {
				RcvbufErrorsDelta uint64 `json:"rcvbuf_errors_delta"`
			} `json:"udp"`
		}
		if json.Unmarshal(sc.Bytes(), &s) == nil {
			sum += s.UDP.RcvbufErrorsDelta
			n++
		}
	}
	return sum, n > 0
}
