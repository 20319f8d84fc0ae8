// Package runner executes a plan: for each run it starts a cluster from a target (target.Target),
// starts the engines through the cluster's agents, preloads, runs the probe stream and the
// timeline, watches every engine's transitions, and leaves a complete run folder (see
// docs/architecture.md), also when the run fails or is interrupted. The runner never knows which
// target it has: everything that differs between targets is behind target.Cluster.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
)

// ErrInterrupted classifies a run stopped by the user (SIGINT/SIGTERM).
var ErrInterrupted = errors.New("run interrupted")

// Options configure a plan's execution.
type Options struct {
	Target     target.Target // where the runs run (required)
	ResultsDir string        // a run goes to ResultsDir/<run-id>/, a sweep's to ResultsDir/<sweep-id>/rNN/ (default "results")
	Binary     string        // the rig binary agents and the load generator run (default: this executable)
	KeepData   bool          // keep engine data (raft log, snapshots) on the nodes
	// DataMount is where each server's data volume (inventory data_device) is mounted for the
	// engine's log and snapshots (default /data), with a DataFS filesystem made if it has none
	// (default xfs). Servers without a data_device keep engine data in their agent folder.
	DataMount, DataFS string
	Logger            *slog.Logger // controller log
	Progress          io.Writer    // human progress lines (nil: none)
	// LeaseTTL is how long each agent keeps the run's lease without a renewal (lease.go;
	// default DefaultLeaseTTL; the agent takes agent.MinLeaseTTL to agent.MaxLeaseTTL).
	LeaseTTL time.Duration
	// RebootTimeout bounds the wait for a node a power_loss rebooted to come back (a stack's;
	// 0: target.DefaultRebootTimeout).
	RebootTimeout time.Duration
	// OpenSweep opens the sweep a plan of more than one run runs in, once every timeline is
	// checked: started (sweep.Start) or resumed (sweep.Resume) by the caller, which knows the
	// target's stack; runs a resumed sweep kept from an earlier attempt are not run again.
	// Required for a plan of more than one run.
	OpenSweep func() (Sweep, error)
	// Analyze analyses a finished run's folder and writes what it makes of it (summary.json,
	// report.md, plots: analysis.AnalyzeRun), calling failed when the run did what it was told
	// but is no measurement (the run then ends failed). Nil: the run folder is left unanalysed.
	Analyze func(dir string, failed func(reason string)) error
	// Command is the controller's command line, and EngineVersion and EngineCommit label the
	// engine build under test, for the manifest (its command and engine_build) and the results
	// index (package history).
	Command                     []string
	EngineVersion, EngineCommit string
	// RunEnded, if set, is called after each run of the plan has ended and its sweep.json entry
	// is written (cmd/rig adds the run to the results index there).
	RunEnded func(Outcome)

	history *history // ResultsDir's stage-time history, read by Run
}

// Sweep is the folder the runs of a plan of more than one run go to (sweep.Tracker): which runs
// an earlier attempt kept, where each goes, and the record of each run's start and end.
type Sweep interface {
	Kept(i int) bool
	// Begin records that the plan's i-th run starts; an error stops the sweep there.
	Begin(i int) error
	RunDir(i int) (dir, runID string)
	End(i int, runID, status string) error
	// FinishRuns records the sweep's end from its runs' statuses and writes its report.
	FinishRuns(statuses []string) error
	Folder() string
}

// Outcome is one finished run.
type Outcome struct {
	RunID    string
	Dir      string
	Status   string
	Err      error
	SweepDir string // the sweep folder the run belongs to; "" for a lone run
}

// Run executes every run of the plan in order. It stops at the first interrupted run; a failed
// run does not stop the plan (its folder says why).
func Run(ctx context.Context, plan *playbooks.Plan, opts Options) ([]Outcome, error) {
	if opts.ResultsDir == "" {
		opts.ResultsDir = "results"
	}
	if opts.Target == nil {
		return nil, errors.New("runner: no target")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DataMount == "" {
		opts.DataMount = "/data"
	}
	if opts.DataFS == "" {
		opts.DataFS = "xfs"
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.LeaseTTL < agent.MinLeaseTTL || opts.LeaseTTL > agent.MaxLeaseTTL {
		return nil, fmt.Errorf("runner: lease %s: want %s to %s", opts.LeaseTTL, agent.MinLeaseTTL, agent.MaxLeaseTTL)
	}
	if opts.Binary == "" {
		bin, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find rig binary: %w", err)
		}
		opts.Binary = bin
	}
	hist, err := estimate.Load(opts.ResultsDir)
	if err != nil {
		opts.Logger.Warn("stage-time history unreadable; estimates use the defaults", "err", err)
	}
	opts.history = &history{samples: hist}
	// Every run's timeline is checked before the first one starts anything.
	timelines := make([][]step, len(plan.Runs))
	for i, pr := range plan.Runs {
		tl, err := newTimeline(pr.Playbook)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", pr.Index, err)
		}
		timelines[i] = tl
	}
	if err := CheckTarget(plan, opts.Target); err != nil {
		return nil, err
	}
	if err := CheckVolumes(ctx, plan, opts.Target); err != nil {
		return nil, err
	}
	// A plan of more than one run is a sweep: its runs go to ResultsDir/<sweep-id>/r01, r02, …
	// with sweep.json, and the sweep report is written at the end, also when interrupted.
	var tr Sweep
	if len(plan.Runs) > 1 {
		if opts.OpenSweep == nil {
			return nil, fmt.Errorf("runner: a plan of %d runs is a sweep, and no Options.OpenSweep opens its folder", len(plan.Runs))
		}
		var err error
		if tr, err = opts.OpenSweep(); err != nil {
			return nil, err
		}
	}
	var out []Outcome
	finishSweep := func() {
		if tr == nil {
			return
		}
		var statuses []string
		for _, o := range out {
			statuses = append(statuses, o.Status)
		}
		if err := tr.FinishRuns(statuses); err != nil {
			opts.Logger.Error("sweep report", "err", err)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "sweep report: %v\n", err)
			}
		}
	}
	for i, pr := range plan.Runs {
		var place runPlace
		if tr != nil {
			if tr.Kept(i) {
				continue
			}
			if err := tr.Begin(i); err != nil {
				finishSweep()
				return out, err
			}
			place.dir, place.id = tr.RunDir(i)
		}
		o := runOne(ctx, pr, timelines[i], opts, place)
		if tr != nil {
			if o.Status == "" { // the run folder could not even be made
				o.Status = rundir.StatusFailed
			}
			o.SweepDir = tr.Folder()
			if err := tr.End(i, o.RunID, o.Status); err != nil {
				opts.Logger.Error("sweep.json", "err", err)
			}
		}
		out = append(out, o)
		if opts.RunEnded != nil {
			opts.RunEnded(o)
		}
		if errors.Is(o.Err, ErrInterrupted) {
			finishSweep()
			return out, o.Err
		}
	}
	finishSweep()
	var errs []error
	for _, o := range out {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", o.RunID, o.Err))
		}
	}
	return out, errors.Join(errs...)
}

// run is the state of one run.
type run struct {
	rec      recordings // the engines' own recordings (recording.go)
	opts     Options
	pb       *playbooks.Playbook
	timeline []step
	id       string
	secret   string // the run's engine secret (engine.ClusterSecretEnv), in no result
	dir      string
	log      *slog.Logger
	man      *rundir.Manifest
	ev       *rundir.EventLog

	cl target.Cluster // nil until the target started it
	// routed: the timeline acts on links (actions.Linker) or the playbook places its nodes in
	// zones, so the cluster is started with StartOptions.Links or Placement and the engine links
	// go through its proxies (links.go).
	routed bool
	// stopLeases stops renewing the agents' leases (lease.go)
	stopLeases func()
	// abort stops the run with a cause (a lapsed lease), not as an interrupt
	abort   context.CancelCauseFunc
	inv     *inventory.Inventory
	servers []inventory.Node
	client  inventory.Node
	// nodes holds what the run knows of each node (server.go); made once the inventory is known
	// and never changed after, so looking an entry up needs no lock.
	nodes map[string]*server
	// enginesStarting: startEngines began, so there may be a final state to read.
	enginesStarting bool
	// leaderTimeout is the load generator's: the longest heartbeat timeout the engines report in
	// effect, the silence after which a raft follower stands for election (0: its default).
	leaderTimeout time.Duration

	loadStart time.Time

	mu         sync.Mutex
	changed    chan struct{}  // closed (and replaced) whenever state under mu changes
	lastKilled string         // the server the timeline killed last
	asyncErrs  []error        // failures of actions running beside the timeline
	asyncWG    sync.WaitGroup // actions running beside the timeline
	fault      error          // the first engine death outside the schedule
	lapse      error          // the first lease that lapsed (ErrLeaseLapsed)
	stopping   bool           // engines are being stopped: their exits are scheduled

	// leaderChanged is when the watchers last saw a server become leader (controller clock).
	leaderChanged time.Time

	tuningSkipped bool
	burstNo       uint32               // number of the next UDP burst: one numbering per run, over every sender
	manMu         sync.Mutex           // guards man: it is updated from the timeline's goroutines too
	manErr        error                // the first failed manifest write (guarded by manMu)
	book          *rundir.BookUse      // where the resting book comes from (nil: no preload)
	installer     driver.BookInstaller // the driver that installs and writes stored books (nil: its engine cannot, or captures its own)
	bookFiles     []string             // a captured book's files, installed (bookRecord.Files)
	captured      *capturedBook        // the book this run captured, before storeBook keeps it
	captureErr    string               // why it was not captured
}

// srv is what the run knows of node. A name outside the inventory (or before it is known) gets
// a server of its own that nothing else sees, as a missing map entry reads as zero.
func (r *run) srv(node string) *server {
	if s, ok := r.nodes[node]; ok {
		return s
	}
	return &server{}
}

// killLocked counts node down and killed by the timeline, its power cut with it when powerCut,
// and notes it as the server killed last (r.mu held).
func (r *run) killLocked(node string, powerCut bool) {
	if powerCut {
		r.srv(node).cutPower()
	} else {
		r.srv(node).kill()
	}
	r.lastKilled = node
}

// agent is the client of a node's agent.
func (r *run) agent(node string) *agent.Client { return r.cl.Agent(node) }

// updateManifest changes the manifest under its lock and writes it.
func (r *run) updateManifest(f func(m *rundir.Manifest)) {
	r.manMu.Lock()
	f(r.man)
	r.manMu.Unlock()
	r.saveManifest()
}

func (r *run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "[%s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	r.log.Info(fmt.Sprintf(format, args...))
}

// runPlace is where a run of a sweep goes (its rNN folder and id); empty for a lone run, which
// gets ResultsDir/<run-id>/.
type runPlace struct{ dir, id string }

func runOne(parent context.Context, pr playbooks.PlannedRun, timeline []step, opts Options, place runPlace) Outcome {
	pb := pr.Playbook
	id, dir := place.id, place.dir
	if dir != "" {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return Outcome{RunID: id, Err: fmt.Errorf("create run folder: %w", err)}
		}
	} else {
		id = fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102-150405"), safeName(pb.Name))
		if err := os.MkdirAll(opts.ResultsDir, 0o755); err != nil {
			return Outcome{RunID: id, Err: fmt.Errorf("create results folder: %w", err)}
		}
		// Two runs started in the same second must not share a folder.
		base := id
		dir = filepath.Join(opts.ResultsDir, id)
		for i := 2; ; i++ {
			err := os.Mkdir(dir, 0o755)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrExist) {
				return Outcome{RunID: id, Err: fmt.Errorf("create run folder: %w", err)}
			}
			id = fmt.Sprintf("%s-%d", base, i)
			dir = filepath.Join(opts.ResultsDir, id)
		}
	}
	o := Outcome{RunID: id, Dir: dir}
	if err := rundir.CheckRunID(id); err != nil {
		o.Err = err // it names folders and files on every node
		return o
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir, o.Dir = abs, abs
	}
	secret, err := engine.NewClusterSecret()
	if err != nil {
		o.Err = err
		return o
	}
	r := &run{opts: opts, pb: pb, timeline: timeline, id: id, dir: dir, changed: make(chan struct{}),
		routed: len(linkers(pb)) > 0 || !pb.Placement.IsZero(), secret: secret}
	logf, err := os.Create(filepath.Join(dir, rundir.ControllerLogFile))
	if err != nil {
		o.Err = err
		return o
	}
	defer logf.Close()
	r.log = slog.New(slog.NewJSONHandler(logf, nil)).With("run", id)
	pbJSON, err := json.Marshal(pb)
	if err != nil {
		o.Err = fmt.Errorf("encode playbook for the manifest: %w", err)
		return o
	}
	r.man = &rundir.Manifest{
		RunID: id, Status: rundir.StatusRunning, Started: time.Now().UTC(), Target: opts.Target.Name(),
		Round: pr.Round, Settings: pr.Settings, Playbook: pbJSON, ConfigHash: rundir.Hash(pb),
		Rig: rundir.Build(), CPUs: runtime.NumCPU(), LeaseTTLS: opts.LeaseTTL.Seconds(), Command: opts.Command,
	}
	r.man.Engine = engineBuild(pb, opts, r.man.Rig)
	if res, err := pb.Engine.Resolved(); err == nil {
		r.man.Resolved = &res
	}
	r.man.LoadAvg.Start = loadavg.Now()
	if r.ev, err = rundir.CreateEventLog(filepath.Join(dir, rundir.EventsFile)); err != nil {
		o.Err = err
		return o
	}
	defer r.ev.Close()
	r.saveManifest()
	r.reserveRecordSpace() // finish.go
	r.progress("run %s: %s (%d servers, %d client) -> %s", id, pb.Name, pb.Cluster.Servers, pb.Cluster.Clients, dir)

	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	r.abort = cancel
	cleanup, err := r.execute(ctx)
	// Cleanup runs on its own context: an interrupted run must still stop what it started and
	// keep what it collected.
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	// Decided once: an interrupt that comes while the report is written does not turn a run
	// recorded ok into an interrupted one (it ends one way, as its manifest says).
	interrupted := parent.Err() != nil
	err = r.finish(cctx, cleanup, err, interrupted)
	o.Status, o.Err = r.man.Status, err
	if interrupted {
		o.Err = ErrInterrupted
		if err != nil && !errors.Is(err, context.Canceled) {
			o.Err = fmt.Errorf("%w: %v", ErrInterrupted, err)
		}
	}
	return o
}

func (r *run) saveManifest() {
	r.manMu.Lock()
	defer r.manMu.Unlock()
	if err := rundir.WriteManifest(r.dir, r.man); err != nil {
		r.log.Error("write manifest", "err", err)
		if r.manErr == nil {
			r.manErr = err // finish returns it: the run's record is not what it says
		}
	}
}

func (r *run) mark(name string) { r.markAt(name, time.Now()) }

func (r *run) markAt(name string, t time.Time) {
	if err := r.ev.Add(rundir.Event{T: t, Run: &rundir.Run{Phase: rundir.RunPhase(name)}}); err != nil {
		r.log.Error("record stage", "stage", name, "err", err) // kept by the log: finish fails the run
	}
	r.updateManifest(func(m *rundir.Manifest) {
		m.Phases = append(m.Phases, rundir.PhaseMark{Name: name, T: t.UTC(), LoadAvg: loadavg.Now()})
	})
}

func (r *run) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.manMu.Lock()
	r.man.Warnings = append(r.man.Warnings, msg)
	r.manMu.Unlock()
	r.saveManifest()
	if err := r.ev.Add(rundir.Event{Note: &rundir.Note{Warning: msg}}); err != nil {
		r.log.Error("record warning", "err", err) // kept by the log: finish fails the run
	}
	r.progress("warning: %s", msg)
}

func safeName(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			return c
		}
		return '-'
	}, s)
}
