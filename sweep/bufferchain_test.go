package sweep

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// A sweep of Aeron bursts at net.core.rmem_max 212,992 (errors) and 128 MiB (none): the report
// sets the guide's predicted SO_RCVBUF minimum against the bracket the runs measured.
func TestBufferChainPredictedAgainstMeasured(t *testing.T) {
	dir := t.TempDir()
	const axis = "tuning.net.core.rmem_max"
	sw := &Sweep{ID: "S1", Playbook: "aeron-micro-burst", Status: rundir.StatusOK, Started: time.Now(), Rounds: 2,
		Axes: []Axis{{Key: axis, Values: []string{"212992", "128MiB"}}}}
	i := 0
	for round := 1; round <= 2; round++ {
		for _, rmem := range []int64{212992, 128 << 20} {
			i++
			set := map[string]string{axis: map[int64]string{212992: "212992", 128 << 20: "128MiB"}[rmem]}
			sw.Runs = append(sw.Runs, Run{Dir: RunDir(i, 4), Index: i, Round: round, Settings: set, Status: rundir.StatusOK})
			errs := uint64(0)
			if rmem == 212992 {
				errs = 59288 + uint64(round)
			}
			writeBurstRun(t, filepath.Join(dir, RunDir(i, 4)), set, round, rmem, errs)
		}
	}
	if err := sw.Write(dir); err != nil {
		t.Fatal(err)
	}
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Build(set, Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"## Buffer chain: predicted against measured",
		// 50k × 256 B (170 B + 64 B of headers, aligned) = 12.8 MB in 1 ms.
		"| 50k × 170 B × 1 sender(s), window 4.0 MiB | 50k | 256 B | 12.2 MiB | 208.0 KiB (416.0 KiB): 118579 over 6; 64.0 MiB (128.0 MiB): 0 over 6 | above 208.0 KiB, at most 64.0 MiB | no: the settings are too far apart to pin the threshold within the factor: it lies above the largest with errors and at or below the smallest without; the prediction lies between them |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// writeBurstRun writes a run of three Aeron bursts of 50k × 170 B at rmem_max, the socket having
// asked for 64 MiB, with errs receive-buffer errors spread over them.
func writeBurstRun(t *testing.T, dir string, settings map[string]string, round int, rmem int64, errs uint64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := rundir.Manifest{RunID: filepath.Base(dir), Status: rundir.StatusOK, Round: round, Settings: settings, ConfigHash: "abc",
		Rig: rundir.BuildInfo{Version: "dev", Go: "go1"}, CPUs: 2, Target: "local"}
	s := analysis.Summary{RunID: m.RunID, Status: rundir.StatusOK, Probes: analysis.Stats{N: 1000, P50Us: f(300)}}
	asked := int64(64 << 20)
	for k := range 3 {
		e := errs / 3
		if k == 0 {
			e += errs % 3
		}
		s.Bursts = append(s.Bursts, analysis.BurstRow{AtS: float64(3 + 4*k), Sent: 50000, Planned: 50000, Answered: 50000,
			UDP: &analysis.BurstUDP{Transport: analysis.TransportAeron, Burst: uint32(k + 1), Size: 170, Senders: 1, Receiver: "node-0",
				RcvbufErrors: e, Aeron: &analysis.BurstAeron{Settings: map[string]map[string]int64{"node-0": {
					"aeron.socket.so_rcvbuf": asked, "so_rcvbuf_granted": 2 * min(asked, rmem), "net.core.rmem_max": rmem,
					"aeron.rcv.initial.window.length": 4 << 20}}}}})
	}
	for name, v := range map[string]any{"manifest.json": m, "summary.json": s} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
