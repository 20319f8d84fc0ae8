package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/agent/sample"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/rundir"
)

// Node endpoints (docs/architecture.md, "Agent API": facts, tune, samples):
//
//	GET    /v1/facts                 -> facts.Facts
//	GET    /v1/facts/space?path=P    -> facts.Space of the filesystem holding P (relative: in the agent's folder)
//	POST   /v1/tune                  TuneRequest -> tune.Report (fails naming each setting that did not take)
//	GET    /v1/tune                  -> TuneState (recorded prior values, current values read back)
//	POST   /v1/tune/revert           -> tune.Report (empty when nothing was recorded)
//	POST   /v1/samples               SamplesRequest -> SamplesInfo (starts NDJSON sampling into DIR/samples/NAME.ndjson)
//	GET    /v1/samples               -> []SamplesInfo
//	GET    /v1/samples/{name}        -> the NDJSON written so far
//	DELETE /v1/samples/{name}        -> SamplesInfo (stops sampling)

// TuneRequest applies a tuning profile.
type TuneRequest struct {
	Profile tune.Profile `json:"profile"`
}

// TuneState answers GET /v1/tune.
type TuneState struct {
	// Recorded is the state file: prior values and what was applied (nil when nothing is).
	Recorded *tune.State `json:"recorded"`
	// Current is every applied setting read back now.
	Current map[string]string `json:"current,omitempty"`
}

// SamplesRequest starts a sampler.
type SamplesRequest struct {
	Name     string   `json:"name"`               // file name stem: [A-Za-z0-9_.-], at most 64
	Interval string   `json:"interval,omitempty"` // Go duration, default 1s, at least 10ms
	Devices  []string `json:"devices,omitempty"`  // default: every whole disk
	PIDs     []int    `json:"pids,omitempty"`
	// PIDFiles are re-read at every sample (relative paths are in the agent's folder), so an
	// engine that is killed and relaunched is followed.
	PIDFiles []string `json:"pid_files,omitempty"`
	// SchedInterval, a Go duration of at least 1ms, also samples the followed processes'
	// per-thread run-queue wait and the node's pressure stalls (agent/sample's Sched) into
	// DIR/sched/NAME.ndjson at that interval, or at sample.PlacedSchedInterval if longer where the
	// kernel places the waits (SamplesInfo.RunQueue says which); empty: not sampled.
	SchedInterval string `json:"sched_interval,omitempty"`
	// SchedNoPSI leaves the node's pressure stalls out of the scheduler samples: another node's
	// agent on the same kernel records them (the local target).
	SchedNoPSI bool `json:"sched_no_psi,omitempty"`
}

// SamplesInfo describes a sampler.
type SamplesInfo struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Interval string    `json:"interval"`
	Started  time.Time `json:"started"`
	Running  bool      `json:"running"`
	Error    string    `json:"error,omitempty"` // why it stopped on its own
	// RunQueue says how the followed threads' run-queue waits are recorded: placed by the kernel
	// (at least a threshold each) beside the samples, or sampled only, and why.
	RunQueue string `json:"run_queue,omitempty"`
}

var sampleName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// nodeSide is the state behind the node endpoints.
type nodeSide struct {
	s          *Server
	tuneMu     sync.Mutex // one tuning operation at a time: they share the state file
	mu         sync.Mutex
	samplers   map[string]*sampler
	onShutdown sync.Once
	// runqTaken: a sampler holds this agent's tracer of the shared run-queue program
	// (Options.RunQueue); another would read the same ring and take its waits.
	runqTaken atomic.Bool
}

// sharedPlacer is a sampler's hold on the agent's tracer of the shared run-queue program,
// given back as it closes.
type sharedPlacer struct {
	*runq.Tracer
	release func()
}

func (p *sharedPlacer) Close() error {
	err := p.Tracer.Close()
	p.release()
	return err
}

type sampler struct {
	info   SamplesInfo
	cancel context.CancelFunc
	done   chan struct{}
}

// nodeSides maps each server to its node state, for shutdownNode.
var nodeSides sync.Map // *Server -> *nodeSide

func (s *Server) registerNodeHandlers() {
	n := &nodeSide{s: s, samplers: map[string]*sampler{}}
	nodeSides.Store(s, n)
	p := APIVersion
	s.mux.HandleFunc("GET "+p+"/facts", n.handleFacts)
	s.mux.HandleFunc("GET "+p+"/facts/space", n.handleSpace)
	s.mux.HandleFunc("POST "+p+"/tune", n.handleTune)
	s.mux.HandleFunc("GET "+p+"/tune", n.handleTuneState)
	s.mux.HandleFunc("POST "+p+"/tune/revert", n.handleRevert)
	s.mux.HandleFunc("POST "+p+"/samples", n.handleSamplesStart)
	s.mux.HandleFunc("GET "+p+"/samples", n.handleSamplesList)
	s.mux.HandleFunc("GET "+p+"/samples/{name}", n.handleSamplesRead)
	s.mux.HandleFunc("DELETE "+p+"/samples/{name}", n.handleSamplesStop)
}

func (n *nodeSide) tuneOptions() tune.Options {
	return tune.Options{Root: n.s.opts.Root, StateFile: filepath.Join(n.s.opts.Dir, tune.StateFileName), Logger: n.s.log}
}

func (n *nodeSide) handleFacts(w http.ResponseWriter, r *http.Request) {
	f, err := facts.Collect(r.Context(), facts.Options{Root: n.s.opts.Root})
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (n *nodeSide) handleSpace(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeErr(w, http.StatusBadRequest, errors.New("space: path is empty; want the folder to report on (relative: in the agent's folder)"))
		return
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(n.s.opts.Dir, p)
	}
	sp, err := facts.DiskSpace(n.s.opts.Root, p)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, sp)
}

func (n *nodeSide) handleTune(w http.ResponseWriter, r *http.Request) {
	var req TuneRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if err := req.Profile.Validate(); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("tuning profile: %w", err))
		return
	}
	n.tuneMu.Lock()
	defer n.tuneMu.Unlock()
	rep, err := tune.Apply(r.Context(), n.tuneOptions(), req.Profile)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (n *nodeSide) handleTuneState(w http.ResponseWriter, r *http.Request) {
	o := n.tuneOptions()
	n.tuneMu.Lock()
	defer n.tuneMu.Unlock()
	st, err := tune.LoadState(o.StateFile)
	if errors.Is(err, tune.ErrNotApplied) {
		writeJSON(w, http.StatusOK, TuneState{})
		return
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	names := make([]string, 0, len(st.Applied))
	for k := range st.Applied {
		names = append(names, k)
	}
	sort.Strings(names)
	cur, err := tune.Read(r.Context(), o, names)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, TuneState{Recorded: st, Current: cur})
}

func (n *nodeSide) handleRevert(w http.ResponseWriter, r *http.Request) {
	n.tuneMu.Lock()
	defer n.tuneMu.Unlock()
	rep, err := tune.Revert(r.Context(), n.tuneOptions())
	if errors.Is(err, tune.ErrNotApplied) {
		writeJSON(w, http.StatusOK, tune.Report{StateFile: rep.StateFile, Changes: []tune.Change{}})
		return
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (n *nodeSide) samplesDir() string { return filepath.Join(n.s.opts.Dir, "samples") }

func (n *nodeSide) handleSamplesStart(w http.ResponseWriter, r *http.Request) {
	var req SamplesRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if !sampleName.MatchString(req.Name) {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("samples name %q: want 1-64 of A-Z a-z 0-9 _ . -", req.Name))
		return
	}
	interval := time.Second
	if req.Interval != "" {
		d, err := time.ParseDuration(req.Interval)
		if err != nil || d < 10*time.Millisecond {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("samples interval %q: want a Go duration of at least 10ms, e.g. 1s", req.Interval))
			return
		}
		interval = d
	}
	var schedEvery time.Duration
	if req.SchedInterval != "" {
		d, err := time.ParseDuration(req.SchedInterval)
		if err != nil || d < time.Millisecond {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("samples sched_interval %q: want a Go duration of at least 1ms, e.g. 20ms", req.SchedInterval))
			return
		}
		schedEvery = d
	}
	var pidFiles []string
	for _, f := range req.PIDFiles {
		if !filepath.IsAbs(f) {
			f = filepath.Join(n.s.opts.Dir, f)
		}
		pidFiles = append(pidFiles, f)
	}
	n.registerShutdown(r)

	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.samplers[req.Name]; old != nil && old.running() {
		writeErr(w, http.StatusConflict, fmt.Errorf("samples %q are being recorded already: stop them first", req.Name))
		return
	}
	smp, err := sample.New(sample.Options{Root: n.s.opts.Root, Interval: interval, Devices: req.Devices, PIDs: req.PIDs, PIDFiles: pidFiles})
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if err := os.MkdirAll(n.samplesDir(), 0o755); err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	path := filepath.Join(n.samplesDir(), req.Name+".ndjson")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	var sched *sample.Sched
	var schedFile *os.File
	var runQueue string
	if schedEvery > 0 {
		if sched, schedFile, runQueue, err = n.openSched(req.Name, sample.SchedOptions{Root: n.s.opts.Root, Interval: schedEvery, PIDs: req.PIDs, PIDFiles: pidFiles, NoPSI: req.SchedNoPSI}); err != nil {
			f.Close()
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	sm := &sampler{info: SamplesInfo{Name: req.Name, Path: path, Interval: interval.String(), Started: time.Now().UTC(), Running: true, RunQueue: runQueue},
		cancel: cancel, done: make(chan struct{})}
	n.samplers[req.Name] = sm
	go func() {
		defer close(sm.done)
		schedErr := make(chan error, 1)
		if sched != nil {
			go func() {
				err := sched.Run(ctx, schedFile)
				if cerr := schedFile.Close(); err == nil {
					err = cerr
				}
				schedErr <- err
			}()
		} else {
			schedErr <- nil
		}
		err := smp.Run(ctx, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if serr := <-schedErr; err == nil {
			err = serr
		}
		n.mu.Lock()
		sm.info.Running = false
		if err != nil {
			sm.info.Error = err.Error()
			n.s.log.Error("sampler stopped", "name", req.Name, "err", err)
		}
		n.mu.Unlock()
	}()
	n.s.log.Info("sampling", "name", req.Name, "interval", interval, "path", path)
	writeJSON(w, http.StatusOK, sm.info)
}

// openSched starts the scheduler sampler's baseline and opens its file, DIR/sched/NAME.ndjson;
// runQueue says how the run-queue waits are recorded (SamplesInfo.RunQueue).
func (n *nodeSide) openSched(name string, opts sample.SchedOptions) (sched *sample.Sched, f *os.File, runQueue string, err error) {
	dir := filepath.Join(n.s.opts.Dir, rundir.SchedDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, "", err
	}
	// Each run-queue wait placed by the kernel where it can: without the privilege or the
	// kernel's BPF the waits are sampled only, as the log and runQueue say.
	var tr *runq.Tracer
	shared := ""
	switch thisKernel := opts.Root == "" || opts.Root == "/"; {
	case !thisKernel: // a /proc of its own (a test's): its threads are not this kernel's
		err = fmt.Errorf("the threads are read under %s, not this kernel's /proc: %w", opts.Root, runq.ErrUnsupported)
	case n.s.opts.RunQueue != nil && n.runqTaken.CompareAndSwap(false, true):
		if tr, err = runq.Attach(*n.s.opts.RunQueue); err != nil {
			n.runqTaken.Store(false)
		}
		shared = ", one program for this machine's agents"
	default:
		tr, err = runq.Open(runq.Options{})
	}
	switch {
	case err == nil:
		opts.Placer, opts.Log = tr, n.s.log
		if shared != "" {
			opts.Placer = &sharedPlacer{tr, func() { n.runqTaken.Store(false) }}
		}
		opts.Interval = max(opts.Interval, sample.PlacedSchedInterval)
		runQueue = fmt.Sprintf("placed by the kernel (sched_switch%s), each of at least %v, beside samples every %v", shared, tr.MinWait(), opts.Interval)
	case errors.Is(err, runq.ErrUnsupported):
		runQueue = "sampled only: " + err.Error()
	default: // a kernel that refused the program: the samples still hold every wait
		runQueue = "sampled only: the placer failed: " + err.Error()
	}
	n.s.log.Info("run-queue waits", "how", runQueue)
	if sched, err = sample.NewSched(opts); err != nil {
		if opts.Placer != nil {
			opts.Placer.Close()
		}
		return nil, nil, "", err
	}
	f, err = os.OpenFile(filepath.Join(dir, name+rundir.SchedExt), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		sched.Close()
		return nil, nil, "", err
	}
	return sched, f, runQueue, nil
}

func (sm *sampler) running() bool {
	select {
	case <-sm.done:
		return false
	default:
		return true
	}
}

// registerShutdown stops every sampler when the agent's HTTP server shuts down (the server
// hands itself to handlers through the request context).
func (n *nodeSide) registerShutdown(r *http.Request) {
	n.onShutdown.Do(func() {
		if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
			srv.RegisterOnShutdown(func() { n.stopAll() })
		}
	})
}

// shutdownNode stops every sampler and waits for them (Serve should call it once the HTTP server
// has stopped, as it does shutdownEngine). Until it does, samplers are stopped through the HTTP
// server's shutdown hook, which runs concurrently with Serve returning.
func (s *Server) shutdownNode() {
	if n, ok := nodeSides.LoadAndDelete(s); ok {
		n.(*nodeSide).stopAll()
	}
}

// stopAll stops every running sampler and returns how many there were.
func (n *nodeSide) stopAll() int {
	n.mu.Lock()
	var all []*sampler
	for _, sm := range n.samplers {
		all = append(all, sm)
	}
	n.mu.Unlock()
	running := 0
	for _, sm := range all {
		if sm.running() {
			running++
		}
		sm.cancel()
		<-sm.done
	}
	return running
}

func (n *nodeSide) handleSamplesList(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	out := []SamplesInfo{}
	for _, sm := range n.samplers {
		out = append(out, sm.info)
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b SamplesInfo) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (n *nodeSide) handleSamplesStop(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n.mu.Lock()
	sm := n.samplers[name]
	n.mu.Unlock()
	if sm == nil {
		writeErr(w, http.StatusNotFound, fmt.Errorf("no samples named %q", name))
		return
	}
	sm.cancel()
	<-sm.done
	n.mu.Lock()
	info := sm.info
	n.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
}

// handleSamplesRead serves the file, also after the agent restarted (it reads from disk).
func (n *nodeSide) handleSamplesRead(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !sampleName.MatchString(name) {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("samples name %q is not valid", name))
		return
	}
	f, err := os.Open(filepath.Join(n.samplesDir(), name+".ndjson"))
	if errors.Is(err, os.ErrNotExist) {
		writeErr(w, http.StatusNotFound, fmt.Errorf("no samples named %q", name))
		return
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	io.Copy(w, f)
}
