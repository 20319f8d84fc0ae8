// Package agent is the per-node agent (docs/architecture.md, "Agent API"): an HTTP+JSON API on a
// Unix socket in a 0700 folder on the node (internal/ctlsock), reached by the controller through
// Transport.Dial — directly on the local target, by OpenSSH's stream-local forwarding on remote
// nodes — so only the user who runs the controller can reach it (docs/security.md).
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/internal/ctlsock"
	"github.com/rig-dev/rig/recording"
)

// APIVersion is the path prefix of every endpoint.
const APIVersion = "/v1"

// SocketPath is where the agent whose folder is dir listens unless told otherwise:
// dir/ctl/agent.sock, in a folder only its owner can enter.
func SocketPath(dir string) string { return filepath.Join(dir, "ctl", "agent.sock") }

// Identity headers: every answer names the agent's node and the run holding its lease, and the
// controller sends its run with every request, so a controller that reached the wrong agent (or
// an agent another run holds) finds out on the first answer (client.go).
const (
	HeaderNode = "Rig-Node"
	HeaderRun  = "Rig-Run"
)

// Options configure an agent.
type Options struct {
	Socket string // the control socket's path (default SocketPath(Dir))
	Dir    string // the node's folder: engine runs, logs, tuning state
	Root   string // filesystem root for /proc and /sys ("/" on a real node; a fake tree in tests)
	Binary string // the rig binary to start the engine with (default: this executable)
	Logger *slog.Logger
	Node   string // this node's name, reported by ping and stamped on engine transitions
	// SysrqTrigger is the file a power cut writes "b" to (/proc/sysrq-trigger on a stack's
	// node: power.go); "" (the local target, tests) refuses every power cut.
	SysrqTrigger string
	// PowerProc is where a power cut reads the boot id and kernel.sysrq (and sets its reboot
	// bit): ROOT/proc when empty. Tests of a whole run give each node a fake one, the rest of
	// the agent (facts, samples) keeping the real /proc.
	PowerProc string
	// Listener, when set, is served instead of listening on Socket (tests).
	Listener net.Listener
	// Recordings are the recording formats the agent reads its engine's recordings in (the
	// binary's offer); a take of another format says so in its notes.
	Recordings *recording.Registry
	// RunQueue, where set, is this agent's part of a run-queue program its starter shares among
	// the agents on this kernel (InheritedRunQueue); nil: the agent loads one of its own.
	RunQueue *runq.Handle
}

// Where several agents run on one kernel (the local target), their starter loads one run-queue
// program for all (runq.OpenShared) and hands each agent its maps as the file descriptors
// RunQueueFD, RunQueueFD+1 and RunQueueFD+2 (runq.Shared.Files, in order), with these flags
// saying which tracer it is and the program's threshold: the program then runs once a switch,
// not once per agent.
const (
	RunQueueFD          = 3 // the first of exec.Cmd.ExtraFiles
	FlagRunQueueIndex   = "runq-index"
	FlagRunQueueMinWait = "runq-min-wait"
)

// InheritedRunQueue is the handle of an agent started with the flags above, its descriptors
// made close-on-exec at once: the engine, load generator and hogs the agent starts must not
// inherit the program's maps (an engine could then rewrite which threads are tracked).
func InheritedRunQueue(index int, minWait time.Duration) (*runq.Handle, error) {
	if index < 0 || minWait <= 0 {
		return nil, fmt.Errorf("--%s %d --%s %v: want a tracer index from 0 and a threshold above 0", FlagRunQueueIndex, index, FlagRunQueueMinWait, minWait)
	}
	h := &runq.Handle{Slots: RunQueueFD, Ring: RunQueueFD + 1, Lost: RunQueueFD + 2, Index: index, MinWait: minWait}
	for _, fd := range []int{h.Slots, h.Ring, h.Lost} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, fmt.Errorf("--%s: file descriptor %d, a run-queue map, is not open: %w", FlagRunQueueIndex, fd, err)
		}
		unix.CloseOnExec(fd)
	}
	return h, nil
}

// Server is a running agent.
type Server struct {
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	started time.Time
	engine  engineSide // engine_handlers.go
	lease   leaseSide  // lease.go
	hogs    hogSide    // hog_handlers.go
	// adminToken is the engine admin API's secret for this agent's lifetime (engine/contract.go).
	adminToken string
}

// PingResponse answers GET /v1/ping.
type PingResponse struct {
	Node    string    `json:"node,omitempty"`
	Run     string    `json:"run,omitempty"` // the run holding the agent's lease, if any
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
	if opts.Socket == "" {
		opts.Socket = SocketPath(opts.Dir)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("agent dir: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("agent: make the engine admin secret: %w", err)
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), started: time.Now(), adminToken: hex.EncodeToString(tok)}
	s.mux.HandleFunc("GET "+APIVersion+"/ping", s.handlePing)
	s.registerEngineHandlers()
	s.registerNodeHandlers()
	s.registerDiskHandlers()
	s.registerPowerHandlers()
	s.registerHogHandlers()
	s.registerLeaseHandlers(ctx)
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = ctlsock.Listen(opts.Socket); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	// Requests inherit ctx, so long polls and proxied calls end when the agent stops instead of
	// holding up Shutdown.
	srv := &http.Server{Handler: s.identify(s.mux), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	s.log.Info("agent listening", "addr", ln.Addr().String(), "dir", opts.Dir)
	err := srv.Serve(ln)
	s.undoOnExit()
	s.stopHogs(allRuns, true)
	s.shutdownEngine()
	s.shutdownNode()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, PingResponse{Node: s.opts.Node, Run: s.lease.holder(), Version: Version, PID: os.Getpid(), Dir: s.opts.Dir, Started: s.started, Now: time.Now()})
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
