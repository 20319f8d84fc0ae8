package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/rundir"

	"golang.org/x/sys/unix"
)

// finalState waits until every running server has applied the same index (nothing is in flight
// once the load stopped), then reads each state hash at that index and keeps the status in
// <node>/status.json, and the orders it holds in <node>/orders.json. Hashes compared at different indexes would mean nothing.
func (r *run) finalState(ctx context.Context) error {
	if !r.enginesStarting {
		return nil // no engine was started (the run was refused before): no final state
	}
	deadline := time.NewTimer(finalStateTimeout)
	defer deadline.Stop()
	var sts map[string]engine.Status
	for waiting := true; waiting; {
		sts = map[string]engine.Status{}
		var idx []uint64
		for _, n := range r.servers {
			st, err := r.agent(n.Name).EngineStatusHash(ctx)
			if err != nil {
				continue // a node that is down has no final state; the summary shows it
			}
			sts[n.Name] = st
			idx = append(idx, st.AppliedIndex)
		}
		same := len(idx) > 0
		for _, i := range idx {
			same = same && i == idx[0]
		}
		if same || r.allDown() {
			break
		}
		// The applied index is not in an engine's change stream (it moves with every entry),
		// so it is read again after finalStateRetry, or at once when a server's state changes
		// (one went down); the wait ends with ctx or the deadline.
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		retry := time.NewTimer(finalStateRetry)
		select {
		case <-changed:
		case <-retry.C:
		case <-deadline.C:
			waiting = false
		case <-ctx.Done():
			waiting = false
		}
		retry.Stop()
	}
	var errs []error
	for _, n := range r.servers {
		os.MkdirAll(filepath.Join(r.dir, n.Name), 0o755)
		st, ok := sts[n.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no final status", n.Name))
			continue
		}
		if err := atomicfile.WriteJSON(filepath.Join(r.dir, n.Name, rundir.StatusFile), st); err != nil {
			errs = append(errs, err)
		}
		// Which acknowledged orders it holds, for the durability check (analysis); an engine
		// without GET /orders is left unchecked, and the analysis says so.
		if h, err := r.agent(n.Name).EngineOrders(ctx); err != nil {
			r.log.Info("held orders", "node", n.Name, "err", err)
		} else if err := atomicfile.WriteJSON(filepath.Join(r.dir, n.Name, rundir.HeldOrdersFile), h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// How long finalState waits for the servers to reach one applied index, and how often it looks.
const (
	finalStateTimeout = 30 * time.Second
	finalStateRetry   = 50 * time.Millisecond
)

// exitAfterFailure is how long a failed run waits for an engine exit that its failure caused.
const exitAfterFailure = time.Second

// allDown reports whether every server's engine is known to have ended.
func (r *run) allDown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.servers {
		if r.srv(n.Name).status.Phase != rundir.PhaseDown {
			return false
		}
	}
	return true
}

// finish stops everything the run started, then writes the manifest, summary and report (for
// failed and interrupted runs too, with whatever was collected). It returns the run's error: the
// one it was given, preceded by the cause when a lease lapsed or an engine died outside the
// schedule (what followed, a proxy error or no leader, is a symptom).
func (r *run) finish(ctx context.Context, cleanup func(context.Context), runErr error, interrupted bool) error {
	r.mu.Lock()
	// An agent may say its lease lapsed (410) before the renewer gives up on it: that is a lapse
	// too, and the engine it stopped is what followed.
	lapsed := r.lapse != nil || errors.Is(runErr, agent.ErrLeaseLapsed)
	r.mu.Unlock()
	if cleanup != nil && r.cl != nil && runErr != nil && !interrupted && !lapsed {
		// An engine that fails on its storage first answers the request that hit the failure
		// (a snapshot: "no space left on device") and stops a moment later (fatalGrace in
		// engine/replica/fatal.go): wait for such an exit, so the cause leads the error.
		_ = r.waitFor(ctx, exitAfterFailure, func() (bool, error) { return r.fault != nil, nil })
	}
	// After a lapse the agent has stopped its engine and refuses the run: no final state.
	if cleanup != nil && r.cl != nil && !interrupted && !lapsed {
		if err := r.finalState(ctx); err != nil && runErr == nil {
			r.warn("final state: %v", err)
		}
		r.finishRecordings(ctx)
	}
	r.mu.Lock()
	fault, lapse := r.fault, r.lapse
	r.stopping = true
	r.mu.Unlock()
	switch {
	case lapse != nil:
		// The lapse is the cause: the engine its agent stopped, and the stages cut short, follow.
		if runErr != nil && !errors.Is(runErr, ErrLeaseLapsed) && !errors.Is(runErr, context.Canceled) {
			runErr = fmt.Errorf("%w\n(then: %v)", lapse, runErr)
		} else {
			runErr = lapse
		}
	case fault == nil || errors.Is(runErr, ErrEngineExited) || lapsed:
	case errors.Is(runErr, fault): // the run was aborted for it (a disk model lost) and says so
	case runErr == nil || errors.Is(runErr, context.Canceled) && !interrupted:
		// (cancelled: aborted for the fault before a stage named it)
		runErr = fault
	default:
		runErr = fmt.Errorf("%w\n(then: %v)", fault, runErr)
	}
	if cleanup != nil {
		// Engines stop first: their last transitions are drained by cleanup, their data removed.
		// A book the engine captures itself is snapshotted while the engines run and captured
		// from the leader's data once they stopped, before that data goes.
		from, hash, orders, capture := r.captureFrom(ctx, runErr)
		r.stopEngines(ctx)
		if capture {
			r.captureBook(ctx, from, hash, orders)
		}
		r.removeData(ctx)
		cleanup(ctx)
		r.recordAgentCPU()
	}
	r.mark("end")
	// events.jsonl is the run's primary record: a line lost from it fails the run.
	evErr := r.ev.Err()
	if evErr != nil {
		runErr = errors.Join(runErr, fmt.Errorf("events.jsonl is incomplete: %w", evErr))
	}
	r.updateManifest(func(m *rundir.Manifest) {
		m.Ended = time.Now().UTC()
		m.LoadAvg.End = loadavg.Now()
		switch {
		case interrupted:
			m.Status = rundir.StatusInterrupted
		case runErr != nil:
			m.Status = rundir.StatusFailed
		default:
			m.Status = rundir.StatusOK
		}
		if runErr != nil {
			m.Error = runErr.Error()
		}
		checkLoad(m)
	})
	r.keepFinalStatus()
	r.recordActuals()
	r.storeBook()
	r.saveManifest()
	analysisStart := time.Now()
	if r.opts.Analyze != nil {
		// The run did what it was told, but not what the playbook asked (the load overran its
		// duration, or most probes were lost): it is not a measurement, so it ends failed.
		failed := func(reason string) {
			r.updateManifest(func(m *rundir.Manifest) { m.Status, m.Error = rundir.StatusFailed, reason })
			r.progress("run failed: %s", reason)
		}
		if err := r.opts.Analyze(r.dir, failed); err != nil {
			r.log.Error("analyze", "err", err)
			r.progress("analysis failed: %v", err)
		}
	}
	r.recordHistory(time.Since(analysisStart))
	// Lines are flushed as they are added, so closing only finds what a later warning met.
	r.ev.Close() // what it meets is kept in Err
	if err := r.ev.Err(); evErr == nil && err != nil {
		err = fmt.Errorf("events.jsonl is incomplete: %w", err)
		r.updateManifest(func(m *rundir.Manifest) {
			if m.Status == rundir.StatusOK {
				m.Status = rundir.StatusFailed
			}
			m.Error = errors.Join(runErr, err).Error()
		})
		runErr = errors.Join(runErr, err)
	}
	r.progress("run %s: %s", r.id, r.man.Status)
	releaseRecordSpace(r.dir)
	r.manMu.Lock()
	manErr := r.manErr
	r.manMu.Unlock()
	if manErr != nil {
		runErr = errors.Join(runErr, fmt.Errorf("manifest.json: %w", manErr))
	}
	return runErr
}

// checkLoad flags a run measured on an overloaded machine (load average above the core count).
func checkLoad(m *rundir.Manifest) {
	for _, p := range m.Phases {
		if len(p.LoadAvg) > 0 && p.LoadAvg[0] > float64(m.CPUs) {
			m.Warnings = append(m.Warnings, fmt.Sprintf("load average %.2f at %s exceeds %d cpus: figures from this run are suspect", p.LoadAvg[0], p.Name, m.CPUs))
			return
		}
	}
}

// recordReserveFile holds room on the results disk for the manifest's last write: a run whose
// disk fills up (its engines' data, a recording, another program) must still be able to say it
// failed, and a manifest is rewritten whole (a new file, then a rename), so it needs free space
// as large as itself.
const (
	recordReserveFile  = ".manifest.reserve"
	recordReserveBytes = 1 << 20
)

// reserveRecordSpace allocates the reserve in the run folder (real blocks, not a sparse file).
// Without it a run still runs: a full disk then leaves its manifest as the last write that fit.
func (r *run) reserveRecordSpace() {
	path := filepath.Join(r.dir, recordReserveFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = unix.Fallocate(int(f.Fd()), 0, 0, recordReserveBytes)
		if errors.Is(err, unix.EOPNOTSUPP) { // a filesystem without fallocate: written out
			_, err = f.Write(make([]byte, recordReserveBytes))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}
	if err != nil {
		r.log.Warn("reserve room for the manifest's last write", "err", err)
	}
}

// releaseRecordSpace gives the reserve back; it is gone once the run ends.
func releaseRecordSpace(dir string) { os.Remove(filepath.Join(dir, recordReserveFile)) }

// keepFinalStatus makes manifest.json say how the run ended when a write of it failed (the
// results disk is full): the reserve is given back and the manifest written again into its room.
// Once the manifest on disk is the run's whole record, an earlier failed write is no longer an
// error of the run.
func (r *run) keepFinalStatus() {
	r.manMu.Lock()
	defer r.manMu.Unlock()
	if r.manErr == nil {
		return
	}
	releaseRecordSpace(r.dir)
	if err := rundir.WriteManifest(r.dir, r.man); err != nil {
		r.log.Error("write the final manifest into the reserved room", "err", err)
		return
	}
	r.manErr = nil
}
