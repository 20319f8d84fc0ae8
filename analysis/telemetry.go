package analysis

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// Engine telemetry beyond /status: a JVM engine's GC log (unified logging, -Xlog:gc*, which the
// command driver's {{.GCLog}} places in the node folder) summarised per run, and any engine's
// own log lines quoted next to a latency spike that no timeline action explains.

// GCPause is one stop-the-world pause from a JVM GC log.
type GCPause struct {
	End  time.Time // when the line was logged (the pause's end); zero without the time decorator
	Ms   float64
	What string // e.g. "Pause Young (Normal) (G1 Evacuation Pause)", "Pause Mark Start"
}

// GCRow is one node's GC pauses over the run's measured window.
type GCRow struct {
	Node      string  `json:"node"`
	Count     int     `json:"count"`
	LongestMs float64 `json:"longest_ms"`
	TotalMs   float64 `json:"total_ms"`
	// Windowed: the log has wall-clock stamps (the time decorator), so only pauses in the
	// measured window (warm-up end to end of load) count; otherwise the whole log does.
	Windowed bool `json:"windowed"`
}

// gcPauseRe matches the line that closes a pause in HotSpot's unified GC log: G1, Parallel and
// Serial log "GC(N) Pause Young ... 6M->3M(24M) 13.144ms" under [gc]; ZGC and Shenandoah log
// their short pauses under [gc,phases] ("GC(0) Pause Mark Start 0.058ms"). The [gc,start] line
// of a pause has no duration, so it does not match.
var gcPauseRe = regexp.MustCompile(`GC\(\d+\) (Pause .*?)(?: \d+[KMG]->\d+[KMG]\(\d+[KMG]\))? (\d+(?:\.\d+)?)ms\s*$`)

// gcTimeRe is the time decorator, [2026-12-02T22:09:47.515+0000].
var gcTimeRe = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d{4})\]`)

// ParseGCLog reads the pauses of a HotSpot unified-logging GC log.
func ParseGCLog(r io.Reader) ([]GCPause, error) {
	lg, err := parseJVMLog(r)
	return lg.pauses, err
}

// gcPauseLine reads a line that closes a GC pause.
func gcPauseLine(line string) (GCPause, bool) {
	m := gcPauseRe.FindStringSubmatch(line)
	if m == nil || (!strings.Contains(line, "[gc ") && !strings.Contains(line, "[gc]") && !strings.Contains(line, "[gc,phases")) {
		return GCPause{}, false
	}
	ms, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return GCPause{}, false
	}
	p := GCPause{Ms: ms, What: strings.TrimSpace(m[1])}
	if t := gcTimeRe.FindStringSubmatch(line); t != nil {
		p.End, _ = time.Parse("2006-01-02T15:04:05.000-0700", t[1])
	}
	return p, true
}

// Spike is the slowest probe of the run when no timeline action explains it, with what the
// engines logged around it.
type Spike struct {
	AtS       float64             `json:"at_s"` // intended send time, from load start
	LatencyMs float64             `json:"latency_ms"`
	GC        []string            `json:"gc,omitempty"`        // GC pauses overlapping it, e.g. "node-0 Pause Young 13.1 ms"
	LogLines  map[string][]string `json:"log_lines,omitempty"` // per node, the engine's log lines stamped inside it
}

// Thresholds for calling the slowest probe a spike worth explaining.
const (
	spikeMinMs      = 1.0
	spikeOverP50    = 10.0
	actionExplains  = 2 * time.Second // an action explains latency this long after it
	spikeLogMargin  = 100 * time.Millisecond
	spikeMaxLogRows = 8
)

// engineLogTimeRe finds a timestamp in an engine's log line: RFC 3339 / ISO 8601 as most
// loggers write it (slog's "time", hclog's "@timestamp", log4j's and logback's patterns).
var engineLogTimeRe = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?`)

func parseLogTime(s string) (time.Time, bool) {
	s = strings.Replace(strings.Replace(s, ",", ".", 1), " ", "T", 1)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// spike finds the slowest post-warm-up probe; when it stands out (≥ 10× the p50 and ≥ 1 ms)
// and no action or restart explains it, it quotes the GC pauses and engine log lines around it.
func (d *runData) spike(s *Summary, gc map[string][]GCPause) *Spike {
	if !d.hasProbe || s.Probes.P50Us == nil || s.Probes.MaxUs == nil {
		return nil
	}
	var worst *rundir.Probe
	for i := d.firstPost; i < len(d.probes); i++ {
		p := &d.probes[i]
		if p.Outcome == rundir.ProbeOK && (worst == nil || p.LatencyNs > worst.LatencyNs) {
			worst = p
		}
	}
	if worst == nil {
		return nil
	}
	latMs := float64(worst.LatencyNs) / 1e6
	if latMs < spikeMinMs || latMs*1e3 < spikeOverP50**s.Probes.P50Us {
		return nil
	}
	from, to := worst.IntendedNs, worst.IntendedNs+worst.LatencyNs
	for _, c := range d.causesIn(from, to, s) {
		if c.Kind == CauseAction || c.Kind == CauseRestart {
			return nil // the timeline explains it
		}
	}
	sp := &Spike{AtS: d.off(from), LatencyMs: math.Round(latMs*1e3) / 1e3, LogLines: map[string][]string{}}
	for _, node := range d.nodes {
		for _, p := range gc[node] {
			if p.End.IsZero() {
				continue
			}
			end := p.End.UnixNano()
			if end >= from && end-int64(p.Ms*1e6) <= to {
				sp.GC = append(sp.GC, fmt.Sprintf("%s %s %.3f ms", node, p.What, p.Ms))
			}
		}
		if lines := d.engineLogLines(node, from-int64(spikeLogMargin), to+int64(spikeLogMargin)); len(lines) > 0 {
			sp.LogLines[node] = lines
		}
	}
	return sp
}

// engineLogLines returns the node's engine log lines stamped within [from, to], at most
// spikeMaxLogRows of them.
func (d *runData) engineLogLines(node string, from, to int64) []string {
	lines := d.stampedLog(node)
	i := sort.Search(len(lines), func(i int) bool { return lines[i].t >= from })
	var out []string
	for ; i < len(lines) && lines[i].t <= to && len(out) < spikeMaxLogRows; i++ {
		out = append(out, lines[i].text)
	}
	return out
}

type stampedLine struct {
	t    int64
	text string
}

// stampedLog is the node's engine log lines that carry a timestamp, in time order, read once
// per run: every excursion asks for its own stretch.
func (d *runData) stampedLog(node string) []stampedLine {
	if lines, ok := d.engineLogs[node]; ok {
		return lines
	}
	if d.engineLogs == nil {
		d.engineLogs = map[string][]stampedLine{}
	}
	var out []stampedLine
	defer func() { d.engineLogs[node] = out }()
	f, err := d.run.Open(node+"/"+rundir.EngineLogFile, rundir.EngineLogFile)
	if err != nil {
		d.warnOutside(err)
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := engineLogTimeRe.FindString(line)
		if m == "" {
			continue
		}
		t, ok := parseLogTime(m)
		if !ok {
			continue
		}
		if len(line) > 300 {
			line = line[:300] + "…"
		}
		out = append(out, stampedLine{t.UnixNano(), line})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].t < out[j].t })
	return out
}

// telemetrySection is the report's GC table and unexplained spike, beside the latency tables.
func telemetrySection(s *Summary) string {
	var b strings.Builder
	if len(s.GCPauses) > 0 {
		b.WriteString("### GC pauses\n\n")
		writeGCPauses(&b, s.GCPauses)
		windowed := true
		for _, r := range s.GCPauses {
			windowed = windowed && r.Windowed
		}
		if windowed {
			b.WriteString("Stop-the-world pauses from each engine's GC log (-Xlog:gc*), warm-up end to end of load.\n\n")
		} else {
			b.WriteString("Stop-the-world pauses from each engine's GC log (-Xlog:gc*), the whole log: add the time decorator (:time) to count only the measured window.\n\n")
		}
	}
	if sp := s.Spike; sp != nil {
		fmt.Fprintf(&b, "### Unexplained spike\n\nThe slowest probe, sent at %s, waited %s; no timeline action or restart was under way.", fmtS(sp.AtS), fmtMs(sp.LatencyMs))
		if len(sp.GC) > 0 {
			fmt.Fprintf(&b, " GC pauses overlapping it: %s.", strings.Join(sp.GC, "; "))
		}
		if len(sp.LogLines) == 0 {
			b.WriteString(" No engine logged a timestamped line within 100 ms of it.\n\n")
		} else {
			b.WriteString(" What the engines logged from 100 ms before it to 100 ms after:\n\n")
			for _, n := range slices.Sorted(maps.Keys(sp.LogLines)) {
				fmt.Fprintf(&b, "%s:\n\n```\n%s\n```\n\n", n, strings.Join(sp.LogLines[n], "\n"))
			}
		}
	}
	return b.String()
}
