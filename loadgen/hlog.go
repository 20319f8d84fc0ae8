package loadgen

import (
	"bufio"
	"fmt"
	"os"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range for latencies in nanoseconds: 1 ns to 1 hour at 3 significant digits. Larger
// values are clamped to the top (a probe waiting an hour is lost in any sense that matters).
const (
	histLowest  = 1
	histHighest = int64(3600e9)
	histDigits  = 3
)

func newHist() *hdr.Histogram { return hdr.New(histLowest, histHighest, histDigits) }

func clampLatency(v int64) int64 { return min(max(v, 0), histHighest) }

// intervalLog writes an HdrHistogram interval log (.hlog), the format of HdrHistogram's
// HistogramLogWriter, so HistogramLogProcessor and every HdrHistogram log reader can read it.
//
// Interval k holds the probes SCHEDULED in [origin + k*width, origin + (k+1)*width): by intended
// send time, like probes.bin, so a stall shows in the interval where the probes were due, not
// where their answers finally landed. An interval is written once every probe scheduled in it is
// answered or lost, so the file grows while the run goes on and an interrupted run keeps
// everything already closed. Lost probes have no latency and are not in the histograms; the
// totals close the file as a comment.
type intervalLog struct {
	f      *os.File
	bw     *bufio.Writer
	w      *hdr.HistogramLogWriter
	origin int64 // unix ns of the schedule start
	width  int64 // ns
	next   int64 // first interval not yet written
	open   map[int64]*interval
	free   []*hdr.Histogram
	empty  *hdr.Histogram
	err    error
}

type interval struct {
	h       *hdr.Histogram
	pending int64 // scheduled, not yet answered or lost
}

func createIntervalLog(path string, originUnixNs, width int64, comment string) (*intervalLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create interval log: %w", err)
	}
	l := &intervalLog{
		f:      f,
		bw:     bufio.NewWriterSize(f, 64<<10),
		origin: originUnixNs,
		width:  width,
		open:   make(map[int64]*interval),
		empty:  newHist(),
	}
	l.w = hdr.NewHistogramLogWriter(l.bw)
	// The log's StartTime/BaseTime lines carry whole seconds, so the base is the whole second at
	// or before the origin and interval stamps are relative to it (as Java's writer does).
	baseMs := originUnixNs / 1e6
	baseMs -= baseMs % 1000
	l.w.SetBaseTime(baseMs)
	l.setErr(l.w.OutputLogFormatVersion())
	if comment != "" {
		l.setErr(l.w.OutputComment("[" + comment + "]"))
	}
	l.setErr(l.w.OutputStartTime(baseMs))
	l.setErr(l.w.OutputBaseTime(baseMs))
	l.setErr(l.w.OutputLegend())
	l.setErr(l.bw.Flush())
	if l.err != nil {
		f.Close()
		return nil, fmt.Errorf("write interval log header: %w", l.err)
	}
	return l, nil
}

func (l *intervalLog) setErr(err error) {
	if err != nil && l.err == nil {
		l.err = err
	}
}

func (l *intervalLog) get(k int64) *interval {
	iv := l.open[k]
	if iv == nil {
		iv = &interval{}
		l.open[k] = iv
	}
	return iv
}

// scheduled counts one more probe due in interval k.
func (l *intervalLog) scheduled(k int64) { l.get(k).pending++ }

// answered records a latency in interval k.
func (l *intervalLog) answered(k, latency int64) {
	iv := l.get(k)
	if iv.h == nil {
		if n := len(l.free); n > 0 {
			iv.h, l.free = l.free[n-1], l.free[:n-1]
		} else {
			iv.h = newHist()
		}
	}
	iv.h.RecordValue(clampLatency(latency))
	iv.pending--
}

// lost resolves a probe of interval k without a latency.
func (l *intervalLog) lost(k int64) { l.get(k).pending-- }

// advance writes the intervals that are complete: every probe due before through (ns since
// the origin) has been scheduled, and all of theirs are resolved.
func (l *intervalLog) advance(through int64) {
	wrote := false
	for l.next < through/l.width {
		iv := l.open[l.next]
		if iv != nil && iv.pending > 0 {
			break
		}
		l.write(l.next, iv)
		l.next++
		wrote = true
	}
	if wrote {
		l.setErr(l.bw.Flush())
	}
}

func (l *intervalLog) write(k int64, iv *interval) {
	h := l.empty
	if iv != nil && iv.h != nil {
		h = iv.h
	}
	startMs := (l.origin + k*l.width) / 1e6
	h.SetStartTimeMs(startMs)
	h.SetEndTimeMs(startMs + l.width/1e6)
	l.setErr(l.w.OutputIntervalHistogram(h))
	if h != l.empty {
		h.Reset()
		l.free = append(l.free, h)
	}
	delete(l.open, k)
}

// close writes every interval up to end (ns since the origin) whatever is pending, a closing
// comment, and closes the file.
func (l *intervalLog) close(end int64, comment string) error {
	last := (end + l.width - 1) / l.width
	for k := range l.open {
		last = max(last, k+1)
	}
	for ; l.next < last; l.next++ {
		l.write(l.next, l.open[l.next])
	}
	if comment != "" {
		l.setErr(l.w.OutputComment("[" + comment + "]"))
	}
	l.setErr(l.bw.Flush())
	l.setErr(l.f.Sync())
	if err := l.f.Close(); err != nil {
		l.setErr(err)
	}
	if l.err != nil {
		return fmt.Errorf("write interval log %s: %w", l.f.Name(), l.err)
	}
	return nil
}
