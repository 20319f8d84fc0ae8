package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

// Collecting an engine's own recording, alike for every format: after each window
// the runner asks (POST /engine/recording); the agent takes the engine's recording since its
// last take into <node>/recordings/<window><ext> (a JVM's: JFR.dump, or a killed JVM's
// chunks from its disk repository; a Go engine's: the generations of its GET /trace no earlier
// take had, appended to the file of the first: fetchTrace), reads it with
// the agent's recording.Registry here on the node, where the JDK is, and appends the spans from its last take on
// to <node>/inside.ndjson. So every span is in the inside file once, whichever window's take
// brought it, and `rig report` needs no JDK.

// RecordingRequest names the window whose end the take follows.
type RecordingRequest struct {
	Window string `json:"window"` // a file name stem: letters, digits, '-', '_', '.'
	// Defer: only take the recording now, and read it with the next take that does not defer.
	// Reading starts the JDK's jfr tool and parses its JSON, seconds of CPU that would land in
	// the measured load; the runner defers during the load and reads at its end.
	Defer bool `json:"defer,omitempty"`
	// Start and Stop switch a recorder that runs only around windows
	// (StartRequest.RecordingWindows; recording.Windows drives them): Start starts it and takes
	// nothing; Stop stops it after this take. A relaunched engine's recorder is started again
	// while the agent's is on.
	Start bool `json:"start,omitempty"`
	Stop  bool `json:"stop,omitempty"`
}

// RecordingResponse says what the take found.
type RecordingResponse struct {
	Files []string `json:"files,omitempty"` // under <node>/recordings/
	Spans int      `json:"spans"`           // appended to the inside file
	Notes []string `json:"notes,omitempty"` // what could not be taken, and why
}

var windowNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// recorder is the agent's state of the engine's recording across launches.
type recorder struct {
	mu     sync.Mutex // one take at a time
	format recording.Format
	// cut: per JVM (pid; 0 for a Go engine's trace), the time up to which its spans are in the
	// inside file.
	cut     map[int]time.Time
	done    map[int]bool // killed JVMs whose repository was taken to its end
	pending []pendingTake
	// A Go engine's trace file that takes append to, and the last generation in it.
	traceFile string
	traceLast uint64
	// windows: the recorder runs only between a Start and a Stop; on: it runs now (as far as
	// the agent asked).
	windows, on bool
}

// pendingTake is a recording taken and not read yet, with the stretch of it that is new.
type pendingTake struct {
	file     string
	from, to time.Time
	dead     bool // a killed JVM's repository: everything from on, to its end
}

// recordingEnv starts keeping the engine's recording of format f (every start of an engine
// starts afresh) and returns, for a JVM engine, the environment entry that starts a JVM engine's recording, written with its
// settings file into the node's recordings folder.
func (s *Server) recordingEnv(f recording.Format, windows bool) ([]string, error) {
	rec := &recorder{format: f, cut: map[int]time.Time{}, done: map[int]bool{}, windows: windows}
	s.engine.rec = rec
	if f != recording.FormatJFR {
		return nil, nil
	}
	dir := filepath.Join(s.opts.Dir, rundir.RecordingsDir)
	jvmOptions := recording.JVMOptions
	if windows {
		jvmOptions = recording.JVMWindowOptions
	}
	opts, err := jvmOptions(dir)
	if err != nil {
		return nil, fmt.Errorf("start JFR: %w", err)
	}
	// JVMs of an earlier run in this agent's folder are that run's.
	old, _ := recording.JVMRecordings(dir)
	for _, j := range old {
		rec.done[j.PID] = true
	}
	return []string{recording.JVMOptionsEnv + "=" + opts}, nil
}

func (s *Server) handleRecording(w http.ResponseWriter, r *http.Request) {
	var req RecordingRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if !windowNameRe.MatchString(req.Window) {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("window %q: want 1-64 of letters, digits, '.', '_' and '-', starting with a letter or digit", req.Window))
		return
	}
	s.engine.mu.Lock()
	rec, e := s.engine.rec, s.engine.eng
	s.engine.mu.Unlock()
	if rec == nil || e == nil {
		writeJSON(w, http.StatusOK, RecordingResponse{Notes: []string{"no engine recording asked for"}})
		return
	}
	if req.Start {
		resp, err := s.startRecorder(r.Context(), rec, e.Spec().Config)
		if err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	resp, err := s.takeRecording(r.Context(), rec, req.Window, req.Defer, e.Spec().Config)
	if err == nil && req.Stop {
		err = s.stopRecorder(r.Context(), rec, e.Spec().Config)
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// takeRecording takes every recording not yet taken up to now and, unless deferred, reads
// every recording taken and not yet read into the inside file.
func (s *Server) takeRecording(ctx context.Context, rec *recorder, window string, deferRead bool, cfg engine.Config) (RecordingResponse, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var resp RecordingResponse
	dir := filepath.Join(s.opts.Dir, rundir.RecordingsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return resp, err
	}
	now := time.Now()
	type take struct {
		key  int
		dead bool // a killed JVM's repository: everything in it is taken, to its end
		file string
		// get writes the recording and says where it is: file, another file it appended to,
		// or "" when it kept nothing (it removes what it could not finish).
		get func() (string, error)
	}
	var takes []take
	switch rec.format {
	case recording.FormatJFR:
		jvms, err := recording.JVMRecordings(dir)
		if err != nil {
			return resp, fmt.Errorf("list JFR repository: %w", err)
		}
		if len(jvms) == 0 {
			resp.Notes = append(resp.Notes, "no JVM recorded into "+filepath.Join(dir, recording.JFRRepository)+
				" (not a JVM engine, or its command sets "+recording.JVMOptionsEnv+" itself)")
		}
		for _, j := range jvms {
			if rec.done[j.PID] {
				continue
			}
			j := j
			file := filepath.Join(dir, window+"-"+strconv.Itoa(j.PID)+recording.FormatJFR.Ext())
			if alive(j.PID) {
				if rec.windows && !rec.on {
					continue // stopped: its last take had everything
				}
				takes = append(takes, take{j.PID, false, file, func() (string, error) {
					return keptOrRemoved(file, recording.DumpJFR(ctx, j.PID, rec.cut[j.PID], file))
				}})
				continue
			}
			rec.done[j.PID] = true
			takes = append(takes, take{j.PID, true, file, func() (string, error) {
				n, err := recording.AssembleJFR(j.Dir, file)
				if err == nil && n == 0 {
					err = errors.New("no chunk in its repository folder")
				}
				return keptOrRemoved(file, err)
			}})
		}
	case recording.FormatGoTrace:
		if rec.windows && !rec.on {
			break // stopped: its last take had everything
		}
		file := filepath.Join(dir, window+recording.FormatGoTrace.Ext())
		takes = append(takes, take{0, false, file, func() (string, error) { return s.fetchTrace(ctx, rec, cfg.AdminAddr, file) }})
	default:
		return resp, fmt.Errorf("recording format %q: %w", rec.format, recording.ErrUnknownFormat)
	}
	for _, t := range takes {
		file, err := t.get()
		if err != nil {
			resp.Notes = append(resp.Notes, fmt.Sprintf("take %s: %v", filepath.Base(t.file), err))
		}
		if file == "" {
			continue
		}
		resp.Files = append(resp.Files, filepath.Base(file))
		if n := len(rec.pending); n > 0 && rec.pending[n-1].file == file {
			rec.pending[n-1].to = now // appended to: one read of the file covers both takes
		} else {
			rec.pending = append(rec.pending, pendingTake{file: file, from: rec.cut[t.key], to: now, dead: t.dead})
		}
		rec.cut[t.key] = now
	}
	if deferRead {
		return resp, nil
	}
	var spans []rundir.InsideSpan
	for _, p := range rec.pending {
		got, err := s.opts.Recordings.Read(ctx, rec.format, p.file, recording.Options{DataDir: cfg.Dir, Logger: s.log})
		if err != nil {
			resp.Notes = append(resp.Notes, err.Error())
			continue
		}
		from, to := int64(math.MinInt64), p.to.UnixNano()
		if !p.from.IsZero() { // the first take has everything (a zero Time has no UnixNano)
			from = p.from.UnixNano()
		}
		for _, sp := range got {
			// A dump holds whole chunks (a trace, the recorder's whole window): only what the
			// earlier takes did not have. By its end: an event is written when it ends, so
			// one still under way at this take is in the next.
			if end := sp.AtNs + sp.DurNs; end >= from && (p.dead || end < to) {
				spans = append(spans, sp)
			}
		}
	}
	rec.pending = nil
	// The next take starts a file of its own with the recorder's whole window: a span under way
	// at this take ends in it, and its start is in the window (the cut keeps what is new).
	rec.traceFile, rec.traceLast = "", 0
	if len(spans) > 0 {
		iw, err := rundir.CreateInside(filepath.Join(s.opts.Dir, rundir.InsideFile))
		if err != nil {
			return resp, err
		}
		for _, sp := range spans {
			iw.Write(sp)
		}
		if err := iw.Close(); err != nil {
			return resp, fmt.Errorf("write inside file: %w", err)
		}
	}
	resp.Spans = len(spans)
	return resp, nil
}

// keptOrRemoved is a take's file when it was written, and removes it when it was not.
func keptOrRemoved(file string, err error) (string, error) {
	if err != nil {
		os.Remove(file)
		return "", err
	}
	return file, nil
}

// alive: a process with this pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // not Linux's /proc: the signal answered
	}
	// pid (comm) S ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z'
		}
	}
	return true
}

// fetchTrace takes the engine's GET /trace: the generations of its window that no earlier take
// of this file has, appended to rec.traceFile, or into file when there is none yet or the
// recorder dropped generations no take had (takes further apart than its window). It returns
// the file it wrote; "" when the window had nothing new.
func (s *Server) fetchTrace(ctx context.Context, rec *recorder, adminAddr, file string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+adminAddr+engine.AdminTrace, nil)
	if err != nil {
		return "", err
	}
	engine.AuthorizeAdmin(req, s.adminToken)
	resp, err := s.engine.proxy.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", engine.AdminTrace, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return "", fmt.Errorf("GET %s: %s: %s (the engine's flight recorder is off?)", engine.AdminTrace, resp.Status, b)
	}
	var (
		f    *os.File
		base int64 // the file's size before this take's generations
	)
	c, err := recording.CopyGoTraceGens(resp.Body, rec.traceLast, func(header []byte, first uint64) (io.Writer, error) {
		var err error
		if rec.traceFile != "" && first == rec.traceLast+1 {
			if f, err = os.OpenFile(rec.traceFile, os.O_WRONLY|os.O_APPEND, 0); err != nil {
				return nil, err
			}
			st, err := f.Stat()
			if err != nil {
				return nil, err
			}
			base, file = st.Size(), rec.traceFile
			return f, nil
		}
		if f, err = os.Create(file); err != nil {
			return nil, err
		}
		base = int64(len(header))
		_, err = f.Write(header)
		return f, err
	})
	if f != nil {
		if err != nil {
			// Whole generations were written before the error: the file stays one valid trace.
			if terr := f.Truncate(base + c.Bytes); terr != nil {
				err = errors.Join(err, terr)
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		err = fmt.Errorf("GET %s: %w", engine.AdminTrace, err)
	}
	if c.Bytes == 0 {
		if f != nil && file != rec.traceFile {
			os.Remove(file) // a new file with no whole generation in it
		}
		return "", err // nothing newer than the last take's, or nothing whole
	}
	rec.traceFile, rec.traceLast = file, c.Last
	return file, err
}

// TakeRecording asks the agent to take the engine's recording after a window (POST
// /engine/recording).
func (c *Client) TakeRecording(ctx context.Context, req RecordingRequest) (RecordingResponse, error) {
	var out RecordingResponse
	err := c.do(ctx, http.MethodPost, "/engine/recording", req, &out)
	return out, err
}

// startRecorder starts a recorder that runs only around windows (RecordingRequest.Start): a Go
// engine's POST /trace/start. A recorder that always runs is left as it is.
func (s *Server) startRecorder(ctx context.Context, rec *recorder, cfg engine.Config) (RecordingResponse, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.windows {
		return RecordingResponse{Notes: []string{"the recorder runs throughout (not started for windows)"}}, nil
	}
	var resp RecordingResponse
	switch rec.format {
	case recording.FormatGoTrace:
		if err := s.switchTrace(ctx, cfg.AdminAddr, engine.AdminTraceStart); err != nil {
			return resp, err
		}
	case recording.FormatJFR:
		refused, err := s.startJFR(ctx)
		if err != nil {
			return resp, err
		}
		for _, err := range refused {
			resp.Notes = append(resp.Notes, err.Error())
		}
	default:
		return resp, fmt.Errorf("recording format %q: %w", rec.format, ErrNoWindows)
	}
	rec.on = true
	return resp, nil
}

// startJFR starts rig's recording in each of the engine's JVMs, into the node's recordings
// folder: at a window's start and again in a JVM relaunched inside a window. err: no JVM to
// start it in; refused: one error per JVM that did not start it.
func (s *Server) startJFR(ctx context.Context) (refused []error, err error) {
	jvms, err := s.engineJVMs()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.opts.Dir, rundir.RecordingsDir)
	for _, pid := range jvms {
		if err := recording.StartJFR(ctx, pid, dir); err != nil {
			refused = append(refused, err)
		}
	}
	return refused, nil
}

// engineJVMs are the engine's JVMs: its process, or those under it.
func (s *Server) engineJVMs() ([]int, error) {
	e, err := s.currentEngine()
	if err != nil {
		return nil, err
	}
	jvms := recording.JVMsUnder(e.PID())
	if len(jvms) == 0 {
		return nil, fmt.Errorf("no JVM (a process named java) is the engine's process %d or under it", e.PID())
	}
	return jvms, nil
}

// stopRecorder stops a recorder that runs only around windows after its take; the next take
// starts a trace file of its own (a restarted recorder numbers its generations afresh).
func (s *Server) stopRecorder(ctx context.Context, rec *recorder, cfg engine.Config) error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.windows || !rec.on {
		return nil
	}
	rec.on = false
	rec.traceFile, rec.traceLast = "", 0
	if rec.format == recording.FormatJFR {
		jvms, err := s.engineJVMs()
		if err != nil {
			return nil // no JVM left to stop (killed in the window)
		}
		var errs []error
		for _, pid := range jvms {
			errs = append(errs, recording.StopJFR(ctx, pid))
		}
		return errors.Join(errs...)
	}
	return s.switchTrace(ctx, cfg.AdminAddr, engine.AdminTraceStop)
}

// ErrNoWindows: the format's recorder cannot be run only around windows.
var ErrNoWindows = errors.New("this recorder cannot be started and stopped around windows")

// switchTrace posts path (engine.AdminTraceStart or AdminTraceStop) to the engine.
func (s *Server) switchTrace(ctx context.Context, adminAddr, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+adminAddr+path, nil)
	if err != nil {
		return err
	}
	engine.AuthorizeAdmin(req, s.adminToken)
	resp, err := s.engine.proxy.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, b)
	}
	return nil
}

// rearmRecorder starts a relaunched engine's recorder when the agent's is on: the relaunch is
// inside a restart window. The engine answers its admin API before it restores; until then the
// start is retried.
func (s *Server) rearmRecorder(rec *recorder, cfg engine.Config) {
	rec.mu.Lock()
	on := rec.windows && rec.on
	rec.mu.Unlock()
	if !on {
		return
	}
	start := func(ctx context.Context) error { return s.switchTrace(ctx, cfg.AdminAddr, engine.AdminTraceStart) }
	if rec.format == recording.FormatJFR {
		start = func(ctx context.Context) error {
			refused, err := s.startJFR(ctx)
			return errors.Join(append(refused, err)...)
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), rearmTimeout)
		defer cancel()
		var err error
		for {
			rec.mu.Lock()
			on := rec.on
			rec.mu.Unlock()
			if !on {
				return // stopped meanwhile: the window ended
			}
			if err = start(ctx); err == nil {
				rec.mu.Lock()
				// The relaunched recorder numbers its generations afresh: a file of its own.
				rec.traceFile, rec.traceLast = "", 0
				rec.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
				s.log.Warn("start the relaunched engine's recorder", "err", err)
				return
			case <-time.After(rearmEvery):
			}
		}
	}()
}

// rearmTimeout bounds the wait for a relaunched engine's admin API (or its JVM's attach
// listener), retried every rearmEvery.
const (
	rearmTimeout = 30 * time.Second
	rearmEvery   = 50 * time.Millisecond
)
