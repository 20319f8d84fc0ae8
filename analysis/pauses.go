package analysis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// The engines' always-on pause records, read as inside spans beside the scheduler samples: a Go
// engine's GC stop-the-world pauses (<node>/pauses.ndjson, recording/gcpause; the engine's own
// phases there too, judged by phases.go), an Aeron node's agents' duty-cycle stalls (the same
// file, rundir.SourceAeronCounters) and a JVM's
// safepoints from its unified log (-Xlog:safepoint into the GC log the command driver places in
// the node folder, gc*.log). Like the scheduler samples they are not an engine recording.

// alwaysOnSources are the sources every run has (where the engine offers them), as against an
// engine's recording (inside.ndjson), which is off by default: a run with only these says so.
var alwaysOnSources = []string{SourceDiskModel, SourceOSSamples, rundir.SourceSchedstat, rundir.SourceGoRuntime, rundir.SourceSafepointLog,
	rundir.SourceAeronCounters, rundir.SourceEnginePhases, SourceTimeline}

// safepointRe is HotSpot's per-safepoint line under [safepoint] (JDK 17: `Safepoint "Cleanup",
// Time since last: 1000767425 ns, Reaching safepoint: 201316 ns, Cleanup: 8291 ns, At safepoint:
// 8291 ns, Total: 209607 ns`; JDK 11 has no Cleanup field). The line is logged as the safepoint
// ends.
var safepointRe = regexp.MustCompile(`Safepoint "([^"]+)", Time since last: \d+ ns, Reaching safepoint: (\d+) ns,(?: Cleanup: \d+ ns,)? At safepoint: (\d+) ns, Total: (\d+) ns`)

// ParseSafepoints reads a unified JVM log's safepoint lines as safepoint spans ending at each
// line's time decorator; lines without it cannot be placed and are counted, not returned.
func ParseSafepoints(r io.Reader) (spans []rundir.InsideSpan, unplaced int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "[safepoint") {
			continue
		}
		m := safepointRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		reach, _ := strconv.ParseInt(m[2], 10, 64)
		at, _ := strconv.ParseInt(m[3], 10, 64)
		total, err := strconv.ParseInt(m[4], 10, 64)
		if err != nil || total <= 0 {
			continue
		}
		t := gcTimeRe.FindStringSubmatch(line)
		if t == nil {
			unplaced++
			continue
		}
		end, err := time.Parse("2006-01-02T15:04:05.000-0700", t[1])
		if err != nil {
			unplaced++
			continue
		}
		spans = append(spans, rundir.InsideSpan{AtNs: end.UnixNano() - total, DurNs: total, Kind: rundir.InsideSafepoint, Source: rundir.SourceSafepointLog,
			Detail: fmt.Sprintf("%s: reaching the safepoint %.3f ms, at it %.3f ms", m[1], float64(reach)/1e6, float64(at)/1e6)})
	}
	return spans, unplaced, sc.Err()
}

// pauseSpans reads every node's always-on pause records.
func (d *runData) pauseSpans() map[string][]rundir.InsideSpan {
	out := map[string][]rundir.InsideSpan{}
	for _, node := range d.nodes {
		ss, err := d.run.Pauses(node)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.warnf("GC pauses of %s: %v", node, err)
		}
		out[node] = append(out[node], ss...)
		for _, f := range d.glob(node + "/gc*.log") {
			fh, err := d.run.Open(f, "GC log")
			if err != nil {
				continue // gcRows names it
			}
			sp, unplaced, err := ParseSafepoints(fh)
			fh.Close()
			if err != nil {
				d.warnf("safepoints in %s: %v", f, err)
			}
			if unplaced > 0 {
				d.warnf("safepoints in %s: %d line(s) without the time decorator (-Xlog:...:time,...) cannot be placed and are left out", f, unplaced)
			}
			out[node] = append(out[node], sp...)
		}
		if len(out[node]) == 0 {
			delete(out, node)
		}
	}
	return out
}
