// Package supervise runs an engine as a child process of the agent (docs/architecture.md, "Agent
// API" and "Engine contract"): it writes the engine's config file, starts the process in its own
// process group with its output appended to a log file, signals, stops and relaunches it, and
// follows its change stream (GET /changes; GET /status every 20 ms for an engine without one),
// recording every change of phase, role and snapshot with the node's clock.
package supervise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/rundir"
)

// Errors callers act on (the agent maps them to HTTP status codes).
var (
	ErrBadSpec    = errors.New("bad engine spec")
	ErrNotStarted = errors.New("engine was never started")
	ErrRunning    = errors.New("engine is running")
	ErrNotRunning = errors.New("engine is not running")
	ErrClosed     = errors.New("engine supervisor is closed")
)

// Defaults.
const (
	DefaultPollInterval = 20 * time.Millisecond
	DefaultPollTimeout  = time.Second
	DefaultStopGrace    = 10 * time.Second
	// ConfigPlaceholder in Spec.Args is replaced by the config file's path.
	ConfigPlaceholder = "{config}"
)

// Spec says how to run an engine.
type Spec struct {
	Node   string   // name recorded in transitions (default: Config.Node)
	Binary string   // default: this executable (the one rig binary also holds the engine)
	Args   []string // default: engine --config <Dir>/engine.json; "{config}" is replaced by that path
	// Config is written as JSON to <Dir>/engine.json (0600). An empty Config.Dir becomes
	// <Dir>/data and a relative one is taken relative to Dir. AdminAddr must be a loopback
	// host:port: the agent watches the engine there.
	Config  engine.Config
	Dir     string   // the engine's folder (also its working directory)
	LogFile string   // stdout+stderr, appended (default: <Dir>/engine.log)
	Env     []string // extra KEY=VALUE pairs on top of the agent's environment
	// AdminToken is the secret the engine's admin API requires (engine.AdminTokenEnv): handed
	// to the engine in its environment and sent on every status poll. Never logged.
	AdminToken string
	// ClusterSecret is the run's engine secret (engine.ClusterSecretEnv), handed over the same
	// way: in the environment of every launch, never logged.
	ClusterSecret string

	// Command, when set, is the command driver: Binary (when empty), the arguments, more
	// environment and a config file are rendered from its templates at every launch, with
	// Settings and the node's addresses; the settings they carry are checked in /proc once the
	// process answers GET /status (Launch.Carriage).
	Command  *command.Spec
	Settings map[string]string

	PollInterval time.Duration // GET /status cadence for an engine without GET /changes, and retry wait (default 20 ms)
	PollTimeout  time.Duration // per poll (default 1 s)
	StopGrace    time.Duration // Stop's wait between TERM and KILL when not given (default 10 s)

	// Journal records transitions; nil opens <Dir>/transitions.jsonl, owned by the Engine and
	// closed by Close. The agent passes one journal to every start so sequence numbers continue.
	Journal *Journal
	Logger  *slog.Logger
}

// Launch is one start or relaunch of the process.
type Launch struct {
	N    int                `json:"n"` // 1-based
	PID  int                `json:"pid"`
	T    time.Time          `json:"t"` // just before fork+exec (node clock)
	Args []string           `json:"args"`
	Exit *rundir.ExitStatus `json:"exit,omitempty"`
	// Carriage: for the command driver, whether the process holds every setting its arguments
	// and environment carry, read from /proc at its first answer to GET /status.
	Carriage      []command.CarryResult `json:"carriage,omitempty"`
	CarriageError string                `json:"carriage_error,omitempty"`
}

// State is the process side and the last polled engine status.
type State struct {
	Node          string             `json:"node"`
	Running       bool               `json:"running"`
	Stopped       bool               `json:"stopped,omitempty"` // SIGSTOPped by the agent, not yet continued
	PID           int                `json:"pid,omitempty"`     // of the current (or last) launch
	Launches      []Launch           `json:"launches"`
	Exit          *rundir.ExitStatus `json:"exit,omitempty"` // of the last launch, once it exited
	Status        *engine.Status     `json:"status,omitempty"`
	StatusAt      *time.Time         `json:"status_at,omitempty"` // when Status was polled
	PollErrors    int                `json:"poll_errors"`         // failed polls since the last good one
	LastPollError string             `json:"last_poll_error,omitempty"`
	AdminAddr     string             `json:"admin_addr"`
	Dir           string             `json:"dir"`
	DataDir       string             `json:"data_dir"`
}

// Engine supervises one engine across its launches.
type Engine struct {
	spec       Spec // resolved
	configPath string
	log        *slog.Logger
	journal    *Journal
	ownJournal bool
	http       *http.Client

	opMu sync.Mutex // serializes launch, relaunch and stop

	mu       sync.Mutex
	cur      *proc
	launches []Launch
	obs      observed // what the polls showed last, for change detection
	last     *engine.Status
	lastAt   time.Time
	pollErrs int
	pollErr  string
	closed   bool // Close was called: no more launches

	cmdConfig string   // the command driver's config file, as rendered at the last launch
	cmdEnv    []string // and the environment its templates added
}

type observed struct {
	phase, role, snap, election, traps string
	at                                 time.Time // last poll (or launch) that showed these
}

type proc struct {
	n      int
	pid    int
	cmd    *exec.Cmd
	cancel context.CancelFunc // stops this launch's polls
	done   chan struct{}      // closed once exit is recorded
	exited bool               // gate for signals: set before the pid is reaped
	exit   *rundir.ExitStatus
	stop   bool // SIGSTOPped

	carry   []command.Carry // settings the command driver's args and env hold
	carried bool            // carriage checked
}

// StartEngine writes the config, starts the engine and begins watching it. ctx bounds the start
// only: the process runs until Stop, a signal, or the agent's death.
func StartEngine(ctx context.Context, spec Spec) (*Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	if err := resolve(&spec); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("start engine: create folder: %w", err)
	}
	e := &Engine{
		spec:       spec,
		configPath: filepath.Join(spec.Dir, rundir.EngineConfigFile),
		log:        spec.Logger,
		journal:    spec.Journal,
		http: &http.Client{Transport: &http.Transport{
			// One kept-alive connection for the change stream (or the polls) instead of a new
			// socket for each request.
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
			DialContext:         (&net.Dialer{Timeout: spec.PollTimeout}).DialContext,
		}},
	}
	if e.journal == nil {
		j, err := OpenJournal(filepath.Join(spec.Dir, rundir.TransitionsFile))
		if err != nil {
			return nil, fmt.Errorf("start engine: %w", err)
		}
		e.journal, e.ownJournal = j, true
	}
	e.opMu.Lock()
	defer e.opMu.Unlock()
	if err := e.launch(); err != nil {
		if e.ownJournal {
			e.journal.Close()
		}
		return nil, err
	}
	return e, nil
}

func resolve(s *Spec) error {
	if s.Dir == "" {
		return fmt.Errorf("%w: dir is empty", ErrBadSpec)
	}
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return fmt.Errorf("%w: dir %q: %v", ErrBadSpec, s.Dir, err)
	}
	s.Dir = dir
	if err := checkLoopback(s.Config.AdminAddr); err != nil {
		return fmt.Errorf("%w: config.admin_addr: %v", ErrBadSpec, err)
	}
	switch {
	case s.Config.Dir == "":
		s.Config.Dir = filepath.Join(s.Dir, "data")
	case !filepath.IsAbs(s.Config.Dir):
		s.Config.Dir = filepath.Join(s.Dir, s.Config.Dir)
	}
	if s.Node == "" {
		s.Node = s.Config.Node
	}
	if s.Binary == "" && s.Command != nil {
		s.Binary = s.Command.Binary
	}
	if s.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("start engine: find own executable: %w", err)
		}
		s.Binary = exe
	}
	if _, err := exec.LookPath(s.Binary); err != nil {
		return fmt.Errorf("%w: binary: %v", ErrBadSpec, err)
	}
	if s.Command != nil {
		if _, err := command.Check(*s.Command); err != nil {
			return fmt.Errorf("%w: command: %v", ErrBadSpec, err)
		}
	} else if len(s.Args) == 0 {
		s.Args = []string{"engine", "--config", ConfigPlaceholder}
	}
	if s.LogFile == "" {
		s.LogFile = filepath.Join(s.Dir, rundir.EngineLogFile)
	} else if !filepath.IsAbs(s.LogFile) {
		s.LogFile = filepath.Join(s.Dir, s.LogFile)
	}
	if s.PollInterval <= 0 {
		s.PollInterval = DefaultPollInterval
	}
	if s.PollTimeout <= 0 {
		s.PollTimeout = DefaultPollTimeout
	}
	if s.StopGrace <= 0 {
		s.StopGrace = DefaultStopGrace
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return nil
}

func checkLoopback(addr string) error {
	if addr == "" {
		return errors.New("empty: the agent watches the engine's GET /status there")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %v (want 127.0.0.1:PORT)", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil || port == "0" {
		return fmt.Errorf("%q: port must be 1-65535", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q: must be a loopback address (the admin API never leaves the node)", addr)
	}
	return nil
}

// writeConfig writes the config atomically, so an engine never reads half a file.
func (e *Engine) writeConfig() error {
	b, err := json.MarshalIndent(e.spec.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("encode engine config: %w", err)
	}
	if err := writeFileAtomic(e.configPath, append(b, '\n')); err != nil {
		return fmt.Errorf("write engine config %s: %w", e.configPath, err)
	}
	return nil
}

// writeFileAtomic writes b to path (0600: configs may hold what only the engine should read),
// synced, through a temporary file and a rename.
func writeFileAtomic(path string, b []byte) error {
	return atomicfile.Write(path, bytes.NewReader(b), atomicfile.Options{Perm: 0o600, Durable: true})
}

// PIDFile is the file in the node folder holding the running engine's pid.
const PIDFile = "engine.pid"

// launch starts a new process; opMu is held.
func (e *Engine) launch() error {
	if err := e.writeConfig(); err != nil {
		return err
	}
	args := make([]string, len(e.spec.Args))
	for i, a := range e.spec.Args {
		args[i] = strings.ReplaceAll(a, ConfigPlaceholder, e.configPath)
	}
	env := e.spec.Env
	var carry []command.Carry
	var cmdConfig string
	var cmdEnv []string
	if e.spec.Command != nil {
		r, configFile, err := e.render()
		if err != nil {
			return err
		}
		args, env, carry = r.Args, append(append([]string(nil), env...), r.Env...), r.Carry
		cmdConfig, cmdEnv = configFile, r.Env
	}
	logf, err := os.OpenFile(e.spec.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open engine log: %w", err)
	}
	defer logf.Close() // the child holds its own copy
	e.mu.Lock()
	n := len(e.launches) + 1
	e.mu.Unlock()
	fmt.Fprintf(logf, "--- rig agent: launch %d of %s %q at %s\n", n, e.spec.Binary, args, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(e.spec.Binary, args...)
	cmd.Dir = e.spec.Dir
	cmd.Env = append(os.Environ(), env...)
	if e.spec.AdminToken != "" {
		cmd.Env = append(cmd.Env, engine.AdminTokenEnv+"="+e.spec.AdminToken)
	}
	if e.spec.ClusterSecret != "" {
		cmd.Env = append(cmd.Env, engine.ClusterSecretEnv+"="+e.spec.ClusterSecret)
	}
	cmd.Stdout, cmd.Stderr = logf, logf // an *os.File: the child writes it directly, no copying goroutine
	cmd.SysProcAttr = sysProcAttr()
	t0 := time.Now()
	if err := startCmd(cmd); err != nil {
		return fmt.Errorf("start engine %s: %w", e.spec.Binary, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{n: n, pid: cmd.Process.Pid, cmd: cmd, cancel: cancel, done: make(chan struct{}), carry: carry}

	e.mu.Lock()
	e.cur = p
	e.cmdConfig, e.cmdEnv = cmdConfig, cmdEnv
	e.launches = append(e.launches, Launch{N: n, PID: p.pid, T: t0, Args: args})
	e.obs.at = t0 // the first poll's change happened after the launch
	e.pollErrs, e.pollErr = 0, ""
	e.record(rundir.Transition{T: t0, Launch: n, PID: p.pid, Kind: rundir.TransLaunch})
	e.mu.Unlock()
	e.log.Info("engine launched", "launch", n, "pid", p.pid, "binary", e.spec.Binary)
	// engine.pid lets the OS sampler follow the engine across relaunches.
	if err := atomicfile.WriteFile(filepath.Join(e.spec.Dir, PIDFile), []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		e.log.Warn("write engine pid file", "err", err)
	}

	go e.reap(p)
	go e.watch(ctx, p)
	return nil
}

// render makes the command driver's templates concrete for this node and writes its config
// file, returning that file's path.
func (e *Engine) render() (*command.Rendered, string, error) {
	c := e.spec.Command
	name := c.ConfigFile
	if name == "" {
		name = command.DefaultConfigFile
	}
	cfg := e.spec.Config
	d := command.Data{
		Node: cfg.Node, Dir: e.spec.Dir, DataDir: cfg.Dir, ConfigFile: filepath.Join(e.spec.Dir, name),
		GCLog:    filepath.Join(e.spec.Dir, command.GCLogName),
		RaftAddr: cfg.RaftAddr, ClientAddr: cfg.ClientAddr, AdminAddr: cfg.AdminAddr, Peers: cfg.Peers,
		Settings: e.spec.Settings, CauseSourcesOff: cfg.CauseSourcesOff,
	}
	r, err := c.Render(d)
	if err != nil {
		return nil, "", fmt.Errorf("%w: command: %v", ErrBadSpec, err)
	}
	if r.Config != nil {
		if err := writeFileAtomic(d.ConfigFile, r.Config); err != nil {
			return nil, "", fmt.Errorf("write engine config %s: %w", d.ConfigFile, err)
		}
	}
	return r, d.ConfigFile, nil
}

// record appends to the journal; e.mu is held, which keeps journal order = observation order.
func (e *Engine) record(t rundir.Transition) {
	t.Node = e.spec.Node
	if _, err := e.journal.Append(t); err != nil {
		e.log.Error("record engine transition", "err", err)
	}
}

func (e *Engine) reap(p *proc) {
	waitExited(p.pid)
	died := time.Now() // the exit itself, before reaping
	e.mu.Lock()
	p.exited = true // no signal goes to this pid from here on: it is about to be reaped
	e.mu.Unlock()
	err := p.cmd.Wait()
	es := exitStatus(p.cmd.ProcessState, err, died)
	es.LogTail = logTail(e.spec.LogFile, 1500)
	p.cancel()

	e.mu.Lock()
	p.exit = &es
	e.launches[p.n-1].Exit = &es
	e.record(rundir.Transition{T: es.T, Launch: p.n, PID: p.pid, Kind: rundir.TransPhase, From: e.obs.phase, To: rundir.PhaseDown, Exit: &es})
	// Role and snapshot start afresh: the next launch's first poll shows them as new.
	e.obs = observed{phase: rundir.PhaseDown, at: es.T}
	e.mu.Unlock()
	close(p.done)
	e.log.Info("engine exited", "launch", p.n, "pid", p.pid, "exit", es.Desc)
}

// logTail returns the last whole lines of at most max bytes of the file.
func logTail(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return ""
	}
	start := max(end-limit, 0)
	b := make([]byte, end-start)
	n, _ := f.ReadAt(b, start)
	b = b[:n]
	if start > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

func exitStatus(ps *os.ProcessState, err error, t time.Time) rundir.ExitStatus {
	es := rundir.ExitStatus{T: t, Code: -1}
	if ps == nil {
		es.Desc = fmt.Sprintf("wait: %v", err)
		return es
	}
	es.Desc = ps.String()
	es.Code = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		es.Signal = SignalName(ws.Signal())
		es.Core = ws.CoreDump()
	}
	return es
}

// watch follows the engine until the launch ends: through its change stream (GET /changes, a
// long poll the engine answers at each change, so an idle engine costs the agent one request
// per changesWait) or, for an engine without one, by polling GET /status every PollInterval.
func (e *Engine) watch(ctx context.Context, p *proc) {
	base := "http://" + e.spec.Config.AdminAddr
	var since uint64
	for ctx.Err() == nil {
		ch, err := e.changes(ctx, base, since)
		if errors.Is(err, errNoChangeStream) {
			e.log.Info("the engine has no change stream: polling its status", "every", e.spec.PollInterval)
			e.pollStatus(ctx, p, base+engine.AdminStatus)
			return
		}
		if !e.followed(p, ch, err) {
			return
		}
		if err != nil { // not up yet, or not answering: try again shortly
			select {
			case <-ctx.Done():
			case <-time.After(e.spec.PollInterval):
			}
			continue
		}
		since = ch.Version
	}
}

// changesWait is how long one GET /changes may wait for a change.
const changesWait = 10 * time.Second

// errNoChangeStream: the engine answered GET /changes with 404.
var errNoChangeStream = errors.New("engine has no GET /changes")

func (e *Engine) changes(ctx context.Context, base string, since uint64) (*engine.Changes, error) {
	var ch engine.Changes
	url := fmt.Sprintf("%s%s?since=%d&wait=%s", base, engine.AdminChanges, since, changesWait)
	code, err := e.get(ctx, url, changesWait+e.spec.PollTimeout, &ch)
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		return nil, errNoChangeStream
	}
	if err != nil {
		return nil, err
	}
	return &ch, nil
}

// followed records one answer of the change stream; false once the launch is over. Each change
// is stamped with the engine's own times (same node, same clock): it happened in
// (PrevCheck, Now].
func (e *Engine) followed(p *proc, ch *engine.Changes, err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p.exited || e.cur != p {
		return false
	}
	if err != nil {
		e.pollErrs++
		e.pollErr = err.Error()
		return true
	}
	for i := range ch.Changes {
		c := &ch.Changes[i]
		if err := e.checkPID(p, &c.Status); err != nil {
			e.pollErrs++
			e.pollErr = err.Error()
			continue
		}
		prevT := c.PrevCheck // the first state a process reports changed after the launch
		if prevT.Before(e.obs.at) {
			prevT = e.obs.at
		}
		e.observe(p, &c.Status, c.Status.Now, prevT)
	}
	return true
}

// checkPID refuses a status from another process answering on the admin address (say, an
// engine left over from an earlier run): it is not this launch's.
func (e *Engine) checkPID(p *proc, st *engine.Status) error {
	if st.PID != 0 && st.PID != p.pid {
		return fmt.Errorf("status from pid %d, not the engine's pid %d: is another engine on %s?", st.PID, p.pid, e.spec.Config.AdminAddr)
	}
	return nil
}

// pollStatus polls GET /status until the launch ends.
func (e *Engine) pollStatus(ctx context.Context, p *proc, url string) {
	tick := time.NewTicker(e.spec.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st, err := e.poll(ctx, url)
		t := time.Now()
		e.mu.Lock()
		if p.exited || e.cur != p {
			e.mu.Unlock()
			return
		}
		if err == nil {
			err = e.checkPID(p, st)
		}
		if err != nil {
			e.pollErrs++
			e.pollErr = err.Error()
		} else {
			e.observe(p, st, t, e.obs.at)
		}
		e.mu.Unlock()
	}
}

func (e *Engine) poll(ctx context.Context, url string) (*engine.Status, error) {
	var st engine.Status
	if _, err := e.get(ctx, url, e.spec.PollTimeout, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// get asks the engine's admin API (with the agent's token) and decodes a 200 answer into v; the
// status code is returned too, 0 when there was no answer.
func (e *Engine) get(ctx context.Context, url string, timeout time.Duration, v any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	engine.AuthorizeAdmin(req, e.spec.AdminToken)
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return resp.StatusCode, fmt.Errorf("decode %s: %w", url, err)
	}
	return resp.StatusCode, nil
}

// observe records what changed since the last observation; the change happened in (prevT, t].
// e.mu is held.
func (e *Engine) observe(p *proc, st *engine.Status, t, prevT time.Time) {
	prev := e.obs
	snap := ""
	if st.LastSnapshot != nil {
		snap = strconv.FormatUint(st.LastSnapshot.Index, 10)
	}
	base := rundir.Transition{T: t, Launch: p.n, PID: p.pid, Status: st}
	if !prevT.IsZero() {
		base.PrevT = &prevT
	}
	for _, c := range []struct {
		kind     rundir.TransitionKind
		from, to string
	}{
		{rundir.TransPhase, prev.phase, st.Phase},
		{rundir.TransRole, prev.role, st.Role},
		{rundir.TransSnapshot, prev.snap, snap},
		{rundir.TransElection, prev.election, st.ElectionState},
		{rundir.TransTrap, prev.traps, st.Traps.Kinds()},
	} {
		if c.from != c.to {
			tr := base
			tr.Kind, tr.From, tr.To = c.kind, c.from, c.to
			e.record(tr)
		}
	}
	e.obs = observed{phase: st.Phase, role: st.Role, snap: snap, election: st.ElectionState, traps: st.Traps.Kinds(), at: t}
	e.last, e.lastAt = st, t
	if !p.carried && len(p.carry) > 0 {
		// The process answers for itself now: whatever wrapper started it has exec'd.
		p.carried = true
		res, err := command.CheckCarriage(p.pid, p.carry)
		e.launches[p.n-1].Carriage = res
		if err != nil {
			e.launches[p.n-1].CarriageError = err.Error()
		}
	}
	e.pollErrs, e.pollErr = 0, ""
}

// Signal sends sig to the engine's process group and records it.
func (e *Engine) Signal(sig syscall.Signal) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.cur
	if p == nil {
		return ErrNotStarted
	}
	if p.exited {
		return fmt.Errorf("signal %s: %w (launch %d exited)", SignalName(sig), ErrNotRunning, p.n)
	}
	t := time.Now()
	// The group: the engine and anything it spawned, nothing else (it leads its own group).
	if err := syscall.Kill(-p.pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %s: %w", SignalName(sig), ErrNotRunning)
		}
		return fmt.Errorf("signal %s to engine pid %d: %w", SignalName(sig), p.pid, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stop = true
	case syscall.SIGCONT:
		p.stop = false
	}
	e.record(rundir.Transition{T: t, Launch: p.n, PID: p.pid, Kind: rundir.TransSignal, From: e.obs.phase, To: SignalName(sig)})
	return nil
}

// Stop sends TERM, waits up to grace (<= 0: the spec's StopGrace) and then KILLs. It returns how
// the process ended; stopping an engine that already exited returns its exit status.
func (e *Engine) Stop(ctx context.Context, grace time.Duration) (*rundir.ExitStatus, error) {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	if grace <= 0 {
		grace = e.spec.StopGrace
	}
	e.mu.Lock()
	p, stopped := e.cur, e.cur != nil && e.cur.stop
	e.mu.Unlock()
	if p == nil {
		return nil, ErrNotStarted
	}
	if err := e.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, ErrNotRunning) {
		return nil, err
	}
	if stopped {
		e.Signal(syscall.SIGCONT) // a stopped process cannot act on TERM
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.exit, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	if err := e.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, ErrNotRunning) {
		return nil, err
	}
	// KILL completes promptly unless the process is stuck in the kernel; bound the wait anyway.
	wait := time.NewTimer(5 * time.Second)
	defer wait.Stop()
	select {
	case <-p.done:
		return p.exit, nil
	case <-wait.C:
		return nil, fmt.Errorf("stop engine pid %d: still not reaped 5s after KILL", p.pid)
	}
}

// relaunchWait is how long Relaunch waits for the previous process to be reaped.
const relaunchWait = 2 * time.Second

// Relaunch starts the engine again with the same spec in the same folder. The previous process
// must have exited (kill or stop it first).
func (e *Engine) Relaunch(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("relaunch engine: %w", err)
	}
	e.opMu.Lock()
	defer e.opMu.Unlock()
	e.mu.Lock()
	p := e.cur
	e.mu.Unlock()
	if p == nil {
		return 0, ErrNotStarted
	}
	if e.isClosed() {
		return 0, fmt.Errorf("relaunch: %w", ErrClosed)
	}
	// A process that was just killed may not be reaped yet (its "down" can already be in the
	// journal): give it a moment rather than failing a relaunch scheduled right after a kill.
	select {
	case <-p.done:
	case <-time.After(relaunchWait):
		return 0, fmt.Errorf("relaunch: %w (pid %d): kill or stop it first", ErrRunning, p.pid)
	case <-ctx.Done():
		return 0, fmt.Errorf("relaunch engine: %w", ctx.Err())
	}
	if err := e.launch(); err != nil {
		return 0, err
	}
	return e.PID(), nil
}

// Wait blocks until the current launch has exited (or ctx is done).
func (e *Engine) Wait(ctx context.Context) (*rundir.ExitStatus, error) {
	e.mu.Lock()
	p := e.cur
	e.mu.Unlock()
	if p == nil {
		return nil, ErrNotStarted
	}
	select {
	case <-p.done:
		return p.exit, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Running reports whether the current launch is alive.
func (e *Engine) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur != nil && !e.cur.exited
}

// PID of the current (or last) launch.
func (e *Engine) PID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return 0
	}
	return e.cur.pid
}

// Exit is how the last launch ended, nil while it runs.
func (e *Engine) Exit() *rundir.ExitStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return nil
	}
	return e.cur.exit
}

// LastStatus is the last status polled, and when.
func (e *Engine) LastStatus() (*engine.Status, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last, e.lastAt
}

// State snapshots the process side and the last status.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := State{
		Node:          e.spec.Node,
		Launches:      append([]Launch(nil), e.launches...),
		Status:        e.last,
		PollErrors:    e.pollErrs,
		LastPollError: e.pollErr,
		AdminAddr:     e.spec.Config.AdminAddr,
		Dir:           e.spec.Dir,
		DataDir:       e.spec.Config.Dir,
	}
	if !e.lastAt.IsZero() {
		t := e.lastAt
		s.StatusAt = &t
	}
	if p := e.cur; p != nil {
		s.Running, s.Stopped, s.PID, s.Exit = !p.exited, p.stop && !p.exited, p.pid, p.exit
	}
	return s
}

// Spec is the resolved spec (defaults filled in).
func (e *Engine) Spec() Spec { return e.spec }

// ConfigPath is where the config file was written.
func (e *Engine) ConfigPath() string { return e.configPath }

// CommandRendered is what the command driver's templates gave the last launch: the path of
// its config file and the environment they added (neither the agent's own nor the secrets).
// A process run beside the engine on the same config (a bench's own client) starts from them.
func (e *Engine) CommandRendered() (configFile string, env []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cmdConfig, slices.Clone(e.cmdEnv)
}

// Journal is where transitions are recorded.
func (e *Engine) Journal() *Journal { return e.journal }

// Close stops the engine (TERM, then KILL after grace) and closes a journal it opened itself.
func (e *Engine) Close(ctx context.Context, grace time.Duration) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	_, err := e.Stop(ctx, grace)
	if errors.Is(err, ErrNotStarted) {
		err = nil
	}
	e.http.CloseIdleConnections()
	if e.ownJournal {
		if cerr := e.journal.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Spawn starts cmd as an engine is started: leading a process group of its own, killed by the
// kernel when the agent dies (Linux), forked from the thread that outlives every child. The
// agent's other children (a cpu_hog, agent/hog_handlers.go) must not outlive it either.
func Spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = sysProcAttr()
	return startCmd(cmd)
}

// WaitExited blocks until pid, a child, has exited without reaping it: until cmd.Wait reaps it
// the pid (and its process group) cannot be recycled, so a signal sent before then cannot reach
// a stranger.
func WaitExited(pid int) { waitExited(pid) }
