package analysis

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// ErrNotRunDir classifies a path that is not a readable run folder.
var ErrNotRunDir = errors.New("not a run folder")

// snapshotMargin widens a snapshot's window on both sides: the pause a client sees starts with
// the request and ends after the last node finished, both only known to polling precision.
const snapshotMargin = time.Second

// Analyze reads a run folder (events.jsonl, loadgen/probes.bin, <node>/status.json,
// manifest.json) and computes its Summary. It is tolerant: a missing or damaged input yields
// fewer figures and a warning in the Summary, not an error. Only a runDir that cannot be read
// as a folder is an error (ErrNotRunDir).
func Analyze(runDir string) (*Summary, error) {
	d, err := loadRun(runDir)
	if err != nil {
		return nil, err
	}
	return d.summarize(), nil
}

// runData is a run folder's inputs, with the run's reference times resolved. All times are unix
// nanoseconds.
type runData struct {
	ends     []int64 // actionEnds, once computed
	dir      string
	run      rundir.Folder // dir, every file of it reached inside it
	man      rundir.Manifest
	hasMan   bool
	pb       playbooks.Playbook // the resolved playbook from the manifest
	hasPB    bool
	events   []rundir.Event  // sorted by T
	catalog  actions.Catalog // the kinds' events (actions.Events), read on first use
	probes   []rundir.Probe  // sorted by IntendedNs, warm-up included
	hasProbe bool

	firstPost   int   // index of the first probe sent at or after warmupEnd
	loadStarted bool  // the run got as far as load_start
	origin      int64 // load_start: every offset is from here
	warmupEnd   int64
	loadEnd     int64 // end of load: a lost probe counts as waiting at least until here
	runEnd      int64 // end of the run: a phase still open at the end lasts until here

	statuses map[string]*engine.Status // server node -> final status (nil: missing or unreadable)
	nodes    []string                  // server nodes, sorted

	snapWins   []span                         // closed snapshot windows, filled by summarize
	snapTakes  []snapTake                     // each node's report of each snapshot (forces.go)
	states     map[string][]stateChange       // per node, built on first use
	engineLogs map[string][]stampedLine       // per node, built on first use (telemetry.go)
	inside     map[string][]rundir.InsideSpan // per node, read on first use (windows.go)
	syncs      map[string][]rundir.DiskSync   // per node, read on first use (windows.go)
	// onOpen, when set, hears each file opened through open: tests count the reads of a source.
	onOpen   func(name string)
	warnings []string
	warned   map[string]bool // what warnOutside said, once each
}

// span is a time interval in unix nanoseconds.
type span struct{ from, to int64 }

func loadRun(dir string) (*runData, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotRunDir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is a file", ErrNotRunDir, dir)
	}
	d := &runData{dir: dir, run: rundir.Folder{Dir: dir}, statuses: map[string]*engine.Status{}}
	d.readManifest()
	d.readEvents()
	d.readProbes()
	d.resolveTimes()
	d.readStatuses()
	return d, nil
}

func (d *runData) warnf(format string, args ...any) {
	d.warnings = append(d.warnings, fmt.Sprintf(format, args...))
}

// warnOutside warns, once per file, of each run-folder name in err that leads outside the run
// folder (rundir.ErrOutside): the file was refused, not read, and the report says which.
func (d *runData) warnOutside(err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if !errors.Is(e, rundir.ErrOutside) || d.warned[e.Error()] {
			continue
		}
		if d.warned == nil {
			d.warned = map[string]bool{}
		}
		d.warned[e.Error()] = true
		d.warnf("%v", e)
	}
}

// open opens a run folder's file (rundir.Folder.Open), telling onOpen.
func (d *runData) open(name, what string) (*os.File, error) {
	if d.onOpen != nil {
		d.onOpen(name)
	}
	return d.run.Open(name, what)
}

// glob is the run folder's names matching pattern (rundir.Folder.Glob), sorted.
func (d *runData) glob(pattern string) []string {
	names, err := d.run.Glob(pattern)
	if err != nil {
		d.warnOutside(err)
	}
	return names
}

// samples reads one OS samples file: what decodes counts, a damaged file is not a finding, but
// one leading outside the run folder is named.
func (d *runData) samples(name string) []rundir.Sample {
	ss, err := d.run.Samples(name)
	if err != nil {
		d.warnOutside(err)
	}
	return ss
}

func (d *runData) readManifest() {
	m, err := rundir.ReadManifest(d.dir)
	if err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			d.warnf("no manifest.json: status unknown, load average not checked")
			return
		case m == nil:
			d.warnf("read manifest.json: %v", err)
			return
		case !errors.As(err, &te):
			d.warnf("manifest.json is not valid JSON (%v): status unknown, load average not checked", err)
			return
		}
		// A field of an unexpected type leaves that field empty; the rest still decodes.
		d.warnf("manifest.json: field %s has an unexpected type (%s): ignored", te.Field, te.Value)
	}
	d.man, d.hasMan = *m, true
	if len(m.Playbook) > 0 && string(m.Playbook) != "null" {
		if err := json.Unmarshal(m.Playbook, &d.pb); err != nil {
			d.warnf("manifest.json: playbook: %v: run settings from it left out", err)
			return
		}
		d.hasPB = true
	}
}

// readEvents reads events.jsonl, skipping (and reporting) lines it cannot decode: the tail of
// an interrupted run may be torn, and everything before it is still good.
func (d *runData) readEvents() {
	evs, bad, err := d.run.Events(actions.Reader())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.warnf("no events.jsonl: no timeline, snapshots or restarts")
		return
	case errors.Is(err, rundir.ErrOutside):
		d.warnOutside(err)
	case err != nil:
		d.warnf("read events.jsonl: %v", err)
	}
	if len(bad) > 0 {
		first := bad[0].Error()
		if i := strings.Index(first, rundir.EventsFile+":"); i >= 0 { // name the file, not the folder it was in
			first = first[i:]
		}
		d.warnf("skipped %d unreadable event line(s), first %s", len(bad), first)
	}
	// Node events carry the node's clock corrected by the measured offset, so they may arrive
	// out of order.
	slices.SortStableFunc(evs, func(a, b rundir.Event) int { return a.T.Compare(b.T) })
	d.events = evs
}

// readProbes reads loadgen/probes.bin up to the count the run declared (declaredProbes), and
// refuses a file holding more: its size is no measure of what the run wrote.
func (d *runData) readProbes() {
	decl, derr := d.declaredProbes()
	var ps []rundir.Probe
	err := derr
	if err == nil {
		ps, err = d.run.Probes(decl)
	}
	if err != nil {
		if _, serr := d.run.Stat(rundir.ProbesPath); errors.Is(serr, fs.ErrNotExist) {
			d.warnf("no loadgen/probes.bin: no client latency figures")
		} else {
			d.warnf("read probes: %v", err)
		}
		return
	}
	// The load generator records a probe when it completes, not when it was due: nearly sorted.
	byIntended := func(a, b rundir.Probe) int { return cmp.Compare(a.IntendedNs, b.IntendedNs) }
	if !slices.IsSortedFunc(ps, byIntended) {
		slices.SortFunc(ps, byIntended)
	}
	d.probes, d.hasProbe = ps, true
}

// declaredProbes is how many probes the load generator wrote: what its stats.json says, else (a
// load generator killed before it wrote one) every probe the playbook's schedule holds, which
// is how the runner configured it (probe_rate for duration).
func (d *runData) declaredProbes() (rundir.Declared, error) {
	decl, err := d.run.DeclaredProbes()
	if err == nil {
		return decl, nil
	}
	if !d.hasPB || d.pb.Load.ProbeRate <= 0 || d.pb.Duration <= 0 {
		return rundir.Declared{}, fmt.Errorf("%s not read: no readable %s/%s (%v) and no probe schedule in manifest.json's playbook to say how many probes it may hold",
			rundir.ProbesPath, rundir.LoadgenDir, rundir.StatsFile, err)
	}
	n := math.Ceil(d.pb.Duration.Seconds() * d.pb.Load.ProbeRate)
	return rundir.Declared{N: int64(min(n, math.MaxInt64/2)),
		Source: fmt.Sprintf("manifest.json's playbook (%g probes/s for %s; no readable %s/%s)", d.pb.Load.ProbeRate, d.pb.Duration, rundir.LoadgenDir, rundir.StatsFile)}, nil
}

// runMark returns the time of the first run event with that phase.
func (d *runData) runMark(phase rundir.RunPhase) (int64, bool) {
	for _, e := range d.events {
		if e.IsRun(phase) {
			return e.T.UnixNano(), true
		}
	}
	return 0, false
}

func (d *runData) resolveTimes() {
	var last int64
	if n := len(d.events); n > 0 {
		last = d.events[n-1].T.UnixNano()
	}
	for _, p := range d.probes {
		end := p.IntendedNs
		if p.Outcome == rundir.ProbeOK {
			end += p.LatencyNs
		}
		last = max(last, end)
	}

	var ok bool
	if d.origin, d.loadStarted = d.runMark(rundir.LoadStart); !d.loadStarted {
		switch {
		case len(d.probes) > 0:
			d.origin = d.probes[0].IntendedNs
			d.warnf("no load_start event: times are offsets from the first probe")
		case len(d.events) > 0:
			d.origin = d.events[0].T.UnixNano()
			d.warnf("no load_start event: times are offsets from the first event")
		}
	}
	if d.warmupEnd, ok = d.runMark(rundir.WarmupEnd); !ok {
		d.warmupEnd = d.origin
		if len(d.probes) > 0 {
			d.warnf("no warmup_end event: no probe excluded as warm-up")
		}
	}
	if d.loadEnd, ok = d.runMark(rundir.LoadEnd); !ok {
		if d.loadEnd, ok = d.runMark(rundir.RunEnd); !ok {
			d.loadEnd = last
		}
	}
	if d.runEnd, ok = d.runMark(rundir.RunEnd); !ok {
		d.runEnd = last
	}
	d.runEnd = max(d.runEnd, d.loadEnd)
	d.firstPost = sort.Search(len(d.probes), func(i int) bool { return d.probes[i].IntendedNs >= d.warmupEnd })
}

// readStatuses finds the server nodes: folders holding a status.json, plus every node the
// events name (a node whose status.json is missing is still a server whose end state is unknown).
func (d *runData) readStatuses() {
	entries, err := d.run.ReadDir(".")
	if err != nil {
		d.warnf("list run folder: %v", err)
	}
	for _, de := range entries {
		if !de.IsDir() {
			continue
		}
		b, err := d.run.ReadFile(de.Name()+"/"+rundir.StatusFile, rundir.StatusFile, rundir.MaxJSONBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			d.warnf("%s/%s: %v", de.Name(), rundir.StatusFile, err)
			d.statuses[de.Name()] = nil
			continue
		}
		var st engine.Status
		if err := json.Unmarshal(b, &st); err != nil {
			d.warnf("%s: not an engine status (%v)", filepath.Join(de.Name(), rundir.StatusFile), err)
			d.statuses[de.Name()] = nil
			continue
		}
		d.statuses[de.Name()] = &st
	}
	for _, e := range d.events {
		switch {
		case e.Node == "":
		case e.Phase != nil, e.Role != nil, e.Snapshot != nil, d.kinds().NodePhase(e.Action) != "":
			if _, ok := d.statuses[e.Node]; !ok {
				d.statuses[e.Node] = nil
			}
		}
	}
	for n := range d.statuses {
		d.nodes = append(d.nodes, n)
	}
	slices.Sort(d.nodes)
}

// kinds is the catalog of the kinds' events: what the analysis asks of an event's kind.
func (d *runData) kinds() actions.Catalog {
	if d.catalog == nil {
		d.catalog = actions.Events()
	}
	return d.catalog
}

// off is t as seconds from load_start, rounded to the microsecond.
func (d *runData) off(t int64) float64 {
	return math.Round(float64(t-d.origin)/1e3) / 1e6
}

func nsToUs(ns int64) float64 { return float64(ns) / 1e3 }
func nsToMs(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }
func valPtr[T any](v T) *T    { return &v }

// actions returns the action events of one kind, in time order.
func (d *runData) actions(is func(actions.Catalog, rundir.Event) bool) []rundir.Event {
	var out []rundir.Event
	for _, e := range d.events {
		if e.Action != nil && is(d.kinds(), e) {
			out = append(out, e)
		}
	}
	return out
}

// What the analysis asks of an action event, as its kind declares it (actions.EventKind).
func asksSnapshot(c actions.Catalog, e rundir.Event) bool { _, _, ok := c.Snapshot(e); return ok }
func downs(c actions.Catalog, e rundir.Event) bool        { _, _, ok := c.Down(e); return ok }
func collects(c actions.Catalog, e rundir.Event) bool     { _, ok := c.Collected(e); return ok }
func stepsDown(c actions.Catalog, e rundir.Event) bool {
	return c.Makes(e.Action.Name, actions.ShapeStepDown)
}

// probeRange returns the index range of post-warm-up probes with intended time in [from, to).
func (d *runData) probeRange(from, to int64) (int, int) {
	lo := sort.Search(len(d.probes), func(i int) bool { return d.probes[i].IntendedNs >= from })
	hi := sort.Search(len(d.probes), func(i int) bool { return d.probes[i].IntendedNs >= to })
	lo = max(lo, d.firstPost)
	return lo, max(lo, hi)
}

// windowStats is Stats over post-warm-up probes with intended time in [from, to), leaving out
// those inside any of skip (closed spans).
func (d *runData) windowStats(from, to int64, skip []span) Stats {
	lo, hi := d.probeRange(from, to)
	lat := make([]int64, 0, hi-lo)
	lost := 0
	for _, p := range d.probes[lo:hi] {
		if inAny(p.IntendedNs, skip) {
			continue
		}
		if p.Outcome != rundir.ProbeOK {
			lost++
			continue
		}
		lat = append(lat, p.LatencyNs)
	}
	return statsOf(lat, lost)
}

// Drain after an event: the queue that built up during it takes a while to empty, and latency in
// that stretch is the event's, not the steady state's.
const (
	drainBaseline = 5 * time.Second  // the pre-event median is taken over this long before it
	drainMax      = 10 * time.Second // the settle time: the drain is never taken as longer
)

// withDrain extends each span past its end until latency is back at its pre-event median: up to
// the first answered probe after the span no slower than the median of the answered probes in
// the drainBaseline before the span, and never more than drainMax.
func (d *runData) withDrain(spans []span) []span {
	out := make([]span, len(spans))
	for i, sw := range spans {
		out[i] = sw
		lo, hi := d.probeRange(sw.from-int64(drainBaseline), sw.from)
		var pre []int64
		for _, p := range d.probes[lo:hi] {
			if p.Outcome == rundir.ProbeOK {
				pre = append(pre, p.LatencyNs)
			}
		}
		if len(pre) == 0 {
			continue
		}
		slices.Sort(pre)
		median := percentileNs(pre, 50, 100)
		end := sw.to + int64(drainMax)
		lo, hi = d.probeRange(sw.to+1, end)
		for j, p := range d.probes[lo:hi] {
			if p.Outcome == rundir.ProbeOK && p.LatencyNs <= median {
				end = p.IntendedNs - 1
				if j == 0 { // back to normal at once: no drain
					end = sw.to
				}
				break
			}
		}
		out[i].to = max(sw.to, end)
	}
	return out
}

func inAny(t int64, spans []span) bool {
	for _, s := range spans {
		if t >= s.from && t <= s.to {
			return true
		}
	}
	return false
}

// Thresholds below which a percentile is not shown (docs/architecture.md, "Measurement rules").
const (
	minNForP90  = 10
	minNForP99  = 100
	minNForP999 = 1000
)

// statsOf sorts lat in place and summarises it.
func statsOf(lat []int64, lost int) Stats {
	s := Stats{N: len(lat), Lost: lost}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	s.P50Us = valPtr(nsToUs(percentileNs(lat, 50, 100)))
	if len(lat) >= minNForP90 {
		s.P90Us = valPtr(nsToUs(percentileNs(lat, 90, 100)))
	}
	if len(lat) >= minNForP99 {
		s.P99Us = valPtr(nsToUs(percentileNs(lat, 99, 100)))
	}
	if len(lat) >= minNForP999 {
		s.P999Us = valPtr(nsToUs(percentileNs(lat, 999, 1000)))
	}
	s.MaxUs = valPtr(nsToUs(lat[len(lat)-1]))
	return s
}

// percentileNs is the nearest-rank percentile num/den of sorted: the smallest value with at
// least num/den of the values at or below it. Integer arithmetic, so 99.9 % of 1000 is rank 999
// and not 1000 by a rounding error.
func percentileNs(sorted []int64, num, den int) int64 {
	n := len(sorted)
	rank := (n*num + den - 1) / den
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

func (d *runData) summarize() *Summary {
	s := &Summary{
		RunID:                  d.man.RunID,
		Playbook:               d.pb.Name,
		Status:                 d.man.Status,
		Error:                  d.man.Error,
		Nodes:                  map[string]NodeFinal{},
		Snapshots:              []SnapshotRow{},
		Restarts:               []RestartRow{},
		StepDowns:              []StepDownRow{},
		Bursts:                 []BurstRow{},
		LeaderChanges:          []LeaderMark{},
		UnplannedLeaderChanges: []LeaderMark{},
		Actions:                []ActionMark{},
		Stages:                 d.man.Stages,
		OverheadS:              d.man.OverheadS,
		Book:                   d.man.Book,
		data:                   d,
	}
	if s.RunID == "" {
		s.RunID = filepath.Base(filepath.Clean(d.dir))
	}
	if s.Status == "" {
		s.Status = "unknown"
	}
	if s.Status == rundir.StatusRunning {
		if gone, heard, err := rundir.Abandoned(d.dir, time.Now()); err == nil && gone {
			s.Status, s.ControllerLastHeard = rundir.StatusAbandoned, &heard
		}
	}
	s.Settings = d.settings()
	s.Traps = d.traps()
	s.AgentCPU = d.man.AgentCPU
	s.DiskModels, s.DiskChecks, s.LinkRTTs, s.LinkRTTsLoad = d.man.DiskModels, d.man.DiskChecks, d.man.LinkRTTs, d.man.LinkRTTsLoad
	s.Placement = d.placement()
	s.WarmupProbes = d.firstPost
	s.Probes = d.windowStats(d.warmupEnd, math.MaxInt64, nil)

	var warn []string
	warn = append(warn, d.nodeFinals(s)...)
	warn = append(warn, d.snapshotRows(s)...)
	var fw []string
	s.Forces, fw = d.forces()
	warn = append(warn, fw...)
	warn = append(warn, d.restartRows(s)...)
	warn = append(warn, d.stepDownRows(s)...)
	d.burstRows(s)
	d.kindRows(s)
	var dw []string
	s.Durability, dw = d.durability(s)
	warn = append(warn, dw...)
	d.udpIngress(s)
	d.notApplied(s)
	warn = append(warn, d.sampleFigures(s)...)
	// Leadership (who led, what changed it, the actions, the window a cause explains a change
	// in) comes from the events and the manifest alone: the figures below read it, not each other.
	lead := d.leadership()
	s.LeaderAtLoadStart, s.LeaderChanges, s.Actions, s.LeaderWindow = lead.AtLoadStart, lead.Changes, lead.Actions, lead.Window
	st := d.spanStream()
	s.GCPauses = st.gcRows
	s.Spike = d.spike(s, st.gc)
	s.HostPressure = st.pressure
	s.CauseSourcesOff = d.pb.CauseSourcesOff()
	s.Excursions = d.excursions(s, st)
	s.Failovers = d.failoverRows(lead)
	s.HandOffs = d.handOffs(s)
	// Normal latency leaves out every snapshot and fault window (failover.go), so it needs the
	// rows above; the rows that quote it beside their own figures get it now.
	var skip []span
	s.NormalLeftOut, skip = d.faultWindows(s)
	s.Normal = d.windowStats(d.warmupEnd, math.MaxInt64, skip)
	for i := range s.Snapshots {
		s.Snapshots[i].NormalP50Us = s.Normal.P50Us
	}
	for i := range s.StepDowns {
		s.StepDowns[i].NormalP50Us = s.Normal.P50Us
	}
	s.Windows = d.windows(s, st)
	// Flags every row built above whose window holds an unplanned change.
	warn = append(warn, flagUnplanned(s, lead)...)
	s.ClientConn = d.clientConn(s)
	warn = append(warn, applyHealth(s)...)
	if s.ControllerLastHeard != nil {
		warn = append(warn, fmt.Sprintf("abandoned: the controller was last heard from at %s and is gone; the manifest still says running, and each agent undid the run itself when its lease lapsed (<node>/lease.jsonl)",
			s.ControllerLastHeard.UTC().Format(time.RFC3339)))
	}
	s.Warnings = append(append(append([]string{}, d.warnings...), d.trapWarnings()...), warn...)
	s.RowPooled = poolRows(s)
	return s
}

// resolved is the run's engine settings as its plan resolved them (rundir.Manifest.Resolved).
// A run folder written before the manifest kept them has only its playbook's values asked, typed
// by the contract's table: the one legacy path.
func (d *runData) resolved() driver.Resolved {
	if r := d.man.Resolved; r != nil {
		return *r
	}
	if !d.hasPB {
		return driver.Resolved{Table: driver.Contract}
	}
	return driver.Resolved{Driver: d.pb.Engine.DriverName(), Table: driver.Contract, Asked: d.pb.Engine.Settings()}
}

func (d *runData) settings() Settings {
	st := Settings{
		CPUs:         d.man.CPUs,
		LoadAvgStart: d.man.LoadAvg.Start,
		LoadAvgEnd:   d.man.LoadAvg.End,
		ServerNodes:  len(d.nodes),
		LoadS:        max(d.off(d.loadEnd), 0),
		WarmupS:      d.off(d.warmupEnd),
	}
	res := d.resolved()
	inEffect := func(name string) (int64, bool) {
		s, ok := res.InEffect(name, d.man.Engines)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(s.Value, 10, 64)
		return n, err == nil
	}
	if v, ok := inEffect(driver.SyncLevel); ok {
		st.SyncLevel = ptr(int(v))
	}
	if v, ok := inEffect(driver.SnapshotBlock); ok {
		st.SnapshotBlock = &v
	}
	if v, ok := inEffect(driver.EncodeThreads); ok {
		st.EncodeThreads = ptr(int(v))
	}
	for _, name := range slices.Sorted(maps.Keys(res.Asked)) {
		if s, _ := res.InEffect(name, d.man.Engines); s.Differs() {
			set, _ := res.Table.Lookup(name)
			set.Name = name
			st.NotAsAsked = append(st.NotAsAsked, fmt.Sprintf("%s %s in effect, %s asked", name, s.Value, set.Show(s.Asked)))
		}
	}
	if pb := d.pb; d.hasPB {
		st.PreloadOrders, st.PlannedProbeRate = &pb.Preload.Orders, &pb.Load.ProbeRate
	}
	if !d.loadStarted {
		st.LoadS = 0
	}
	if d.hasPB && d.pb.Duration > 0 {
		st.PlannedDurationS = valPtr(float64(d.pb.Duration) / 1e9)
	}
	if st.LoadS > 0 && len(d.probes) > 0 {
		lo, hi := sort.Search(len(d.probes), func(i int) bool { return d.probes[i].IntendedNs >= d.origin }),
			sort.Search(len(d.probes), func(i int) bool { return d.probes[i].IntendedNs >= d.loadEnd })
		st.ProbeRate = math.Round(float64(hi-lo)/st.LoadS*10) / 10
	}
	return st
}

// trapWarnings flags the measurement traps of docs/architecture.md ("Measurement rules") that the
// run folder can show, and copies the runner's own warning notes.
func (d *runData) trapWarnings() []string {
	var w []string
	switch d.man.Status {
	case "ok", "":
	case "failed", "interrupted":
		w = append(w, fmt.Sprintf("run %s: figures cover only what was collected before it stopped", d.man.Status))
	default:
		w = append(w, fmt.Sprintf("manifest status is %q, not ok|failed|interrupted: the run may not have finished", d.man.Status))
	}
	if d.hasMan {
		cpus := d.man.CPUs
		for _, la := range []struct {
			when string
			v    []float64
		}{{"start", d.man.LoadAvg.Start}, {"end", d.man.LoadAvg.End}} {
			switch {
			case cpus <= 0:
			case len(la.v) == 0:
				w = append(w, fmt.Sprintf("no load average recorded at %s: contention not checked", la.when))
			case la.v[0] > float64(cpus):
				w = append(w, fmt.Sprintf("load average %.2f at %s exceeds %d CPUs: treat every timing as an upper bound", la.v[0], la.when, cpus))
			}
		}
		if cpus <= 0 {
			w = append(w, "manifest has no CPU count: load average not checked")
		}
	}
	for _, e := range d.events {
		if e.Note == nil || e.Note.Warning == "" {
			continue
		}
		where := fmt.Sprintf("at %.1f s", d.off(e.T.UnixNano()))
		if e.Node != "" {
			where += " on " + e.Node
		}
		w = append(w, fmt.Sprintf("%s (%s)", e.Note.Warning, where))
	}
	return w
}

func (d *runData) nodeFinals(s *Summary) []string {
	var warn []string
	for _, n := range d.nodes {
		st := d.statuses[n]
		if st == nil {
			s.Nodes[n] = NodeFinal{StatusMissing: true}
			warn = append(warn, fmt.Sprintf("%s: no readable status.json: its final state is unknown", n))
			continue
		}
		f := NodeFinal{StateHash: st.StateHash, Phase: st.Phase, Role: st.Role, AppliedIndex: st.AppliedIndex}
		if st.Supports(engine.UnsupportedOrders) {
			f.Orders = ptr(st.Orders)
		}
		if st.StateHash != "" {
			f.StateHashAt, f.StateHashOfSnapshot = st.StateHashPosition(), st.StateHashOfSnapshot()
		}
		s.Nodes[n] = f
	}
	s.StateHashes = agreement(d.nodes, s.Nodes)
	s.StateHashAgree = s.StateHashes.Result == AgreementAgree
	if s.StateHashes.Result == AgreementDiffer {
		warn = append(warn, "final state hashes differ: "+s.StateHashes.Reason)
	}
	return warn
}

// agreement compares the nodes' hashes only where two are of one log position. They differ when
// two such hashes differ; they agree when every node has one, all of one position and equal;
// otherwise they are not checked, and the reason says what is missing.
func agreement(nodes []string, finals map[string]NodeFinal) Agreement {
	at := map[uint64][]string{} // position -> nodes with a hash of it
	var positions []uint64
	var unknown, unhashed []string
	ofSnapshot := false
	for _, n := range nodes {
		f := finals[n]
		switch {
		case f.StatusMissing:
			unknown = append(unknown, n)
		case f.StateHash == "":
			unhashed = append(unhashed, n)
		default:
			if at[f.StateHashAt] == nil {
				positions = append(positions, f.StateHashAt)
			}
			at[f.StateHashAt] = append(at[f.StateHashAt], n)
			ofSnapshot = ofSnapshot || f.StateHashOfSnapshot
		}
	}
	slices.Sort(positions)
	for _, p := range positions {
		hashes := map[string]bool{}
		var parts []string
		snap := false
		for _, n := range at[p] {
			hashes[finals[n].StateHash] = true
			parts = append(parts, n+" "+finals[n].StateHash)
			snap = snap || finals[n].StateHashOfSnapshot
		}
		if len(hashes) > 1 {
			r := fmt.Sprintf("%s at log position %d", strings.Join(parts, ", "), p)
			if snap {
				r += ": " + engine.SnapshotHashNote
			}
			return Agreement{Result: AgreementDiffer, Position: p, OfSnapshot: snap, Reason: r}
		}
	}
	var why []string
	switch {
	case len(nodes) == 0:
		why = append(why, "no server node")
	case len(positions) == 0:
		why = append(why, "no node reported a state hash (an engine that hashes its snapshots has none before its first)")
	}
	if len(unknown) > 0 {
		why = append(why, "no status.json from "+strings.Join(unknown, ", "))
	}
	if len(unhashed) > 0 && len(positions) > 0 {
		why = append(why, "no state hash from "+strings.Join(unhashed, ", "))
	}
	if len(positions) > 1 {
		var parts []string
		for _, p := range positions {
			parts = append(parts, fmt.Sprintf("%s at %d", strings.Join(at[p], ", "), p))
		}
		why = append(why, "hashes of different log positions ("+strings.Join(parts, "; ")+")")
	}
	if len(why) > 0 {
		return Agreement{Result: AgreementNotChecked, OfSnapshot: ofSnapshot, Reason: strings.Join(why, "; ")}
	}
	return Agreement{Result: AgreementAgree, Position: positions[0], OfSnapshot: ofSnapshot}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// snapshotRows builds one row per snapshot action and records the snapshot windows. The
// action carries the log index the leader answered with; every node's take of that index is
// matched to it.
func (d *runData) snapshotRows(s *Summary) []string {
	var warn []string
	acts := d.actions(asksSnapshot)
	relaunches := d.actions(actions.Catalog.Relaunch)
	// relaunchedBetween: a node relaunched after the action reports the snapshot it restored,
	// not one it took.
	relaunchedBetween := func(node string, from, to int64) bool {
		for _, r := range relaunches {
			if t := r.T.UnixNano(); r.Node == node && t > from && t <= to {
				return true
			}
		}
		return false
	}
	for i, a := range acts {
		at := a.T.UnixNano()
		next := int64(math.MaxInt64)
		if i+1 < len(acts) {
			next = acts[i+1].T.UnixNano()
		}
		leader, index, _ := d.kinds().Snapshot(a)
		row := SnapshotRow{AtS: d.off(at), Leader: leader, TakeMs: map[string]float64{}}
		var finish int64
		if index != nil {
			idx := *index
			row.Index = valPtr(int64(idx))
			for _, e := range d.events {
				t := e.T.UnixNano()
				if e.Snapshot == nil || e.Snapshot.Restored || e.Snapshot.Index != idx || t >= next || relaunchedBetween(e.Node, at, t) {
					continue
				}
				if _, seen := row.TakeMs[e.Node]; seen {
					continue
				}
				row.TakeMs[e.Node] = e.Snapshot.TakeMs
				if row.PersistedMs == nil {
					row.PersistedMs = map[string]float64{}
				}
				row.PersistedMs[e.Node] = e.Snapshot.PersistedMs
				d.snapTakes = append(d.snapTakes, snapTake{row: len(s.Snapshots), node: e.Node, from: at, to: t, takeMs: e.Snapshot.TakeMs, persistedMs: e.Snapshot.PersistedMs, engine: e.Snapshot.EngineWrites})
				row.Bytes = max(row.Bytes, e.Snapshot.Bytes)
				// A node that was down or catching up at the action takes the snapshot when its
				// replay reaches the marker: a real take, but not part of the pause clients saw.
				if d.stateAt(e.Node, at) == engine.PhaseReady {
					finish = max(finish, t)
				}
			}
		}
		w := span{from: at - int64(snapshotMargin)}
		if finish > 0 {
			row.FinishedS = valPtr(d.off(finish))
			w.to = finish + int64(snapshotMargin)
		} else {
			w.to = min(next, d.loadEnd)
			warn = append(warn, fmt.Sprintf("snapshot at %.1f s: no node that was ready at the action reported finishing it; its window runs to %.1f s", d.off(at), d.off(w.to)))
		}
		row.WindowFromS, row.WindowToS = d.off(w.from), d.off(w.to)
		d.snapWins = append(d.snapWins, w)
		// The pause counts only probes sent at or after the trigger: one sent before it was
		// held up by something else (a restarted node's catch-up, say), not by the snapshot.
		d.pause(&row, span{from: at, to: w.to})
		s.Snapshots = append(s.Snapshots, row)
	}
	return warn
}

// pause finds the worst probe latency in the closed window w.
func (d *runData) pause(row *SnapshotRow, w span) {
	row.PauseFromS, row.PauseToS = d.off(w.from), d.off(w.to)
	lo, hi := d.probeRange(w.from, w.to+1)
	var worst, worstAt int64 = -1, 0
	worstLost := false
	for _, p := range d.probes[lo:hi] {
		row.WindowProbes++
		lat, lost := p.LatencyNs, p.Outcome != rundir.ProbeOK
		if lost {
			row.WindowLost++
			lat = max(lat, d.loadEnd-p.IntendedNs)
		}
		if lat > worst {
			worst, worstAt, worstLost = lat, p.IntendedNs, lost
		}
	}
	if worst >= 0 {
		row.ClientPauseMs = valPtr(nsToMs(worst))
		row.PauseAtS = valPtr(d.off(worstAt))
		row.PauseLowerBound = worstLost
	}
}

// restartRows builds one row per action that puts its node down (a kill), ended by the next
// that relaunches it.
func (d *runData) restartRows(s *Summary) []string {
	kills := d.actions(downs)
	if len(kills) == 0 {
		return nil
	}
	var warn []string
	relaunches := d.actions(actions.Catalog.Relaunch)
	usedRelaunch := make([]bool, len(relaunches))

	firstKill := kills[0].T.UnixNano()
	allUp := d.window(d.warmupEnd, max(firstKill, d.warmupEnd), false, true)

	for i, k := range kills {
		kt := k.T.UnixNano()
		node := k.Node
		nextKill := int64(math.MaxInt64) // the node's next kill bounds everything about this one
		for _, k2 := range kills[i+1:] {
			if k2.Node == node {
				nextKill = k2.T.UnixNano()
				break
			}
		}
		_, signal, _ := d.kinds().Down(k)
		row := RestartRow{Node: node, Signal: signal, KillS: d.off(kt), PhasesMs: map[string]float64{}}
		row.Windows.AllUp = allUp
		var rl int64 = -1
		for j, r := range relaunches {
			if t := r.T.UnixNano(); !usedRelaunch[j] && r.Node == node && t >= kt && t < nextKill {
				usedRelaunch[j], rl = true, t
				break
			}
		}
		if rl < 0 {
			row.Windows.OneDown = d.window(kt, min(nextKill, d.loadEnd), true, false)
			s.Restarts = append(s.Restarts, row)
			continue
		}
		row.RelaunchS = valPtr(d.off(rl))
		row.Windows.OneDown = d.window(kt, rl, false, false)

		var ready int64 = -1
		for _, e := range d.events {
			if t := e.T.UnixNano(); e.Phase != nil && e.Node == node && e.Phase.To == engine.PhaseReady && t >= rl && t < nextKill {
				ready = t
				break
			}
		}
		end := ready
		if ready < 0 {
			end = min(nextKill, d.runEnd)
		}
		cur, entered := engine.PhaseStarting, rl
		for _, e := range d.events {
			t := e.T.UnixNano()
			if e.Phase == nil || e.Node != node || !knownPhase(e.Phase.To) || t < rl || t >= end {
				continue
			}
			if e.Phase.To == cur {
				continue
			}
			row.PhasesMs[cur] += nsToMs(t - entered)
			cur, entered = e.Phase.To, t
		}
		row.PhasesMs[cur] += nsToMs(end - entered)
		if ready >= 0 {
			row.ReadyS = valPtr(d.off(ready))
			row.LaunchToReadyMs = valPtr(nsToMs(ready - rl))
			rj := d.window(rl, ready, false, false)
			row.Windows.Rejoining = &rj
		} else {
			row.OpenPhase = cur
			rj := d.window(rl, min(nextKill, d.loadEnd), true, false)
			row.Windows.Rejoining = &rj
			warn = append(warn, fmt.Sprintf("%s relaunched at %.1f s never reached ready (still %s at %.1f s)", node, d.off(rl), cur, d.off(end)))
		}
		s.Restarts = append(s.Restarts, row)
	}
	return warn
}

// window computes a restart window [from, to). An open window never closed (the node never
// became ready): it is cut at the node's next kill, or else runs to the end of load and takes
// every later probe. The all-up window leaves the snapshot
// windows out (excludeSnaps); the others keep them and say whether they overlap one.
func (d *runData) window(from, to int64, open, excludeSnaps bool) Window {
	w := Window{FromS: d.off(from), ToS: d.off(to), Open: open}
	limit := to
	if open && to >= d.loadEnd { // open to the end: every later probe, however late it was sent
		limit = math.MaxInt64
	}
	if excludeSnaps {
		skip := d.withDrain(d.snapWins)
		w.Stats = d.windowStats(from, limit, skip)
		var excluded, drain int64
		for i, sw := range skip {
			if lo, hi := max(sw.from, from), min(sw.to, to); hi > lo {
				excluded += hi - lo
			}
			if lo, hi := max(d.snapWins[i].to, from), min(sw.to, to); hi > lo {
				drain += hi - lo
			}
		}
		w.ExcludedS = math.Round(float64(excluded)/1e3) / 1e6
		w.DrainS = math.Round(float64(drain)/1e3) / 1e6
		return w
	}
	w.Stats = d.windowStats(from, limit, nil)
	for _, sw := range d.snapWins {
		if sw.from < limit && sw.to >= from {
			w.OverlapsSnapshot = true
		}
	}
	return w
}

// leaders records who led at load start and every leadership change after it.
func (d *runData) leadership() leadership {
	l := leadership{Changes: []LeaderMark{}, Actions: []ActionMark{}, Window: d.leaderWindow()}
	for _, e := range d.events {
		if e.Action != nil {
			l.Actions = append(l.Actions, ActionMark{AtS: d.off(e.T.UnixNano()), Action: string(e.Action.Name), Node: e.Node, Moves: e.Action.Moves})
		}
		if e.Role == nil || e.Role.To != engine.RoleLeader {
			continue
		}
		if t := e.T.UnixNano(); t < d.origin {
			l.AtLoadStart = e.Node
		} else {
			l.Changes = append(l.Changes, LeaderMark{AtS: d.off(t), Node: e.Node})
		}
	}
	return l
}

const phaseDown = rundir.PhaseDown

// knownPhase tells engine phases (and the agent's "down") from the other transitions the
// runner logs as phase events (process launch with an empty phase, signals by name).
func knownPhase(p string) bool {
	switch p {
	case engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseJoining, engine.PhaseReplaying, engine.PhaseCatchingUp, engine.PhaseReady, phaseDown:
		return true
	}
	return false
}

// stateChange is a node entering a phase: an engine phase seen by polling, or the phase an
// action's kind puts it in (actions.EventKind.NodePhase: down at a kill, starting at a relaunch).
type stateChange struct {
	t     int64
	phase string
}

// nodeStates lists every node's state changes in time order.
func (d *runData) nodeStates() map[string][]stateChange {
	per := map[string][]stateChange{}
	for _, e := range d.events {
		t := e.T.UnixNano()
		if e.Phase != nil && knownPhase(e.Phase.To) {
			per[e.Node] = append(per[e.Node], stateChange{t, e.Phase.To})
		} else if ph := d.kinds().NodePhase(e.Action); ph != "" {
			per[e.Node] = append(per[e.Node], stateChange{t, ph})
		}
	}
	return per
}

// stateAt is the node's state just before t; a node with no recorded change counts as ready.
func (d *runData) stateAt(node string, t int64) string {
	if d.states == nil {
		d.states = d.nodeStates()
	}
	st := engine.PhaseReady
	for _, c := range d.states[node] {
		if c.t >= t {
			break
		}
		st = c.phase
	}
	return st
}

func ptr[T any](v T) *T { return &v }

// placement is where the run's nodes were, or nil where nothing says (the local target without
// zones: every node side by side on loopback).
func (d *runData) placement() *Placement {
	var p Placement
	if inv := d.man.Inventory; inv != nil {
		p.Stack = inv.Placement
		for _, n := range inv.Nodes {
			if n.AvailabilityZone != "" {
				if p.AZ == nil {
					p.AZ = map[string]string{}
				}
				p.AZ[n.Name] = n.AvailabilityZone
			}
		}
	}
	if d.hasPB {
		p.Zones = d.pb.Placement
	}
	if p.Stack == "" && p.AZ == nil && p.Zones.IsZero() {
		return nil
	}
	return &p
}
