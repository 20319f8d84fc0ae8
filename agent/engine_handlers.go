package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent/supervise"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

// Engine endpoints (docs/architecture.md, "Agent API": engine, transitions, clock, collect):
//
//	POST /v1/engine/start        StartRequest -> EngineProcess
//	POST /v1/engine/signal       EngineSignalRequest -> EngineProcess
//	POST /v1/engine/relaunch     -> EngineProcess
//	POST /v1/engine/stop         EngineStopRequest (optional) -> EngineStopResponse
//	GET  /v1/engine/status       -> EngineState
//	GET  /v1/engine/transitions  ?since=SEQ&wait=5s -> TransitionsResponse (long poll)
//	POST /v1/engine/proxy        ?path=/snapshot|/step-down -> the engine's own answer
//	GET  /v1/engine/proxy        ?path=/status|/metrics[&hash=1] -> the engine's own answer
//	GET  /v1/clock               -> ClockResponse
//	GET  /v1/collect             ?all=1&max_file=BYTES -> tar.gz of the node folder

// StartRequest starts the engine with a config.
type StartRequest struct {
	Config engine.Config `json:"config"`
	Binary string        `json:"binary,omitempty"` // default: the agent's own executable
	Args   []string      `json:"args,omitempty"`   // default: engine --config {config}
	Env    []string      `json:"env,omitempty"`    // extra KEY=VALUE pairs

	// Command is the command driver (engine.driver: command): binary, argument, environment and
	// config file templates rendered on the node with Settings (see engine/command).
	Command  *command.Spec     `json:"command,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`

	// Recording, when set, is the engine's own recorder whose recording the agent takes after
	// each window (POST /engine/recording): jfr starts Java Flight Recorder in a JVM engine
	// through recording.JVMOptionsEnv; go_trace reads a Go engine's GET /trace.
	Recording recording.Format `json:"recording,omitempty"`
	// RecordingWindows: the recorder runs only when the runner asks (RecordingRequest.Start,
	// Stop), around the run's windows; a Go engine's starts idle (engine.Config.FlightRecorderIdle).
	RecordingWindows bool `json:"recording_windows,omitempty"`

	// ClusterSecret is the run's engine secret (engine.ClusterSecretEnv), the same for every
	// engine of one run and made by its controller, so it holds on every target and no agent
	// that outlives a run carries it into the next. Like the admin token it reaches the engine
	// only in its environment: never argv, a log, the journal or a state answer.
	ClusterSecret string `json:"cluster_secret,omitempty"`
}

// EngineProcess answers start, relaunch and signal: the process now current.
type EngineProcess struct {
	PID    int `json:"pid"`
	Launch int `json:"launch"` // 1-based launch number
}

// EngineSignalRequest names a signal: KILL, TERM, INT, HUP, QUIT, STOP, CONT, USR1, USR2.
type EngineSignalRequest struct {
	Signal string `json:"signal"`
}

// EngineStopRequest bounds the wait between TERM and KILL.
type EngineStopRequest struct {
	Grace string `json:"grace,omitempty"` // Go duration; default 10s
}

// EngineStopResponse says how the engine ended (nil exit: it was never started).
type EngineStopResponse struct {
	Exit *rundir.ExitStatus `json:"exit"`
}

// EngineState answers GET /v1/engine/status: the process, the last polled engine status and
// the journal's last sequence number (a cursor for "transitions from now on").
type EngineState struct {
	supervise.State
	LastSeq uint64 `json:"last_seq"`
}

// TransitionsResponse answers GET /v1/engine/transitions.
type TransitionsResponse struct {
	Transitions []rundir.Transition `json:"transitions"`
	LastSeq     uint64              `json:"last_seq"`
}

// ClockResponse is the node's clock.
type ClockResponse struct {
	Now time.Time `json:"now"`
}

// MaxTransitionsWait caps a long poll.
const MaxTransitionsWait = time.Minute

// proxyPaths are the engine admin calls the controller may make through the agent.
var proxyPaths = map[string]map[string]bool{
	http.MethodPost: {engine.AdminSnapshot: true, engine.AdminStepDown: true, engine.AdminGC: true},
	http.MethodGet:  {engine.AdminStatus: true, engine.AdminMetrics: true, engine.AdminOrders: true, engine.AdminTrace: true, engine.AdminTransport: true},
}

// engineSide is the agent's engine state: one journal for the node (so sequence numbers span
// every start) and the engine of the latest start.
type engineSide struct {
	mu       sync.Mutex
	journal  *supervise.Journal
	eng      *supervise.Engine
	dataDirs map[string]bool // every engine data folder configured, for collect's exclusions
	proxy    http.Client
	closed   bool      // the agent is stopping: no new engine
	rec      *recorder // the engine's recording, when the start asked for one
}

func (s *Server) registerEngineHandlers() {
	s.engine.dataDirs = map[string]bool{}
	p := APIVersion
	s.mux.HandleFunc("POST "+p+"/engine/start", s.handleEngineStart)
	s.mux.HandleFunc("POST "+p+"/engine/signal", s.handleEngineSignal)
	s.mux.HandleFunc("POST "+p+"/engine/relaunch", s.handleEngineRelaunch)
	s.mux.HandleFunc("POST "+p+"/engine/stop", s.handleEngineStop)
	s.mux.HandleFunc("GET "+p+"/engine/status", s.handleEngineStatus)
	s.mux.HandleFunc("GET "+p+"/engine/transitions", s.handleTransitions)
	s.mux.HandleFunc("POST "+p+"/engine/proxy", s.handleEngineProxy)
	s.mux.HandleFunc("GET "+p+"/engine/proxy", s.handleEngineProxy)
	s.mux.HandleFunc("POST "+p+"/engine/recording", s.handleRecording)
	s.mux.HandleFunc("GET "+p+"/clock", s.handleClock)
	s.mux.HandleFunc("GET "+p+"/collect", s.handleCollect)
}

// shutdownEngine stops the engine when the agent stops: an agent never leaves an engine behind.
func (s *Server) shutdownEngine() {
	s.engine.mu.Lock()
	e, j := s.engine.eng, s.engine.journal
	s.engine.closed = true
	s.engine.mu.Unlock()
	if e != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.Close(ctx, 3*time.Second); err != nil {
			s.log.Error("stop engine at agent shutdown", "err", err)
		}
		cancel()
	}
	if j != nil {
		j.Close()
	}
}

// journalLocked opens the node's journal once; s.engine.mu is held.
func (s *Server) journalLocked() (*supervise.Journal, error) {
	if s.engine.journal == nil {
		j, err := supervise.OpenJournal(filepath.Join(s.opts.Dir, rundir.TransitionsFile))
		if err != nil {
			return nil, err
		}
		s.engine.journal = j
	}
	return s.engine.journal, nil
}

func (s *Server) currentEngine() (*supervise.Engine, error) {
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if s.engine.eng == nil {
		return nil, supervise.ErrNotStarted
	}
	return s.engine.eng, nil
}

// engineErrCode maps supervisor errors to HTTP: bad input 400, wrong state 409.
func engineErrCode(err error) int {
	switch {
	case errors.Is(err, supervise.ErrBadSpec), errors.Is(err, supervise.ErrBadSignal):
		return http.StatusBadRequest
	case errors.Is(err, supervise.ErrRunning), errors.Is(err, supervise.ErrNotRunning), errors.Is(err, supervise.ErrNotStarted),
		errors.Is(err, supervise.ErrClosed):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (s *Server) handleEngineStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if s.engine.closed {
		writeErr(w, http.StatusServiceUnavailable, errors.New("start: the agent is stopping"))
		return
	}
	if old := s.engine.eng; old != nil && old.Running() {
		writeErr(w, http.StatusConflict, fmt.Errorf("start: %w (pid %d): stop it first", supervise.ErrRunning, old.PID()))
		return
	}
	j, err := s.journalLocked()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	node := s.opts.Node
	if node == "" {
		node = req.Config.Node
	}
	binary := req.Binary
	if binary == "" && req.Command == nil {
		binary = s.opts.Binary
	}
	s.engine.rec = nil
	if req.Recording != "" {
		env, err := s.recordingEnv(req.Recording, req.RecordingWindows)
		if err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		req.Env = append(env, req.Env...) // the request's own entries win
		if req.RecordingWindows && req.Recording == recording.FormatGoTrace {
			req.Config.FlightRecorderIdle = true // started around each window
		}
	}
	e, err := supervise.StartEngine(r.Context(), supervise.Spec{
		Node: node, Binary: binary, Args: req.Args, Config: req.Config, Dir: s.opts.Dir,
		Env: req.Env, Command: req.Command, Settings: req.Settings, AdminToken: s.adminToken, ClusterSecret: req.ClusterSecret, Journal: j, Logger: s.log,
	})
	if err != nil {
		writeErr(w, engineErrCode(err), err)
		return
	}
	if old := s.engine.eng; old != nil {
		old.Close(r.Context(), time.Second) // exited already; releases its connections
	}
	s.engine.eng = e
	s.engine.dataDirs[e.Spec().Config.Dir] = true
	writeJSON(w, http.StatusOK, EngineProcess{PID: e.PID(), Launch: len(e.State().Launches)})
}

func (s *Server) handleEngineSignal(w http.ResponseWriter, r *http.Request) {
	var req EngineSignalRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	sig, err := supervise.ParseSignal(req.Signal)
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("signal: %w", err))
		return
	}
	e, err := s.currentEngine()
	if err == nil {
		err = e.Signal(sig)
	}
	if err != nil {
		writeErr(w, engineErrCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, EngineProcess{PID: e.PID(), Launch: len(e.State().Launches)})
}

func (s *Server) handleEngineRelaunch(w http.ResponseWriter, r *http.Request) {
	e, err := s.currentEngine()
	var pid int
	if err == nil {
		pid, err = e.Relaunch(r.Context())
	}
	if err != nil {
		writeErr(w, engineErrCode(err), err)
		return
	}
	s.engine.mu.Lock()
	rec := s.engine.rec
	s.engine.mu.Unlock()
	if rec != nil {
		s.rearmRecorder(rec, e.Spec().Config)
	}
	writeJSON(w, http.StatusOK, EngineProcess{PID: pid, Launch: len(e.State().Launches)})
}

func (s *Server) handleEngineStop(w http.ResponseWriter, r *http.Request) {
	var req EngineStopRequest
	if r.ContentLength != 0 {
		if err := readJSON(r, &req); err != nil && !errors.Is(err, io.EOF) {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
	}
	var grace time.Duration
	if req.Grace != "" {
		d, err := time.ParseDuration(req.Grace)
		if err != nil || d <= 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("grace %q: want a positive Go duration such as 10s", req.Grace))
			return
		}
		grace = d
	}
	e, err := s.currentEngine()
	if errors.Is(err, supervise.ErrNotStarted) {
		writeJSON(w, http.StatusOK, EngineStopResponse{}) // stop is cleanup: nothing to stop is fine
		return
	}
	exit, err := e.Stop(r.Context(), grace)
	if err != nil {
		writeErr(w, engineErrCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, EngineStopResponse{Exit: exit})
}

func (s *Server) handleEngineStatus(w http.ResponseWriter, r *http.Request) {
	s.engine.mu.Lock()
	e := s.engine.eng
	j, err := s.journalLocked()
	s.engine.mu.Unlock()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	var st EngineState
	if e != nil {
		st.State = e.State()
	} else {
		st.Node, st.Dir, st.Launches = s.opts.Node, s.opts.Dir, []supervise.Launch{}
	}
	_, st.LastSeq = j.Since(^uint64(0))
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleTransitions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("since %q: want a sequence number (0 for all)", v))
			return
		}
		since = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxTransitionsWait {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("wait %q: want a Go duration from 0 to %s", v, MaxTransitionsWait))
			return
		}
		wait = d
	}
	s.engine.mu.Lock()
	j, err := s.journalLocked()
	s.engine.mu.Unlock()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	var resp TransitionsResponse
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		resp.Transitions, resp.LastSeq = j.Wait(ctx, since)
		cancel()
	} else {
		resp.Transitions, resp.LastSeq = j.Since(since)
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleEngineProxy forwards a call to the engine's admin API on this node's loopback (the
// controller reaches the admin API only through the agent): POST /snapshot and /step-down, GET
// /status and /metrics. Query parameters other than path go along (GET /status?hash=1).
func (s *Server) handleEngineProxy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	path := q.Get("path")
	if !proxyPaths[r.Method][path] {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("proxy %s path %q: want POST /snapshot or /step-down, or GET /status, /metrics or /orders", r.Method, path))
		return
	}
	q.Del("path")
	e, err := s.currentEngine()
	if err == nil && !e.Running() {
		err = fmt.Errorf("proxy %s: %w", path, supervise.ErrNotRunning)
	}
	if err != nil {
		writeErr(w, engineErrCode(err), err)
		return
	}
	u := "http://" + e.Spec().Config.AdminAddr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if r.Method == http.MethodPost {
		body = r.Body
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u, body)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	engine.AuthorizeAdmin(req, s.adminToken)
	if ct := r.Header.Get("Content-Type"); ct != "" && body != nil {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := s.engine.proxy.Do(req)
	if err != nil {
		writeErr(w, http.StatusBadGateway, fmt.Errorf("engine admin %s %s: %w", r.Method, path, err))
		return
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (s *Server) handleClock(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ClockResponse{Now: time.Now()})
}
