package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
)

// The engines' own recordings (engine.recording: on; docs/engines.md, "Inside a JVM engine"): after each timeline action and
// at the end of the load every server's agent takes its engine's recording since its last take
// and reads it into <node>/inside.ndjson (agent/recording.go). A take during the load runs
// beside the timeline, so the next action does not wait for it.

type recordings struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	noted map[string]bool    // notes already warned about, by node and text
	win   *recording.Windows // engine.recording: windows; made by the timeline
}

func (r *run) recordingOn() bool { return r.pb.Engine.Recorded() }

// RecordingBudget is what one server's recording costs a run: the memory its recorder holds in
// the engine, and the most its takes keep on its agent's disk.
type RecordingBudget struct {
	MemoryBytes int64 // 0: none, or not known
	Takes       int   // one after each timeline action, one at the end
	DiskBytes   int64 // at most, for all of Takes
	// Known is false for a recorder the budget cannot bound (a JVM's Flight Recorder: its
	// repository grows with what the JVM does); the checks then leave it out and say so.
	Known bool
}

// RecordingBudgetOf is the recording budget of a server in a run of pb. A Go engine's flight
// recorder holds at most engine.FlightRecorderBytes, and a take keeps at most one dump of it
// (the generations no earlier take had: agent/recording.go), so DiskBytes is that once per take.
func RecordingBudgetOf(pb *playbooks.Playbook) RecordingBudget {
	if !pb.Engine.Recorded() {
		return RecordingBudget{Known: true}
	}
	b := RecordingBudget{Takes: len(pb.Timeline) + 1}
	if launch.RecordingFormat(pb) == recording.FormatGoTrace {
		b.MemoryBytes, b.Known = engine.FlightRecorderBytes, true
		b.DiskBytes = int64(b.Takes) * engine.FlightRecorderBytes
	}
	return b
}

// takeRecordingsAsync takes every server's recording after a window, beside the timeline, and
// leaves reading it to the end (agent.RecordingRequest.Defer). The take outlives the timeline's
// context: the last action's take may still be under way when the load ends.
func (r *run) takeRecordingsAsync(ctx context.Context, window string) {
	if !r.recordingOn() {
		return
	}
	r.rec.wg.Add(1)
	go func() {
		defer r.rec.wg.Done()
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordingTakeTimeout)
		defer cancel()
		r.takeRecordings(tctx, agent.RecordingRequest{Window: window, Defer: true})
	}()
}

// recordingTakeTimeout bounds a take during the load; recordingReadTimeout the take at the end,
// which reads every recording (the JDK's jfr tool: seconds per window on a loaded machine).
const (
	recordingTakeTimeout = time.Minute
	recordingReadTimeout = 5 * time.Minute
)

// takeRecordings takes every live server's recording, one agent at a time during the load (a
// take starts a JDK tool on its node, and the local target's nodes share one machine), all at
// once at the end.
func (r *run) takeRecordings(ctx context.Context, req agent.RecordingRequest) {
	if !r.recordingOn() {
		return
	}
	var wg sync.WaitGroup
	for _, n := range r.liveNodes(r.servers) {
		if req.Defer {
			r.takeRecording(ctx, n.Name, req)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.takeRecording(ctx, n.Name, req)
		}()
	}
	wg.Wait()
}

func (r *run) takeRecording(ctx context.Context, node string, req agent.RecordingRequest) {
	resp, err := r.agent(node).TakeRecording(ctx, req)
	if err != nil {
		r.log.Warn("take recording", "node", node, "window", req.Window, "err", err)
		r.noteRecording(node, fmt.Sprintf("taking its recording after %s: %v", req.Window, err))
		return
	}
	r.log.Info("recording taken", "node", node, "window", req.Window, "files", resp.Files, "spans", resp.Spans)
	for _, note := range resp.Notes {
		r.noteRecording(node, note)
	}
}

// noteRecording warns once per node about what a take could not do.
func (r *run) noteRecording(node, note string) {
	r.rec.mu.Lock()
	if r.rec.noted == nil {
		r.rec.noted = map[string]bool{}
	}
	key := node + "\x00" + firstLine(note)
	seen := r.rec.noted[key]
	r.rec.noted[key] = true
	r.rec.mu.Unlock()
	if !seen {
		r.warn("engine recording on %s: %s", node, note)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// finishRecordings waits for the takes under way, takes the rest of every recording and reads
// them all, on a context of its own: the controller's finishing budget is for stopping things.
func (r *run) finishRecordings(ctx context.Context) {
	if !r.recordingOn() {
		return
	}
	r.rec.wg.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordingReadTimeout)
	defer cancel()
	start := time.Now()
	r.rec.mu.Lock()
	win := r.rec.win
	r.rec.mu.Unlock()
	if win != nil {
		if err := win.Finish(rctx, "end"); err != nil {
			r.noteRecording("every server", err.Error())
		}
		var rec []rundir.Stretch
		for _, sp := range win.Spans() {
			rec = append(rec, rundir.Stretch{FromNs: sp.From.UnixNano(), ToNs: sp.To.UnixNano()})
		}
		r.updateManifest(func(m *rundir.Manifest) { m.Recorded = rec })
	}
	r.takeRecordings(rctx, agent.RecordingRequest{Window: "end"})
	r.progress("engine recordings read into %s in %s", rundir.InsideFile, time.Since(start).Round(time.Millisecond))
}

// With engine.recording: windows each server's recorder runs only around the timeline's
// windows (recording.Windows): started recording.DefaultWindowOptions.Lead before an action,
// taken and stopped Tail after its window ends (the action done, no relaunch pending and every
// server not down ready again), windows that overlap one recording.

// recordingWindows is the run's recording.Windows, made at the first call; nil unless
// engine.recording: windows.
func (r *run) recordingWindows() *recording.Windows {
	if r.pb.Engine.RecordingMode() != playbooks.RecordingWindows {
		return nil
	}
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	if r.rec.win == nil {
		opt := recording.DefaultWindowOptions
		if launch.RecordingFormat(r.pb) == recording.FormatJFR {
			opt.Lead = recording.JFRWindowLead
		}
		w, err := recording.NewWindows(recordingSwitch{r}, opt)
		if err != nil {
			panic(err) // the default options are valid
		}
		r.rec.win = w
	}
	return r.rec.win
}

// recordingSwitch is every live server's recorder, as recording.Windows runs it.
type recordingSwitch struct{ r *run }

// Start starts every live server's recorder, all at once (a start is one admin call).
func (s recordingSwitch) Start(ctx context.Context) error {
	s.r.takeRecordings(ctx, agent.RecordingRequest{Window: "start", Start: true})
	return nil
}

// Dump takes every live server's recording, deferred as during the load, and stops it.
func (s recordingSwitch) Dump(ctx context.Context, window string, stop bool) error {
	s.r.takeRecordings(ctx, agent.RecordingRequest{Window: window, Defer: true, Stop: stop})
	return nil
}

// windowEndMax bounds the wait for a window's end past its nodes' return (a node that never
// gets ready again).
const windowEndMax = 30 * time.Second

// windowBack says, before an action runs, what its window's end waits for: an action that takes
// nodes down for a while (a kill or power loss with a relaunch) ends once the count of servers
// down is back to now's, after its For; others (and one that takes nodes down for the rest of
// the run) once every server not down is ready.
type windowBack struct {
	down int           // servers down before the action; -1: do not wait for any to return
	For  time.Duration // how long the action keeps them down
}

func (r *run) windowBack(do actions.Spec) windowBack {
	b := windowBack{down: -1}
	if d, ok := do.(actions.Downer); ok && d.Down().For > 0 {
		b.For = d.Down().For
		r.mu.Lock()
		b.down = 0
		for _, s := range r.servers {
			if r.srv(s.Name).down {
				b.down++
			}
		}
		r.mu.Unlock()
	}
	return b
}

// closeRecordingWindow closes the window of the action just run, beside the timeline: once its
// nodes are back (windowBack) and every server not down is ready, and Tail after that, its
// recording is taken (and the recorder stopped unless the next window, due at next, is close).
func (r *run) closeRecordingWindow(ctx context.Context, win *recording.Windows, window string, back windowBack, next time.Time) {
	r.rec.wg.Add(1)
	go func() {
		defer r.rec.wg.Done()
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), back.For+windowEndMax+recordingTakeTimeout)
		defer cancel()
		err := r.waitFor(ctx, back.For+windowEndMax, func() (bool, error) {
			down := 0
			for _, s := range r.servers {
				st := r.srv(s.Name)
				if st.down {
					down++
				} else if st.status.Phase != engine.PhaseReady {
					return false, nil
				}
			}
			return back.down < 0 || down <= back.down, nil
		})
		if err != nil && !errors.Is(err, errTimeout) && ctx.Err() == nil {
			r.log.Warn("wait for the window's end", "window", window, "err", err)
		}
		if err := win.Close(tctx, window, next); err != nil {
			r.noteRecording("every server", err.Error())
		}
	}()
}
