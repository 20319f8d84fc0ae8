package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/inventory"
)

// Lease endpoints: a run holds the agent while its controller keeps renewing; when the lease
// lapses (the controller was killed, the network cut) the agent stops its engine, reverts its
// tuning and stops its samplers by itself, and records that it did in DIR/lease.jsonl.
//
//	POST   /v1/lease        LeaseRequest -> LeaseState (claim or renew; 409 while another run holds it)
//	GET    /v1/lease        -> LeaseState
//	DELETE /v1/lease?run=ID -> LeaseState (release at the end of the run: only its cpu hogs still
//	                           running are killed; the run stopped its engine itself)
//
// While a run holds the lease, a request naming another run (HeaderRun) is refused with 409.
// A run whose lease lapsed is refused with 410, but for its reads (GET) while no other run holds
// the agent: it may still collect what it left.

// LeaseFile records every lapse and release, one JSON object a line.
const LeaseFile = "lease.jsonl"

// Lease bounds.
const (
	MinLeaseTTL = 500 * time.Millisecond
	MaxLeaseTTL = 10 * time.Minute
)

// LeaseRequest claims or renews the lease for a run.
type LeaseRequest struct {
	Run string `json:"run"`
	TTL string `json:"ttl"` // Go duration
}

// LeaseState is the lease as the agent holds it.
type LeaseState struct {
	Run       string       `json:"run,omitempty"` // "" when free
	TTL       string       `json:"ttl,omitempty"`
	Renewed   time.Time    `json:"renewed,omitempty"` // last claim or renewal (node clock)
	Expires   time.Time    `json:"expires,omitempty"`
	LastLapse *LeaseRecord `json:"last_lapse,omitempty"`
}

// LeaseRecord is a line of lease.jsonl: what the agent did when a lease ended.
type LeaseRecord struct {
	T               time.Time `json:"t"`
	Event           string    `json:"event"` // lapsed | agent_stopped | released
	Run             string    `json:"run"`
	LastRenewed     time.Time `json:"last_renewed"`
	EngineStopped   bool      `json:"engine_stopped,omitempty"`
	EngineExit      string    `json:"engine_exit,omitempty"`
	TuningReverted  int       `json:"tuning_reverted,omitempty"` // settings put back
	SamplersStopped int       `json:"samplers_stopped,omitempty"`
	HogsStopped     int       `json:"hogs_stopped,omitempty"` // cpu hogs killed (hog_handlers.go)
	Errors          []string  `json:"errors,omitempty"`
}

type leaseSide struct {
	mu      sync.Mutex
	run     string
	ttl     time.Duration
	renewed time.Time
	expires time.Time
	lapsed  map[string]LeaseRecord // runs whose lease lapsed: 410 but for their reads
	last    *LeaseRecord
	timer   *time.Timer
	undoing sync.WaitGroup // lapses being undone: the agent's exit waits for them to be recorded
}

func (l *leaseSide) holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.run
}

func (l *leaseSide) stateLocked() LeaseState {
	st := LeaseState{Run: l.run, LastLapse: l.last}
	if l.run != "" {
		st.TTL, st.Renewed, st.Expires = l.ttl.String(), l.renewed, l.expires
	}
	return st
}

func (s *Server) registerLeaseHandlers(ctx context.Context) {
	s.lease.lapsed = map[string]LeaseRecord{}
	p := APIVersion
	s.mux.HandleFunc("POST "+p+"/lease", s.handleLeaseClaim)
	s.mux.HandleFunc("GET "+p+"/lease", func(w http.ResponseWriter, r *http.Request) {
		s.lease.mu.Lock()
		defer s.lease.mu.Unlock()
		writeJSON(w, http.StatusOK, s.lease.stateLocked())
	})
	s.mux.HandleFunc("DELETE "+p+"/lease", s.handleLeaseRelease)
}

func (s *Server) handleLeaseClaim(w http.ResponseWriter, r *http.Request) {
	var req LeaseRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if err := inventory.CheckName("lease run", req.Run); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("lease ttl %q: want a Go duration from %s to %s", req.TTL, MinLeaseTTL, MaxLeaseTTL))
		return
	}
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run != "" && l.run != req.Run {
		writeErr(w, http.StatusConflict, fmt.Errorf("agent of %s is held by run %s (renewed %s, expires %s)",
			s.opts.Node, l.run, l.renewed.Format(time.RFC3339Nano), l.expires.Format(time.RFC3339Nano)))
		return
	}
	if rec, ok := l.lapsed[req.Run]; ok {
		writeErr(w, http.StatusGone, lapsedErr(rec))
		return
	}
	now := time.Now()
	l.run, l.ttl, l.renewed, l.expires = req.Run, ttl, now, now.Add(ttl)
	if l.timer == nil {
		l.timer = time.AfterFunc(ttl, s.checkLease)
	} else {
		l.timer.Reset(ttl)
	}
	w.Header().Set(HeaderRun, l.run)
	writeJSON(w, http.StatusOK, l.stateLocked())
}

func (s *Server) handleLeaseRelease(w http.ResponseWriter, r *http.Request) {
	run := r.URL.Query().Get("run")
	l := &s.lease
	l.mu.Lock()
	if l.run == "" || l.run != run {
		err := fmt.Errorf("release: the lease is held by %q, not by %q", l.run, run)
		l.mu.Unlock()
		writeErr(w, http.StatusConflict, err)
		return
	}
	rec := LeaseRecord{Event: "released", Run: l.run, LastRenewed: l.renewed}
	l.run = ""
	if l.timer != nil {
		l.timer.Stop()
	}
	st := l.stateLocked()
	l.mu.Unlock()
	// A hog the run did not end (its controller gave up on the end request, or released early)
	// ends with its lease, before the answer: the next run finds the node quiet.
	rec.HogsStopped = s.stopHogs(run, false)
	rec.T = time.Now()
	s.appendLeaseRecord(rec)
	writeJSON(w, http.StatusOK, st)
}

func lapsedErr(rec LeaseRecord) error {
	return fmt.Errorf("the lease of run %s lapsed at %s (last renewed %s): the agent stopped its engine and reverted its tuning",
		rec.Run, rec.T.Format(time.RFC3339Nano), rec.LastRenewed.Format(time.RFC3339Nano))
}

// checkLease runs when the lease's timer fires: a renewal in the meantime moved the expiry (and
// reset the timer), so it only acts once the expiry has really passed.
func (s *Server) checkLease() {
	if run, renewed, ok := s.lapseIfExpired(); ok {
		s.undoLapsed(run, renewed)
	}
}

// lapseIfExpired ends the lease if its expiry has passed and says whose it was. The run is
// refused from this moment, not from when the undo is done: its controller must not drive the
// agent while its engine is being stopped and its tuning reverted.
func (s *Server) lapseIfExpired() (run string, renewed time.Time, ok bool) {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run == "" {
		return "", time.Time{}, false
	}
	if time.Now().Before(l.expires) {
		return "", time.Time{}, false // every claim and renewal resets the timer to the expiry
	}
	run, renewed = l.run, l.renewed
	l.run = ""
	l.lapsed[run] = LeaseRecord{Event: "lapsed", Run: run, LastRenewed: renewed, T: time.Now()}
	l.undoing.Add(1) // undoLapsed is the caller's next step
	return run, renewed, true
}

// undoLapsed undoes a lapsed run and records it.
func (s *Server) undoLapsed(run string, renewed time.Time) {
	defer s.lease.undoing.Done()
	s.log.Warn("lease lapsed: the controller stopped renewing; stopping the engine and reverting tuning", "run", run, "last_renewed", renewed)
	rec := s.undoRun("lapsed", run, renewed)
	l := &s.lease
	l.mu.Lock()
	l.lapsed[run] = rec
	l.last = &rec
	l.mu.Unlock()
	s.appendLeaseRecord(rec) // after the state: whoever reads the record finds GET /lease agree
}

// undoRun leaves the node as it was before the run: the engine stopped, tuning reverted,
// samplers and cpu hogs stopped; it returns what it did, for the caller to record once its state says so.
func (s *Server) undoRun(event, run string, renewed time.Time) LeaseRecord {
	rec := LeaseRecord{Event: event, Run: run, LastRenewed: renewed}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e, err := s.currentEngine(); err == nil && e.Running() {
		exit, err := e.Stop(ctx, 5*time.Second)
		rec.EngineStopped = err == nil
		if exit != nil {
			rec.EngineExit = exit.Desc
		}
		if err != nil {
			rec.Errors = append(rec.Errors, "stop engine: "+err.Error())
		}
	}
	if v, ok := nodeSides.Load(s); ok {
		n := v.(*nodeSide)
		n.tuneMu.Lock()
		rep, err := tune.Revert(ctx, n.tuneOptions())
		n.tuneMu.Unlock()
		rec.TuningReverted = len(rep.Changes)
		if err != nil && !errors.Is(err, tune.ErrNotApplied) {
			rec.Errors = append(rec.Errors, "revert tuning: "+err.Error())
		}
		rec.SamplersStopped = n.stopAll()
	}
	rec.HogsStopped = s.stopHogs(run, false)
	rec.T = time.Now()
	s.log.Warn("run undone", "event", event, "run", run, "engine_stopped", rec.EngineStopped,
		"tuning_reverted", rec.TuningReverted, "samplers_stopped", rec.SamplersStopped, "hogs_stopped", rec.HogsStopped, "errors", rec.Errors)
	return rec
}

// undoOnExit runs when the agent stops while a run still holds its lease (the local target's
// agents get TERM when their controller dies): the same undo as a lapse.
func (s *Server) undoOnExit() {
	l := &s.lease
	// A lapse found just before the exit (the controller gave up and stopped the node) is
	// undone and recorded before the agent goes, or lease.jsonl would miss it.
	if run, renewed, ok := s.lapseIfExpired(); ok {
		s.undoLapsed(run, renewed) // expired before the stop: a lapse, recorded as one
	}
	l.undoing.Wait()
	l.mu.Lock()
	run, renewed := l.run, l.renewed
	l.run = ""
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	if run != "" {
		s.appendLeaseRecord(s.undoRun("agent_stopped", run, renewed))
	}
}

func (s *Server) appendLeaseRecord(rec LeaseRecord) {
	f, err := os.OpenFile(filepath.Join(s.opts.Dir, LeaseFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		s.log.Error("lease record", "err", err)
		return
	}
	defer f.Close()
	b, _ := json.Marshal(rec)
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		s.log.Error("lease record", "err", err)
	}
}

// identify stamps every answer with the agent's node and lease holder, and refuses a request
// that names another run than the one holding the lease (or a run whose lease lapsed, but for
// its reads).
func (s *Server) identify(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request that arrives after the expiry, before the timer ran (the agent was stopped
		// and its queued renewal won the race), finds the lease lapsed, not renewed, and is
		// answered at once while the undo runs.
		if run, renewed, ok := s.lapseIfExpired(); ok {
			go s.undoLapsed(run, renewed)
		}
		l := &s.lease
		l.mu.Lock()
		holder := l.run
		rec, lapsed := l.lapsed[r.Header.Get(HeaderRun)]
		l.mu.Unlock()
		w.Header().Set(HeaderNode, s.opts.Node)
		w.Header().Set(HeaderRun, holder)
		run := r.Header.Get(HeaderRun)
		switch {
		case run == "":
		case lapsed && holder != run && (holder != "" || r.Method != http.MethodGet):
			// A lapsed run may still read what it left (its collect, samples, transitions)
			// until another run claims the agent; it never changes the node again.
			writeErr(w, http.StatusGone, lapsedErr(rec))
			return
		case holder != "" && holder != run:
			writeErr(w, http.StatusConflict, fmt.Errorf("agent of %s is held by run %s, not by run %s", s.opts.Node, holder, run))
			return
		}
		h.ServeHTTP(w, r)
	})
}
