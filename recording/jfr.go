package recording

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// Java Flight Recorder. A JFR file is read with the JDK's own `jfr print --json`
// (openjdk-17-jdk-headless, beside the java the engine runs on): no Go parser of the JFR format
// is served to this build (none is among the Go modules it may fetch), and the format's
// metadata changes between JDK releases, which the JDK's own tool always reads. So a recording
// is read on the node, where the JDK is, and `rig report` reads only the spans
// (rundir.InsideFile).

// JFC is rig's recording settings (rig.jfc): the events below at the thresholds the docs give.
//
//go:embed rig.jfc
var JFC []byte

// JFCName is the settings file's name where the agent writes it for the JVM.
const JFCName = "rig.jfc"

// JFRSamplePeriod is rig.jfc's jdk.ExecutionSample period: a cpu span's DurNs.
const JFRSamplePeriod = 20 * time.Millisecond

// jfrStackDepth: frames `jfr print` writes per stack (each about 1 KB of JSON). Three reach
// past the JDK's own frames of a park (Unsafe.park < LockSupport.parkNanos < the idle
// strategy) and of a force (FileChannelImpl.force < the caller).
const jfrStackDepth = 3

// jfrEvents are the event types read (and the only ones rig.jfc enables).
var jfrEvents = []string{
	"jdk.FileForce", "jdk.FileWrite", "jdk.GarbageCollection", "jdk.GCPhasePause", "jdk.SafepointBegin",
	"jdk.ExecuteVMOperation", "jdk.ThreadPark", "jdk.JavaMonitorEnter", "jdk.JavaMonitorWait",
	"jdk.SocketRead", "jdk.SocketWrite", "jdk.ExecutionSample",
}

// ErrNoJFRTool: the JDK's jfr tool is not on the node.
var ErrNoJFRTool = errors.New("the JDK's jfr tool is not in PATH (install openjdk-17-jdk-headless)")

// JFR reads a Java Flight Recorder file with the JDK's jfr tool (FormatJFR).
type JFR struct{}

// Format is FormatJFR.
func (JFR) Format() Format { return FormatJFR }

// Read reads the recording at path.
func (JFR) Read(ctx context.Context, path string, opt Options) ([]rundir.InsideSpan, error) {
	return readJFR(ctx, path, opt)
}

func readJFR(ctx context.Context, path string, opt Options) ([]rundir.InsideSpan, error) {
	bin, err := exec.LookPath("jfr")
	if err != nil {
		return nil, ErrNoJFRTool
	}
	cmd := exec.CommandContext(ctx, bin, "print", "--json", "--stack-depth", strconv.Itoa(jfrStackDepth),
		"--events", strings.Join(jfrEvents, ","), path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jfr print: %w", err)
	}
	// Reading is never on a latency path, and the node may be running a measured engine: the
	// JVM's later threads inherit the main thread's nice value.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 19)
	spans, perr := parseJFRJSON(out, opt)
	if perr != nil {
		io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	if werr != nil {
		return nil, fmt.Errorf("jfr print: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return spans, perr
}

// jfrEvent is one element of `jfr print --json`'s recording.events.
type jfrEvent struct {
	Type   string          `json:"type"`
	Values json.RawMessage `json:"values"`
}

// parseJFRJSON streams `jfr print --json` ({"recording": {"events": [...]}}) into spans.
func parseJFRJSON(r io.Reader, opt Options) ([]rundir.InsideSpan, error) {
	dec := json.NewDecoder(r)
	// Walk to the events array without holding the document.
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("jfr json: no events array: %w", err)
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if t == "events" && depth == 2 {
				if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
					return nil, fmt.Errorf("jfr json: events is not an array")
				}
				return readJFREvents(dec, opt)
			}
		}
	}
}

func readJFREvents(dec *json.Decoder, opt Options) ([]rundir.InsideSpan, error) {
	m := jfrMapper{opt: opt, gcs: map[int64]string{}, gcOf: map[int]int64{}}
	for dec.More() {
		var ev jfrEvent
		if err := dec.Decode(&ev); err != nil {
			return nil, fmt.Errorf("jfr json: event %d: %w", m.n, err)
		}
		m.n++
		if err := m.add(ev); err != nil {
			return nil, fmt.Errorf("jfr json: event %d (%s): %w", m.n, ev.Type, err)
		}
	}
	// A GC's name and cause come in jdk.GarbageCollection, written when the collection ends,
	// after its pauses: named once every event is in.
	for i := range m.spans {
		if id := m.gcOf[i]; id != 0 {
			if d, ok := m.gcs[id]; ok {
				m.spans[i].Detail = d + ": " + m.spans[i].Detail
			}
		}
	}
	return m.spans, nil
}

type jfrMapper struct {
	opt   Options
	n     int
	spans []rundir.InsideSpan
	gcs   map[int64]string // gcId → "G1New (G1 Evacuation Pause)"
	gcOf  map[int]int64    // span index → gcId, for gc_pause spans
}

// jfrThread is a recorded thread.
type jfrThread struct {
	OSName   string `json:"osName"`
	JavaName string `json:"javaName"`
}

func (t *jfrThread) name() string {
	if t == nil {
		return ""
	}
	if t.JavaName != "" {
		return t.JavaName
	}
	return t.OSName
}

type jfrStack struct {
	Frames []struct {
		Method struct {
			Type struct {
				Name string `json:"name"`
			} `json:"type"`
			Name string `json:"name"`
		} `json:"method"`
	} `json:"frames"`
}

// frame i as pkg.Class.method.
func (s *jfrStack) frame(i int) string {
	f := s.Frames[i].Method
	return strings.ReplaceAll(f.Type.Name, "/", ".") + "." + f.Name
}

// top is the innermost frame; caller the innermost one outside the JDK (java., jdk., sun.),
// which says whose park or force it was; the top frame when all are the JDK's.
func (s *jfrStack) top() string {
	if s == nil || len(s.Frames) == 0 {
		return ""
	}
	return s.frame(0)
}

func (s *jfrStack) caller() string {
	if s == nil || len(s.Frames) == 0 {
		return ""
	}
	for i, f := range s.Frames {
		n := f.Method.Type.Name
		if !strings.HasPrefix(n, "java/") && !strings.HasPrefix(n, "jdk/") && !strings.HasPrefix(n, "sun/") {
			return s.frame(i)
		}
	}
	return s.frame(0)
}

type jfrClass struct {
	Name string `json:"name"`
}

func (m *jfrMapper) add(ev jfrEvent) error {
	v := ev.Values
	var common struct {
		Start    string     `json:"startTime"`
		Duration string     `json:"duration"`
		Thread   *jfrThread `json:"eventThread"`
		Sampled  *jfrThread `json:"sampledThread"`
		Stack    *jfrStack  `json:"stackTrace"`
	}
	if err := unmarshalValues(v, &common); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, common.Start)
	if err != nil {
		return fmt.Errorf("startTime %q: %w", common.Start, err)
	}
	var dur time.Duration
	if common.Duration != "" {
		if dur, err = parseISODuration(common.Duration); err != nil {
			return fmt.Errorf("duration: %w", err)
		}
	}
	s := rundir.InsideSpan{AtNs: at.UnixNano(), DurNs: int64(dur), Source: string(FormatJFR), Thread: common.Thread.name()}
	switch ev.Type {
	case "jdk.FileForce", "jdk.FileWrite":
		var f struct {
			Path  string `json:"path"`
			Bytes int64  `json:"bytesWritten"`
		}
		if err := unmarshalValues(v, &f); err != nil {
			return err
		}
		if strings.HasSuffix(f.Path, ".jfr") {
			return nil // the recorder's own: a JFR.dump copying chunks
		}
		s.Kind = rundir.InsideWrite
		if ev.Type == "jdk.FileForce" {
			s.Kind, s.Detail = rundir.InsideForce, common.Stack.caller()
		}
		if f.Path == "" {
			// A descriptor opened without a path: the process's stdout or stderr.
			s.Role, s.Detail = rundir.RoleOther, "stdout or stderr"
		} else {
			s.File, s.Role = FileRole(m.opt.DataDir, f.Path)
		}
		s.Bytes = f.Bytes
	case "jdk.GarbageCollection":
		var g struct {
			ID    int64  `json:"gcId"`
			Name  string `json:"name"`
			Cause string `json:"cause"`
		}
		if err := unmarshalValues(v, &g); err != nil {
			return err
		}
		m.gcs[g.ID] = g.Name + " (" + g.Cause + ")"
		return nil // its pauses are the GCPhasePause events; a concurrent collector's cycle is no pause
	case "jdk.GCPhasePause":
		var g struct {
			ID   int64  `json:"gcId"`
			Name string `json:"name"`
		}
		if err := unmarshalValues(v, &g); err != nil {
			return err
		}
		s.Kind, s.Detail = rundir.InsideGCPause, g.Name
		m.gcOf[len(m.spans)] = g.ID
	case "jdk.SafepointBegin":
		s.Kind, s.Detail = rundir.InsideSafepoint, "reaching the safepoint"
	case "jdk.ExecuteVMOperation":
		var o struct {
			Op        string `json:"operation"`
			Safepoint bool   `json:"safepoint"`
		}
		if err := unmarshalValues(v, &o); err != nil {
			return err
		}
		if !o.Safepoint || isGCOperation(o.Op) {
			return nil // a GC's operation is its pause (GCPhasePause); one not at a safepoint stops nobody
		}
		s.Kind, s.Detail = rundir.InsideSafepoint, o.Op
	case "jdk.ThreadPark":
		s.Kind, s.Detail = rundir.InsidePark, common.Stack.caller()
	case "jdk.JavaMonitorEnter", "jdk.JavaMonitorWait":
		var mo struct {
			Class *jfrClass `json:"monitorClass"`
		}
		if err := unmarshalValues(v, &mo); err != nil {
			return err
		}
		what := "wait"
		if ev.Type == "jdk.JavaMonitorEnter" {
			what = "enter"
		}
		s.Kind, s.Detail = rundir.InsideMonitor, what+" "+className(mo.Class)+" at "+common.Stack.caller()
	case "jdk.SocketRead", "jdk.SocketWrite":
		var so struct {
			Address string `json:"address"`
			Port    int    `json:"port"`
			Read    int64  `json:"bytesRead"`
			Written int64  `json:"bytesWritten"`
		}
		if err := unmarshalValues(v, &so); err != nil {
			return err
		}
		what := "read"
		if ev.Type == "jdk.SocketWrite" {
			what = "write"
		}
		s.Kind, s.Bytes = rundir.InsideSocket, so.Read+so.Written
		s.Detail = fmt.Sprintf("%s %s:%d", what, so.Address, so.Port)
	case "jdk.ExecutionSample":
		s.Kind, s.DurNs, s.Thread, s.Detail = rundir.InsideCPU, int64(JFRSamplePeriod), common.Sampled.name(), common.Stack.top()
	default:
		return nil
	}
	m.spans = append(m.spans, s)
	return nil
}

func className(c *jfrClass) string {
	if c == nil {
		return "?"
	}
	return strings.ReplaceAll(c.Name, "/", ".")
}

// isGCOperation: HotSpot's VM operations that are a collector's pause (G1CollectForAllocation,
// G1CollectFull, G1Concurrent, CollectForMetadataAllocation, ParallelGCFailedAllocation,
// GenCollectForAllocation, ZMarkStart, ShenandoahInitMark, …).
func isGCOperation(op string) bool {
	if strings.Contains(op, "Collect") {
		return true
	}
	for _, p := range []string{"G1", "Z", "Shenandoah", "ParallelGC"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// unmarshalValues decodes the fields out of an event's values.
func unmarshalValues(v json.RawMessage, out any) error {
	return json.Unmarshal(v, out)
}

// parseISODuration reads the java.time.Duration text `jfr print` writes: PT0.005602434S,
// PT1M2.5S, PT2H, P1DT… (days as 24 h).
func parseISODuration(s string) (time.Duration, error) {
	orig := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if !strings.HasPrefix(s, "P") {
		return 0, fmt.Errorf("%q: not an ISO 8601 duration", orig)
	}
	s = s[1:]
	var d time.Duration
	inTime := false
	for s != "" {
		if s[0] == 'T' {
			inTime, s = true, s[1:]
			continue
		}
		i := strings.IndexAny(s, "DHMS")
		if i <= 0 {
			return 0, fmt.Errorf("%q: not an ISO 8601 duration", orig)
		}
		x, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", orig, err)
		}
		unit := time.Second
		switch s[i] {
		case 'D':
			unit = 24 * time.Hour
		case 'H':
			unit = time.Hour
		case 'M':
			if !inTime {
				return 0, fmt.Errorf("%q: months are not a duration", orig)
			}
			unit = time.Minute
		}
		d += time.Duration(x * float64(unit))
		s = s[i+1:]
	}
	if neg {
		d = -d
	}
	return d, nil
}
