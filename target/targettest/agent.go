package targettest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

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

// --- what a test scripts while a run goes on

// Gone makes node's agent go away: a request in flight ends with its connection, later dials are
// refused (wrapping transport.ErrUnreachable).
func (c *Cluster) Gone(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mustNode(node).gone = true
}

// CutLease makes node's lease renewals fail from now on (a cut network). Like the real agent,
// the node lapses the lease its length after the last renewal, on the wall clock: it stops the
// engine, and every later request gets 410.
func (c *Cluster) CutLease(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.mustNode(node)
	n.leaseCut = true
	var lapse func()
	lapse = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		// A renewal already past the cut when it was made lands after it and holds the lease
		// on, as the agent's would: lapse its length after that one.
		if d := time.Until(n.renewed.Add(n.ttl)); d > 0 {
			time.AfterFunc(d, lapse)
			return
		}
		n.lapsed = true
		c.downLocked(n, "TERM")
	}
	time.AfterFunc(time.Until(n.renewed.Add(n.ttl)), lapse)
}

// Lapse lapses node's lease now: its agent stops the engine (TERM) and answers every later
// request 410.
func (c *Cluster) Lapse(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.mustNode(node)
	n.lapsed = true
	c.downLocked(n, "TERM")
}

// RecordingWindows says whether node's engine was last started with its recorder kept idle
// until a window (agent.StartRequest.RecordingWindows).
func (c *Cluster) RecordingWindows(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mustNode(node).eng.recWindows
}

// Lapsed says whether node's lease has lapsed.
func (c *Cluster) Lapsed(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mustNode(node).lapsed
}

// Exit makes node's engine exit by itself with code, as an engine whose disk fails does; a
// leader's place goes to the next running server.
func (c *Cluster) Exit(node string, code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.mustNode(node)
	c.exitLocked(n, &rundir.ExitStatus{Code: code, Desc: "exit status " + strconv.Itoa(code)})
}

// --- the fake engine, under c.mu

func (c *Cluster) addLocked(n *node, tr rundir.Transition) {
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

func (c *Cluster) statusLocked(n *node) engine.Status {
	st := engine.Status{Node: n.Name, Role: n.eng.role, Phase: n.eng.phase, Term: c.term, AppliedIndex: c.index,
		CommitIndex: c.index, LastLogIndex: c.index, StateHash: "feed", Config: n.eng.cfg.Reported(), StepDown: c.StepDown}
	if l := c.leaderLocked(); l != "" {
		st.Leader = l
	}
	if c.index > 0 {
		st.LastSnapshot = &engine.Snapshot{Index: c.index, TakeMs: 1.5}
	}
	return st
}

func (c *Cluster) leaderLocked() string {
	for _, n := range c.inv.Nodes {
		if fn := c.nodes[n.Name]; fn.eng.running && fn.eng.role == engine.RoleLeader {
			return n.Name
		}
	}
	return ""
}

func (c *Cluster) launchLocked(n *node) {
	n.eng.launch++
	n.eng.running, n.eng.phase, n.eng.role = true, engine.PhaseStarting, ""
	c.addLocked(n, rundir.Transition{Kind: rundir.TransLaunch})
	if n.Name == c.ExitAtStart {
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

func (c *Cluster) downLocked(n *node, sig string) {
	c.exitLocked(n, &rundir.ExitStatus{Code: -1, Signal: sig, Desc: "signal: " + sig})
}

func (c *Cluster) exitLocked(n *node, exit *rundir.ExitStatus) {
	if !n.eng.running {
		return
	}
	wasLeader := n.eng.role == engine.RoleLeader
	n.eng.running, n.eng.phase, n.eng.role = false, rundir.PhaseDown, ""
	c.addLocked(n, rundir.Transition{Kind: rundir.TransPhase, From: engine.PhaseReady, To: rundir.PhaseDown, Exit: exit})
	if wasLeader {
		c.electLocked(n.Name)
	}
}

// electLocked makes the first running server other than not the leader.
func (c *Cluster) electLocked(not string) {
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
// request and answer types. Any other path is the mux's 404.
func (c *Cluster) agentHandler(n *node) http.Handler {
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
		if c.MemAvailable == 0 {
			reply(w, map[string]any{})
			return
		}
		reply(w, facts.Facts{Hostname: "fake-host", MemAvailableBytes: c.MemAvailable})
	})
	mux.HandleFunc("GET "+p+"/facts/space", func(w http.ResponseWriter, r *http.Request) {
		free := c.FreeBytes
		if free == 0 {
			free = 1 << 40
		}
		reply(w, facts.Space{Path: r.URL.Query().Get("path"), FreeBytes: free, Filesystem: "fake-fs"})
	})
	// Tuning and samples are accepted and do nothing.
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
	// A recording take writes nothing: it names one file and a note.
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
	// Any signal stops the engine.
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
	// The engine's admin API: /snapshot, /step-down and /status only.
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
			fail(w, http.StatusBadRequest, "the fake engine has no admin path "+r.URL.Query().Get("path"))
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := r.Method + " " + strings.TrimPrefix(r.URL.Path, p)
		if q := r.URL.Query().Get("path"); q != "" {
			call += " " + q
		}
		if c.OnCall != nil {
			c.OnCall(n.Name, call)
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
