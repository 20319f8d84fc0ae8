package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

// A fake cluster for the runner's unit tests: no processes, no sockets. Every agent is an HTTP
// handler reached through net.Pipe, with an engine that is a few fields and a journal of
// transitions (long-polled like the real agent's); the load generator is a fake command with a
// control API of its own. Hooks inject failures and interrupts at any request.

// fakeTarget starts a fakeCluster.
type fakeTarget struct {
	c        *fakeCluster
	startErr error
	onStart  func() // called inside Start (e.g. to interrupt)
}

func (t *fakeTarget) Name() string { return "fake" }

func (t *fakeTarget) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	if t.onStart != nil {
		t.onStart()
	}
	if t.startErr != nil {
		return nil, t.startErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := t.c
	c.dir = so.RunDir
	c.inv = &inventory.Inventory{Target: "fake"}
	for i := 0; i < so.Servers; i++ {
		c.addNode(fmt.Sprintf("node-%d", i), inventory.RoleServer)
	}
	for i := 0; i < so.Clients; i++ {
		c.addNode(fmt.Sprintf("client-%d", i), inventory.RoleClient)
	}
	c.started = true
	return c, nil
}

type fakeEngine struct {
	running bool
	phase   string
	role    string
	launch  int
	cfg     engine.Config
	// recording is the start request's (agent.StartRequest.Recording).
	recording  recording.Format
	recWindows bool // StartRequest.RecordingWindows
}

type fakeNode struct {
	inventory.Node
	eng     fakeEngine
	journal []rundir.Transition
	gone    bool // the agent does not answer
	client  *agent.Client
	// The lease, as the agent holds it. leaseCut: renewals do not get through (the connection
	// ends); lapsed: the lease lapsed, every request gets 410.
	renewed  time.Time
	ttl      time.Duration
	leaseCut bool
	lapsed   bool
}

type fakeCluster struct {
	t   *testing.T
	dir string
	inv *inventory.Inventory

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every journal append
	nodes   map[string]*fakeNode
	term    uint64
	index   uint64
	calls   []string // "node POST /path [detail]", in order
	started bool
	stopped bool

	// Hooks (set before the run).
	onCall      func(node, call string) // every agent request, before it is answered
	exitAtStart string                  // this server's engine exits at once when started
	freeBytes   int64                   // free space every server's data filesystem reports (0: 1 TiB)
	memAvail    uint64                  // MemAvailable every node's facts report, all on one host (0: no facts)
	stepDown    string                  // every engine's status step_down (engine.StepDownRelaunch)
	lg          fakeLoadgen
}

func newFakeCluster(t *testing.T) *fakeCluster {
	return &fakeCluster{t: t, nodes: map[string]*fakeNode{}, changed: make(chan struct{}), term: 1}
}

func (c *fakeCluster) addNode(name, role string) {
	n := &fakeNode{Node: inventory.Node{Name: name, Role: role, Address: "10.0.0." + strconv.Itoa(len(c.inv.Nodes)+1),
		PrivateAddress: "10.0.0." + strconv.Itoa(len(c.inv.Nodes)+1)}}
	c.inv.Nodes = append(c.inv.Nodes, n.Node)
	c.nodes[name] = n
	h := c.agentHandler(n)
	n.client = agent.NewClient(name, func(ctx context.Context) (net.Conn, error) {
		c.mu.Lock()
		gone := n.gone
		c.mu.Unlock()
		if gone {
			return nil, fmt.Errorf("%w: dial agent on %s: connection refused", transport.ErrUnreachable, name)
		}
		return pipeServe(h), nil
	})
}

// pipeServe answers HTTP on one end of a pipe and returns the other.
func pipeServe(h http.Handler) net.Conn {
	a, b := net.Pipe()
	l := &oneConnListener{conn: b, done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	return a
}

type oneConnListener struct {
	once sync.Once
	conn net.Conn
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// --- target.Cluster

func (c *fakeCluster) Inventory() *inventory.Inventory { return c.inv }
func (c *fakeCluster) Transport() transport.Transport  { return fakeTransport{c} }
func (c *fakeCluster) Agent(node string) *agent.Client { return c.nodes[node].client }
func (c *fakeCluster) Binary(inventory.Node) string    { return "rig" }
func (c *fakeCluster) NodePath(n inventory.Node, rel string) string {
	return filepath.Join(c.dir, "nodes", n.Name, rel)
}
func (c *fakeCluster) OutputPath(n inventory.Node, rel string) string {
	return filepath.Join(c.dir, rel)
}
func (c *fakeCluster) Gather(context.Context, inventory.Node, string) error { return nil }
func (c *fakeCluster) Remove(_ context.Context, n inventory.Node, p string) error {
	c.record(n.Name, "remove "+p)
	return nil
}
func (c *fakeCluster) ControlSocket(n inventory.Node, name string) string {
	return filepath.Join(c.dir, "nodes", n.Name, "ctl", name)
}
func (c *fakeCluster) Traits() target.Traits {
	return target.Traits{OneClock: true, TuneNodes: c.inv.Nodes[:1]}
}
func (c *fakeCluster) Collect(context.Context) error {
	c.record("", "collect")
	return nil
}
func (c *fakeCluster) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.calls = append(c.calls, " stop")
	return nil
}

func (c *fakeCluster) record(node, call string) {
	c.mu.Lock()
	c.calls = append(c.calls, node+" "+call)
	c.mu.Unlock()
}

// called reports whether a recorded call starts with prefix.
func (c *fakeCluster) called(prefix string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.calls, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// --- the fake engine, under c.mu

func (c *fakeCluster) addLocked(n *fakeNode, tr rundir.Transition) {
	tr.Seq = uint64(len(n.journal)) + 1
	tr.T, tr.Node, tr.Launch, tr.PID = time.Now(), n.Name, n.eng.launch, 1000+n.eng.launch
	if tr.Kind != rundir.TransLaunch && tr.Kind != rundir.TransSignal && !(tr.Kind == rundir.TransPhase && tr.To == rundir.PhaseDown) {
		st := c.statusLocked(n)
		tr.Status = &st
	}
	n.journal = append(n.journal, tr)
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *fakeCluster) statusLocked(n *fakeNode) engine.Status {
	st := engine.Status{Node: n.Name, Role: n.eng.role, Phase: n.eng.phase, Term: c.term, AppliedIndex: c.index,
		CommitIndex: c.index, LastLogIndex: c.index, StateHash: "feed", Config: n.eng.cfg.Reported(), StepDown: c.stepDown}
	if l := c.leaderLocked(); l != "" {
		st.Leader = l
	}
	if c.index > 0 {
		st.LastSnapshot = &engine.Snapshot{Index: c.index, TakeMs: 1.5}
	}
	return st
}

func (c *fakeCluster) leaderLocked() string {
	for _, n := range c.inv.Nodes {
		if fn := c.nodes[n.Name]; fn.eng.running && fn.eng.role == engine.RoleLeader {
			return n.Name
		}
	}
	return ""
}

func (c *fakeCluster) launchLocked(n *fakeNode) {
	n.eng.launch++
	n.eng.running, n.eng.phase, n.eng.role = true, engine.PhaseStarting, ""
	c.addLocked(n, rundir.Transition{Kind: rundir.TransLaunch})
	if n.Name == c.exitAtStart {
		n.eng.running, n.eng.phase = false, rundir.PhaseDown
		c.addLocked(n, rundir.Transition{Kind: rundir.TransPhase, From: engine.PhaseStarting, To: rundir.PhaseDown,
			Exit: &rundir.ExitStatus{Code: 1, Desc: "exit status 1"}})
		return
	}
	n.eng.phase = engine.PhaseReady
	c.addLocked(n, rundir.Transition{Kind: rundir.TransPhase, From: engine.PhaseStarting, To: engine.PhaseReady})
	role := engine.RoleFollower
	if c.leaderLocked() == "" {
		role = engine.RoleLeader
		c.term++
	}
	n.eng.role = role
	c.addLocked(n, rundir.Transition{Kind: rundir.TransRole, To: role})
}

func (c *fakeCluster) downLocked(n *fakeNode, sig string) {
	if !n.eng.running {
		return
	}
	wasLeader := n.eng.role == engine.RoleLeader
	n.eng.running, n.eng.phase, n.eng.role = false, rundir.PhaseDown, ""
	c.addLocked(n, rundir.Transition{Kind: rundir.TransPhase, From: engine.PhaseReady, To: rundir.PhaseDown,
		Exit: &rundir.ExitStatus{Code: -1, Signal: sig, Desc: "signal: " + sig}})
	if wasLeader {
		c.electLocked(n.Name)
	}
}

// electLocked makes the first running server other than not the leader.
func (c *fakeCluster) electLocked(not string) {
	for _, s := range c.inv.Servers() {
		if fn := c.nodes[s.Name]; s.Name != not && fn.eng.running {
			c.term++
			fn.eng.role = engine.RoleLeader
			c.addLocked(fn, rundir.Transition{Kind: rundir.TransRole, From: engine.RoleFollower, To: engine.RoleLeader})
			return
		}
	}
}

// agentHandler is the node's fake agent: the endpoints the runner uses, with the real agent's
// request and answer types.
func (c *fakeCluster) agentHandler(n *fakeNode) http.Handler {
	mux := http.NewServeMux()
	p := agent.APIVersion
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	fail := func(w http.ResponseWriter, code int, msg string) {
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	mux.HandleFunc("GET "+p+"/ping", func(w http.ResponseWriter, r *http.Request) {
		reply(w, agent.PingResponse{Node: n.Name, PID: 1, Now: time.Now()})
	})
	// Leases are claimed, renewed and released like the real agent's; they are not recorded
	// (renewals come on a timer).
	mux.HandleFunc("POST "+p+"/lease", func(w http.ResponseWriter, r *http.Request) {
		var req agent.LeaseRequest
		json.NewDecoder(r.Body).Decode(&req)
		ttl, _ := time.ParseDuration(req.TTL)
		c.mu.Lock()
		n.renewed, n.ttl = time.Now(), ttl
		c.mu.Unlock()
		reply(w, agent.LeaseState{Run: req.Run, TTL: req.TTL})
	})
	mux.HandleFunc("DELETE "+p+"/lease", func(w http.ResponseWriter, r *http.Request) { reply(w, agent.LeaseState{}) })
	mux.HandleFunc("GET "+p+"/facts", func(w http.ResponseWriter, r *http.Request) {
		if c.memAvail == 0 {
			reply(w, map[string]any{})
			return
		}
		reply(w, facts.Facts{Hostname: "fake-host", MemAvailableBytes: c.memAvail})
	})
	// Every server's data on one filesystem, as on the local target.
	mux.HandleFunc("GET "+p+"/facts/space", func(w http.ResponseWriter, r *http.Request) {
		free := c.freeBytes
		if free == 0 {
			free = 1 << 40
		}
		reply(w, facts.Space{Path: r.URL.Query().Get("path"), FreeBytes: free, Filesystem: "fake-fs"})
	})
	mux.HandleFunc("POST "+p+"/tune", func(w http.ResponseWriter, r *http.Request) { reply(w, tune.Report{}) })
	mux.HandleFunc("POST "+p+"/tune/revert", func(w http.ResponseWriter, r *http.Request) { reply(w, tune.Report{}) })
	mux.HandleFunc("POST "+p+"/samples", func(w http.ResponseWriter, r *http.Request) { reply(w, agent.SamplesInfo{Running: true}) })
	mux.HandleFunc("DELETE "+p+"/samples/{name}", func(w http.ResponseWriter, r *http.Request) { reply(w, agent.SamplesInfo{}) })
	mux.HandleFunc("POST "+p+"/engine/start", func(w http.ResponseWriter, r *http.Request) {
		var req agent.StartRequest
		json.NewDecoder(r.Body).Decode(&req)
		c.mu.Lock()
		defer c.mu.Unlock()
		n.eng.cfg = req.Config
		n.eng.recording = req.Recording
		n.eng.recWindows = req.RecordingWindows
		c.launchLocked(n)
		reply(w, agent.EngineProcess{PID: 1000 + n.eng.launch, Launch: n.eng.launch})
	})
	mux.HandleFunc("POST "+p+"/engine/recording", func(w http.ResponseWriter, r *http.Request) {
		var req agent.RecordingRequest
		json.NewDecoder(r.Body).Decode(&req)
		c.mu.Lock()
		f := n.eng.recording
		c.mu.Unlock()
		take := fmt.Sprintf("take %s %s defer=%v", f, req.Window, req.Defer)
		if req.Start {
			take += " start"
		}
		if req.Stop {
			take += " stop"
		}
		c.record(n.Name, take)
		reply(w, agent.RecordingResponse{Files: []string{req.Window + ".trace"}, Notes: []string{"a note from " + n.Name}})
	})
	mux.HandleFunc("POST "+p+"/engine/signal", func(w http.ResponseWriter, r *http.Request) {
		var req agent.EngineSignalRequest
		json.NewDecoder(r.Body).Decode(&req)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.addLocked(n, rundir.Transition{Kind: rundir.TransSignal, To: req.Signal})
		c.downLocked(n, req.Signal)
		reply(w, agent.EngineProcess{})
	})
	mux.HandleFunc("POST "+p+"/engine/relaunch", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.launchLocked(n)
		reply(w, agent.EngineProcess{})
	})
	mux.HandleFunc("POST "+p+"/engine/stop", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.downLocked(n, "TERM")
		reply(w, agent.EngineStopResponse{})
	})
	mux.HandleFunc("GET "+p+"/engine/status", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		reply(w, agent.EngineState{LastSeq: uint64(len(n.journal))})
	})
	mux.HandleFunc("GET "+p+"/engine/transitions", func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		t := time.NewTimer(wait)
		defer t.Stop()
		for {
			c.mu.Lock()
			var out []rundir.Transition
			if int(since) < len(n.journal) {
				out = slices.Clone(n.journal[since:])
			}
			last, changed := uint64(len(n.journal)), c.changed
			c.mu.Unlock()
			if len(out) > 0 || wait == 0 {
				reply(w, agent.TransitionsResponse{Transitions: out, LastSeq: last})
				return
			}
			select {
			case <-changed:
			case <-t.C:
				wait = 0
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc(p+"/engine/proxy", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !n.eng.running {
			fail(w, http.StatusServiceUnavailable, "engine not running")
			return
		}
		switch r.URL.Query().Get("path") {
		case "/snapshot":
			c.index += 100
			for _, s := range c.inv.Servers() {
				if fn := c.nodes[s.Name]; fn.eng.running {
					c.addLocked(fn, rundir.Transition{Kind: rundir.TransSnapshot, To: strconv.FormatUint(c.index, 10)})
				}
			}
			reply(w, engine.Snapshot{Index: c.index, TakeMs: 1.5})
		case "/step-down":
			n.eng.role = engine.RoleFollower
			c.addLocked(n, rundir.Transition{Kind: rundir.TransRole, From: engine.RoleLeader, To: engine.RoleFollower})
			c.electLocked(n.Name)
			reply(w, map[string]any{})
		case "/status":
			reply(w, c.statusLocked(n))
		default:
			fail(w, http.StatusBadRequest, "path")
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := r.Method + " " + strings.TrimPrefix(r.URL.Path, p)
		if q := r.URL.Query().Get("path"); q != "" {
			call += " " + q
		}
		if c.onCall != nil {
			c.onCall(n.Name, call)
		}
		c.mu.Lock()
		gone, lapsed := n.gone || (n.leaseCut && call == "POST /lease"), n.lapsed
		c.mu.Unlock()
		if lapsed {
			w.Header().Set(agent.HeaderNode, n.Name)
			fail(w, http.StatusGone, "the lease of run fake lapsed: the agent stopped its engine and reverted its tuning")
			return
		}
		if gone { // an agent that went away mid-run (or a cut renewal): the connection just ends
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
		}
		if !strings.HasSuffix(call, "/engine/transitions") && !strings.HasSuffix(call, "/engine/status") && !strings.HasSuffix(call, "/lease") {
			c.record(n.Name, call)
		}
		w.Header().Set(agent.HeaderNode, n.Name) // the identity the real agent stamps on every answer
		mux.ServeHTTP(w, r)
	})
}

// cutLease makes node's lease renewals fail from now on (a cut network). Like the real agent,
// the node lapses the lease its length after the last renewal: it stops the engine, and every
// later request gets 410.
func (c *fakeCluster) cutLease(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node]
	n.leaseCut = true
	time.AfterFunc(time.Until(n.renewed.Add(n.ttl)), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		n.lapsed = true
		c.downLocked(n, "TERM")
	})
}

// --- the fake load generator

type fakeLoadgen struct {
	mu        sync.Mutex
	start     time.Time
	stop      chan struct{}
	stopOnce  sync.Once
	bursts    int
	exitEarly error         // the probe command fails before its first probe
	exitAfter time.Duration // ... or this long after its start (with exitEarly as the error)
	preload   func(ctx context.Context) error
}

type fakeTransport struct{ c *fakeCluster }

func (t fakeTransport) Exec(ctx context.Context, n inventory.Node, cmd transport.Cmd) (transport.Result, error) {
	c := t.c
	if len(cmd.Args) < 5 || cmd.Args[1] != "loadgen" {
		return transport.Result{}, fmt.Errorf("fake transport: unexpected command %q", cmd.Args)
	}
	c.record(n.Name, "loadgen "+cmd.Args[2])
	b, err := os.ReadFile(cmd.Args[4])
	if err != nil {
		return transport.Result{}, err
	}
	var cfg loadspec.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return transport.Result{}, err
	}
	lg := &c.lg
	switch cmd.Args[2] {
	case "preload":
		if lg.preload != nil {
			return transport.Result{}, lg.preload(ctx)
		}
		return transport.Result{}, nil
	case "probe":
		if lg.exitEarly != nil && lg.exitAfter == 0 {
			return transport.Result{}, lg.exitEarly
		}
		lg.mu.Lock()
		lg.start, lg.stop = time.Now().Add(10*time.Millisecond), make(chan struct{})
		stop, start := lg.stop, lg.start
		lg.mu.Unlock()
		if cmd.Stdout != nil { // as `rig loadgen probe` does once its schedule starts
			fmt.Fprintln(cmd.Stdout, loadspec.StartLine(start))
		}
		end := time.Duration(cfg.Probe.Duration)
		var err error
		if lg.exitEarly != nil {
			end, err = lg.exitAfter, lg.exitEarly
		}
		select {
		case <-time.After(end):
		case <-stop:
		case <-ctx.Done():
			return transport.Result{}, ctx.Err()
		}
		os.MkdirAll(cfg.Probe.Out, 0o755)
		os.WriteFile(filepath.Join(cfg.Probe.Out, "stats.json"), []byte(`{"scheduled": 10}`), 0o644)
		return transport.Result{}, err
	case "burst":
		b, _ := json.Marshal(cfg.Burst)
		c.record(n.Name, "loadgen burst-config "+string(b))
		os.MkdirAll(cfg.Burst.Out, 0o755)
		return transport.Result{}, os.WriteFile(filepath.Join(cfg.Burst.Out, "bursts.json"), []byte(`{"transport": "udp"}`), 0o644)
	}
	return transport.Result{}, fmt.Errorf("fake loadgen: mode %q", cmd.Args[2])
}

func (t fakeTransport) Upload(_ context.Context, _ inventory.Node, local, remote string, _ uint32) error {
	if local == remote {
		return nil
	}
	b, err := os.ReadFile(local)
	if err != nil {
		return err
	}
	os.MkdirAll(filepath.Dir(remote), 0o755)
	return os.WriteFile(remote, b, 0o644)
}

func (t fakeTransport) Download(context.Context, inventory.Node, string, string) error {
	return errors.New("fake transport: no downloads")
}

// Dial reaches the load generator's control API (the agents are dialled by their clients).
func (t fakeTransport) Dial(_ context.Context, n inventory.Node, addr string) (net.Conn, error) {
	lg := &t.c.lg
	mux := http.NewServeMux()
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		t.c.record(n.Name, "loadgen stop")
		lg.mu.Lock()
		defer lg.mu.Unlock()
		if lg.stop != nil {
			lg.stopOnce.Do(func() { close(lg.stop) })
		}
	})
	mux.HandleFunc("POST /burst", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		t.c.record(n.Name, "loadgen burst "+string(b))
		lg.mu.Lock()
		lg.bursts++
		lg.mu.Unlock()
	})
	return pipeServe(mux), nil
}

func (t fakeTransport) Close() error { return nil }
