// Package agent is the per-node agent (DESIGN 4.3): an HTTP+JSON API bound to 127.0.0.1 on the
// node and reached by the controller through Transport.Dial, so it is never exposed beyond the
// node (on AWS it sits behind SSH).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// APIVersion is the path prefix of every endpoint.
const APIVersion = "/v1"

// DefaultPort is where the agent listens when not told otherwise (the local target gives every
// node its own port, since all nodes share one loopback).
const DefaultPort = 7400

// Options configure an agent.
type Options struct {
	Listen string // host:port; must be a loopback address
	Dir    string // the node's folder: engine runs, logs, tuning state
	Root   string // filesystem root for /proc and /sys ("/" on a real node; a fake tree in tests)
	Binary string // the rig binary to start the engine with (default: this executable)
	Logger *slog.Logger
	Node   string // this node's name, reported by ping and stamped on engine transitions
	// Listener, when set, is served instead of listening on Listen (tests pass 127.0.0.1:0 and
	// read the port from it). It must be bound to a loopback address too.
	Listener net.Listener
}

// Server is a running agent.
type Server struct {
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	started time.Time
	engine  engineSide // engine_handlers.go
}

// PingResponse answers GET /v1/ping.
type PingResponse struct {
	Node    string    `json:"node,omitempty"`
	Version string    `json:"version"`
	PID     int       `json:"pid"`
	Dir     string    `json:"dir"`
	Started time.Time `json:"started"`
	Now     time.Time `json:"now"` // the node's clock, for offset measurement
}

// Version is set by the command at start-up (build info).
var Version = "dev"

// Serve runs the agent until ctx is done.
func Serve(ctx context.Context, opts Options) error {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Listener != nil {
		opts.Listen = opts.Listener.Addr().String()
	}
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return fmt.Errorf("agent listen address %q: %w", opts.Listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("agent listen address %q: must be a loopback address (the agent is reached through the transport, never directly)", opts.Listen)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("agent dir: %w", err)
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), started: time.Now()}
	s.mux.HandleFunc("GET "+APIVersion+"/ping", s.handlePing)
	s.registerEngineHandlers()
	s.registerNodeHandlers()
	s.registerDiskHandlers()
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", opts.Listen); err != nil {
			return fmt.Errorf("agent listen: %w", err)
		}
	}
	// Requests inherit ctx, so long polls and proxied calls end when the agent stops instead of
	// holding up Shutdown.
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	s.log.Info("agent listening", "addr", ln.Addr().String(), "dir", opts.Dir)
	err = srv.Serve(ln)
	s.shutdownEngine()
	s.shutdownNode()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, PingResponse{Node: s.opts.Node, Version: Version, PID: os.Getpid(), Dir: s.opts.Dir, Started: s.started, Now: time.Now()})
}

// apiError is the body of every non-2xx answer.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Error: err.Error()})
}

// readJSON decodes a request body strictly: unknown fields are errors, so a newer controller
// talking to an older agent fails loudly instead of silently dropping a setting.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode request: %w", err)
	}
	return nil
}
