package analysis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// The engines' always-on pause records, read as cause spans (spans.go) beside the scheduler
// samples: a Go engine's GC stop-the-world pauses (<node>/pauses.ndjson, recording/gcpause) and
// a JVM's GC log (gc*.log, which the command driver places in the node folder), read once for
// its GC pauses and its safepoints (-Xlog:gc*,safepoint); an Aeron node's agents' duty-cycle
// stalls (the same pauses file, rundir.SourceAeronCounters); and the engines' own phases there
// (rundir.SourceEnginePhases), judged by what each interval measures (phases.go). Like the
// scheduler samples they are not an engine recording.

// alwaysOnSources are the sources every run has (where the engine offers them), as against an
// engine's recording (inside.ndjson), which is off by default: a run with only these says so.
// The gc action's answers are among them: an answer, not a recording.
var alwaysOnSources = []string{SourceDiskModel, SourceOSSamples, rundir.SourceSchedstat, rundir.SourceSchedSwitch, SourcePSI, rundir.SourceGoRuntime, rundir.SourceSafepointLog, SourceGCLog, SourceGCAction,
	rundir.SourceAeronCounters, rundir.SourceEnginePhases, rundir.SourceEngineSyncs, SourceTimeline, SourceLoadgen}

// safepointRe is HotSpot's per-safepoint line under [safepoint] (JDK 17: `Safepoint "Cleanup",
// Time since last: 1000767425 ns, Reaching safepoint: 201316 ns, Cleanup: 8291 ns, At safepoint:
// 8291 ns, Total: 209607 ns`; JDK 11 has no Cleanup field). The line is logged as the safepoint
// ends.
var safepointRe = regexp.MustCompile(`Safepoint "([^"]+)", Time since last: \d+ ns, Reaching safepoint: (\d+) ns,(?: Cleanup: \d+ ns,)? At safepoint: (\d+) ns, Total: (\d+) ns`)

// SourceGCLog is a JVM's GC log (-Xlog:gc*) among the sources of the tables of where the time
// went: its pauses, each one span with the safepoint it ran in.
const SourceGCLog = "gc_log"

// jvmLog is one JVM unified log (-Xlog:gc*,safepoint) read in one pass: its GC pauses and its
// safepoints, each GC pause paired with the safepoint it ran in.
type jvmLog struct {
	pauses     []GCPause
	safepoints []safepoint
	// inSafepoint[i] is the safepoint pause i ran in, -1 for none logged.
	inSafepoint []int
	unplaced    int // safepoint lines without the time decorator
}

// safepoint is one safepoint line: the operation, its time to reach the safepoint and its whole
// length, ending at the line's time.
type safepoint struct {
	name               string
	end, reach, at, ns int64
}

func (s safepoint) span() rundir.InsideSpan {
	return rundir.InsideSpan{AtNs: s.end - s.ns, DurNs: s.ns, Kind: rundir.InsideSafepoint, Source: rundir.SourceSafepointLog,
		Detail: fmt.Sprintf("%s: reaching the safepoint %.3f ms, at it %.3f ms", s.name, float64(s.reach)/1e6, float64(s.at)/1e6)}
}

// stampSlack is the time decorator's precision (milliseconds): a GC pause and its safepoint,
// stamped apart, may seem to miss each other by this much.
const stampSlack = int64(time.Millisecond)

// parseJVMLog reads a unified JVM log's GC pauses (gcPauseRe) and safepoints (safepointRe). A
// safepoint line is logged as its operation ends, after the GC pause line the operation logged
// inside it: a safepoint pairs with the pauses logged since the previous safepoint that it
// overlaps.
func parseJVMLog(r io.Reader) (jvmLog, error) {
	var lg jvmLog
	var pending []int // pauses logged since the last safepoint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := gcPauseLine(line); ok {
			lg.pauses = append(lg.pauses, p)
			lg.inSafepoint = append(lg.inSafepoint, -1)
			pending = append(pending, len(lg.pauses)-1)
			continue
		}
		sp, ok, placed := safepointLine(line)
		if !ok {
			continue
		}
		if !placed {
			lg.unplaced++
			continue
		}
		lg.safepoints = append(lg.safepoints, sp)
		for _, i := range pending {
			p := lg.pauses[i]
			if p.End.IsZero() {
				continue
			}
			end := p.End.UnixNano()
			if end-int64(p.Ms*1e6) <= sp.end+stampSlack && end+stampSlack >= sp.end-sp.ns {
				lg.inSafepoint[i] = len(lg.safepoints) - 1
			}
		}
		pending = pending[:0]
	}
	return lg, sc.Err()
}

// safepointLine reads a safepoint line: ok when it is one, placed when it has the time
// decorator.
func safepointLine(line string) (sp safepoint, ok, placed bool) {
	if !strings.Contains(line, "[safepoint") {
		return sp, false, false
	}
	m := safepointRe.FindStringSubmatch(line)
	if m == nil {
		return sp, false, false
	}
	sp.name = m[1]
	sp.reach, _ = strconv.ParseInt(m[2], 10, 64)
	sp.at, _ = strconv.ParseInt(m[3], 10, 64)
	total, err := strconv.ParseInt(m[4], 10, 64)
	if err != nil || total <= 0 {
		return sp, false, false
	}
	sp.ns = total
	t := gcTimeRe.FindStringSubmatch(line)
	if t == nil {
		return sp, true, false
	}
	end, err := time.Parse("2006-01-02T15:04:05.000-0700", t[1])
	if err != nil {
		return sp, true, false
	}
	sp.end = end.UnixNano()
	return sp, true, true
}

// spans are the log's cause spans: each timed GC pause as gc_pause from gc_log — over the
// safepoint it ran in where one was logged, with the time to reach it in the evidence, so a
// stop is one cause, not a gc and a safepoint — and the other safepoints as safepoint from
// safepoint_log.
func (lg jvmLog) spans() []causeSpan {
	var out []causeSpan
	paired := make([]bool, len(lg.safepoints))
	for i, p := range lg.pauses {
		if p.End.IsZero() {
			continue
		}
		end := p.End.UnixNano()
		at := end - int64(p.Ms*1e6)
		c := causeSpan{cause: string(rundir.InsideGCPause), source: SourceGCLog, detail: p.What, w: 1, cover: 1, counted: true, names: CauseGC}
		if j := lg.inSafepoint[i]; j >= 0 {
			sp := lg.safepoints[j]
			paired[j] = true
			at, end = min(at, sp.end-sp.ns), max(end, sp.end)
			c.x = &spanExtra{evidence: fmt.Sprintf("%s %.3f ms in safepoint %s, reached in %.3f ms", p.What, p.Ms, sp.name, float64(sp.reach)/1e6)}
		}
		c.at, c.dur = at, end-at
		out = append(out, c)
	}
	for j, sp := range lg.safepoints {
		if !paired[j] {
			out = append(out, fromInside(sp.span()))
		}
	}
	return out
}

// ParseSafepoints reads a unified JVM log's safepoint lines as safepoint spans ending at each
// line's time decorator; lines without it cannot be placed and are counted, not returned.
func ParseSafepoints(r io.Reader) (spans []rundir.InsideSpan, unplaced int, err error) {
	lg, err := parseJVMLog(r)
	for _, sp := range lg.safepoints {
		spans = append(spans, sp.span())
	}
	return spans, lg.unplaced, err
}

// readPausesSource adds every node's pause records (<node>/pauses.ndjson: a Go engine's GC
// pauses, an Aeron node's duty-cycle stalls, the engines' phases).
func readPausesSource(d *runData, st *spanStream) {
	for _, node := range d.nodes {
		ss, err := d.run.Pauses(node)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.warnf("pauses file of %s: %v", node, err)
		}
		for _, sp := range ss {
			st.add(node, fromInside(sp))
		}
	}
}

// readGCLogSource reads every node's GC logs (<node>/gc*.log: a JVM started through the
// command driver with {{.GCLog}} writes gc-PID.log, one per launch) once: their pauses and
// safepoints as spans, the pauses over the measured window as the node's gc_pauses row.
func readGCLogSource(d *runData, st *spanStream) {
	for _, node := range d.nodes {
		files := d.glob(node + "/gc*.log")
		if len(files) == 0 {
			continue
		}
		row := GCRow{Node: node, Windowed: true}
		for _, f := range files {
			fh, err := d.open(f, "GC log")
			if err != nil {
				d.warnf("GC log %s: %v", f, err)
				continue
			}
			lg, err := parseJVMLog(fh)
			fh.Close()
			if err != nil {
				d.warnf("GC log %s: %v", f, err)
			}
			if lg.unplaced > 0 {
				d.warnf("safepoints in %s: %d line(s) without the time decorator (-Xlog:...:time,...) cannot be placed and are left out", f, lg.unplaced)
			}
			st.add(node, lg.spans()...)
			for _, p := range lg.pauses {
				if p.End.IsZero() {
					row.Windowed = false
				} else if end := p.End.UnixNano(); end < d.warmupEnd || (d.loadEnd > 0 && end-int64(p.Ms*1e6) > d.loadEnd) {
					continue
				}
				st.gc[node] = append(st.gc[node], p)
				row.Count++
				row.TotalMs += p.Ms
				row.LongestMs = math.Max(row.LongestMs, p.Ms)
			}
		}
		row.TotalMs = math.Round(row.TotalMs*1e3) / 1e3
		st.gcRows = append(st.gcRows, row)
	}
}
