// Package server exposes a replica: the client protocol (engine/wire over TCP, and datagrams over
// UDP on the same address, see udp.go) and the admin API
// of the engine contract (GET /status, GET /changes, POST /snapshot, POST /step-down, GET /metrics)
// on loopback.
package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/trace"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/wire"
)

// applyTimeout bounds how long a command may wait to be enqueued in raft.
const applyTimeout = 10 * time.Second

// Server serves one replica.
type Server struct {
	node  *replica.Node
	log   *slog.Logger
	token string
	wg    sync.WaitGroup
	udp   *udpIngress           // nil until Run opened it
	chg   *changeLog            // GET /changes
	fr    *trace.FlightRecorder // GET /trace; nil: not recording
	frMu  sync.Mutex            // the recorder writes one snapshot at a time
}

// The reference engine's flight recorder (engine.Config.FlightRecorder): how far back a dump
// reaches unless the config says (its MinAge), and the memory it may hold (its MaxBytes, which
// wins over MinAge: a busy engine's window is shorter). rig bench recording measures the rate a
// loaded engine fills it at.
const (
	FlightRecorderWindow = 60 * time.Second
	FlightRecorderBytes  = engine.FlightRecorderBytes
)

// NewFlightRecorder is the engine's flight recorder for cfg (not started), or nil when cfg asks
// for none.
func NewFlightRecorder(cfg engine.Config) (*trace.FlightRecorder, error) {
	if !cfg.FlightRecorder {
		return nil, nil
	}
	window := FlightRecorderWindow
	if cfg.FlightRecorderWindow != "" {
		d, err := time.ParseDuration(cfg.FlightRecorderWindow)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("flight_recorder_window %q: want a positive Go duration, e.g. 60s", cfg.FlightRecorderWindow)
		}
		window = d
	}
	return trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: window, MaxBytes: FlightRecorderBytes}), nil
}

// WithFlightRecorder serves fr's window at GET engine.AdminTrace, and starts and stops it at
// POST engine.AdminTraceStart and AdminTraceStop. The caller starts it (unless the config keeps
// it idle until asked) and stops it at the end; its cost is measured, not assumed, so it is not
// on by default.
func (s *Server) WithFlightRecorder(fr *trace.FlightRecorder) *Server {
	s.fr = fr
	return s
}

// switchRecorder starts or stops the flight recorder; either is a no-op when it already is so
// (an agent asks again after a relaunch, or at a run's end). Answers {"recording": bool}.
func (s *Server) switchRecorder(w http.ResponseWriter, on bool) {
	if s.fr == nil {
		http.Error(w, "no flight recorder: the engine was started without one", http.StatusNotFound)
		return
	}
	s.frMu.Lock()
	defer s.frMu.Unlock()
	switch {
	case on && !s.fr.Enabled():
		if err := s.fr.Start(); err != nil {
			http.Error(w, "start the flight recorder: "+err.Error(), http.StatusInternalServerError)
			return
		}
	case !on && s.fr.Enabled():
		s.fr.Stop()
	}
	writeJSON(w, http.StatusOK, map[string]bool{"recording": s.fr.Enabled()})
}

// New returns a server for node whose admin API answers only requests bearing adminToken (the
// agent's secret, engine.AdminTokenEnv); an empty token refuses every admin request.
func New(node *replica.Node, log *slog.Logger, adminToken string) *Server {
	return &Server{node: node, log: log, token: adminToken, chg: newChangeLog()}
}

// Run serves the client and admin listeners until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	cfg := s.node.Config()
	cl, err := net.Listen("tcp", cfg.ClientAddr)
	if err != nil {
		return fmt.Errorf("client listener: %w", err)
	}
	al, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		cl.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	udp, err := newUDPIngress(s.node, s.log)
	if err != nil {
		cl.Close()
		al.Close()
		return err
	}
	s.udp = udp
	uctx, ucancel := context.WithCancel(ctx)
	defer ucancel()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.chg.run(uctx, s.node) }()
	hs := &http.Server{Handler: engine.RequireAdminToken(s.token, s.adminMux()), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- hs.Serve(al) }()
	go func() { errc <- s.acceptClients(ctx, cl) }()
	go func() { errc <- udp.run(uctx) }()
	pending := 3
	select {
	case <-ctx.Done():
	case err = <-errc:
		pending--
	}
	cl.Close()
	al.Close()
	ucancel()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	// The accept loop must have returned before Wait: it is the one that calls wg.Add.
	for ; pending > 0; pending-- {
		if e := <-errc; err == nil {
			err = e
		}
	}
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Server) acceptClients(ctx context.Context, ln net.Listener) error {
	var conns sync.Map
	defer conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		conns.Store(c, nil)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conns.Delete(c)
			s.serveConn(ctx, c)
		}()
	}
}

// serveConn reads pipelined requests. Pings are answered here, by the reader, at once:
// raft's Apply blocks while the leader's loop is busy (a log append waiting for its sync), and
// a ping behind it would tell the client that a leader with a slow disk is gone. Commands go
// to one appender goroutine that hands them to raft in the order they arrived, so one
// connection's commands enter the log in the order they were sent (a preload's batches build
// the same book on every run); each is then waited for on its own goroutine, so raft batches the
// commands in flight into one log append (one sync per batch), and replies are written as they
// complete.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	var wmu sync.Mutex
	bw := bufio.NewWriterSize(c, 64<<10)
	reply := func(r *wire.Response) {
		wmu.Lock()
		defer wmu.Unlock()
		buf := wire.AppendResponse(nil, r)
		bw.Write(buf)
		bw.Flush()
	}
	// The queue bounds what one connection has read but not yet handed to raft; a full queue
	// stops the reader, which is the back-pressure a client sees from a slow leader.
	queue := make(chan queued, connQueue)
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		var inflight sync.WaitGroup
		defer inflight.Wait()
		for q := range queue {
			if !s.node.IsLeader() {
				reply(&wire.Response{Type: q.typ, Corr: q.corr, Status: wire.StatusNotLeader, Text: s.node.LeaderClientAddr()})
				continue
			}
			f := s.node.ApplyAsync(q.cmd, applyTimeout)
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				reply(s.answer(q.typ, q.corr, f))
			}()
		}
	}()
	defer func() { close(queue); <-appended }()
	for {
		// Each frame is read into its own buffer, which the queue then owns: a 1 MiB preload
		// batch goes to the log without a copy.
		buf, err := wire.ReadFrame(br, nil)
		if err != nil {
			return
		}
		// Checked, not decoded: the log takes the client's bytes and the FSM decodes them.
		typ, corr, err := wire.CheckRequest(buf)
		if err != nil {
			reply(&wire.Response{Status: wire.StatusRejected, Text: err.Error()})
			return // a malformed stream cannot be resynchronised
		}
		if typ == wire.TypePing {
			reply(&wire.Response{Type: wire.TypePing, Corr: corr, Status: wire.StatusOK})
			continue
		}
		queue <- queued{typ: typ, corr: corr, cmd: buf}
	}
}

// queued is a command read from a connection, waiting to be handed to raft.
type queued struct {
	typ  uint8
	corr uint64
	cmd  []byte
}

// connQueue is how many commands one connection may have read ahead of raft: more than a
// load generator keeps in flight at its highest rates over a stalled sync of a few hundred ms.
const connQueue = 4096

func (s *Server) answer(typ uint8, corr uint64, f raft.ApplyFuture) *wire.Response {
	r, err := replica.Wait(f)
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Not appended: the client resends to the leader it is pointed at.
		return &wire.Response{Type: typ, Corr: corr, Status: wire.StatusNotLeader, Text: s.node.LeaderClientAddr()}
	case err != nil:
		// Leadership lost mid-commit: the entry may or may not commit. The client resends to
		// the new leader; our probes are idempotent (IOC that crosses nothing).
		return &wire.Response{Type: typ, Corr: corr, Status: wire.StatusError, Text: err.Error()}
	}
	resp := r.Resp
	resp.Type, resp.Corr = typ, corr
	return &resp
}

func (s *Server) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+engine.AdminStatus, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		st := s.node.Status(q.Get("hash") == "1")
		if s.udp != nil {
			st.UDP = s.udp.status(q.Get("udp") == "1")
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET "+engine.AdminChanges, s.chg.serve)
	mux.HandleFunc("POST "+engine.AdminSnapshot, func(w http.ResponseWriter, r *http.Request) {
		snap, err := s.node.Snapshot(r.Context())
		if err != nil {
			s.adminErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, snap)
	})
	mux.HandleFunc("POST "+engine.AdminStepDown, func(w http.ResponseWriter, r *http.Request) {
		if err := s.node.StepDown(); err != nil {
			s.adminErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"leader": s.node.LeaderClientAddr()})
	})
	mux.HandleFunc("GET "+engine.AdminTrace, func(w http.ResponseWriter, r *http.Request) {
		if s.fr == nil {
			http.Error(w, "no flight recorder: the engine was started without one", http.StatusNotFound)
			return
		}
		s.frMu.Lock()
		defer s.frMu.Unlock()
		if !s.fr.Enabled() {
			http.Error(w, "the flight recorder is stopped (POST "+engine.AdminTraceStart+" starts it)", http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if _, err := s.fr.WriteTo(w); err != nil {
			s.log.Warn("flight recorder dump", "err", err) // the header is out: a torn body is all the caller sees
		}
	})
	mux.HandleFunc("POST "+engine.AdminTraceStart, func(w http.ResponseWriter, r *http.Request) {
		s.switchRecorder(w, true)
	})
	mux.HandleFunc("POST "+engine.AdminTraceStop, func(w http.ResponseWriter, r *http.Request) {
		s.switchRecorder(w, false)
	})
	mux.HandleFunc("POST "+engine.AdminGC, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, collectGarbage())
	})
	mux.HandleFunc("GET "+engine.AdminOrders, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.node.HeldOrders())
	})
	mux.HandleFunc("GET "+engine.AdminMetrics, func(w http.ResponseWriter, r *http.Request) {
		m := s.node.Metrics()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, k := range keys {
			fmt.Fprintf(w, "%s %g\n", k, m[k])
		}
	})
	return mux
}

func (s *Server) adminErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	// Leadership moved between the check and the append: the caller should ask the new leader.
	if errors.Is(err, replica.ErrNotLeader) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		code = http.StatusConflict
	}
	writeJSON(w, code, map[string]string{"error": err.Error(), "leader": s.node.LeaderClientAddr()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
