package runner

import (
	"sync"
	"time"

	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/rundir"
)

// history is the stage-time history of the results folder: read once per plan, and grown by
// every run, so a plan's later runs are estimated from its earlier ones too.
type history struct {
	mu      sync.Mutex
	samples []estimate.Sample
}

func (h *history) model() *estimate.Model {
	h.mu.Lock()
	defer h.mu.Unlock()
	return estimate.NewModel(append([]estimate.Sample(nil), h.samples...))
}

func (h *history) add(s estimate.Sample) {
	h.mu.Lock()
	h.samples = append(h.samples, s)
	h.mu.Unlock()
}

func (r *run) estimateTarget() string {
	if r.cl == nil {
		return r.opts.Target.Name()
	}
	return estimate.Target(r.inv.Target, r.cl.Traits().Stack)
}

func (r *run) estimateRun() estimate.Run {
	pb := r.pb
	return estimate.Run{
		Target: r.estimateTarget(), Engine: pb.Engine.EstimateKey(), PreloadRate: pb.Engine.PreloadRate, SyncLevel: pb.Engine.SyncLevel(), Orders: pb.Preload.Orders,
		Probes: int64(pb.Load.ProbeRate * pb.Duration.Seconds()), BookReused: r.book != nil && r.book.Reused,
		Duration: pb.Duration,
	}
}

// recordEstimate puts the run's stage estimates in the manifest before the stages run.
func (r *run) recordEstimate() {
	if r.opts.history == nil {
		return
	}
	e := r.opts.history.model().Estimate(r.estimateRun())
	st := make([]rundir.StageTime, len(e.Stages))
	for i, s := range e.Stages {
		st[i] = rundir.StageTime{Name: s.Name, EstimateS: s.D.Seconds(), From: s.From}
	}
	r.updateManifest(func(m *rundir.Manifest) { m.Stages = st })
	r.progress("estimate: %s (start %s, preload %s, load %s, finish %s, analysis %s)", e.Total.Round(100*time.Millisecond),
		e.Stage(estimate.StageStart), e.Stage(estimate.StagePreload), e.Stage(estimate.StageLoad), e.Stage(estimate.StageFinish), e.Stage(estimate.StageAnalysis))
}

// stageBounds are the instants between stages: run start, preload start, preload end, load end,
// end. Without a preload the preload stage is empty (it starts and ends at load start).
func (r *run) stageBounds() map[string][2]time.Time {
	at := map[string]time.Time{}
	for _, p := range r.man.Phases {
		if _, ok := at[p.Name]; !ok {
			at[p.Name] = p.T
		}
	}
	first := func(names ...string) (time.Time, bool) {
		for _, n := range names {
			if t, ok := at[n]; ok {
				return t, true
			}
		}
		return time.Time{}, false
	}
	out := map[string][2]time.Time{}
	b := []struct {
		name string
		t    time.Time
		ok   bool
	}{{name: "run start", t: r.man.Started, ok: true}}
	add := func(name string, names ...string) {
		t, ok := first(names...)
		b = append(b, struct {
			name string
			t    time.Time
			ok   bool
		}{name, t, ok})
	}
	add("preload start", "preload_start", "load_start")
	add("preload end", "preload_end", "load_start")
	add("load end", "load_end")
	add("end", "end")
	for i, st := range estimate.Stages[:4] {
		if b[i].ok && b[i+1].ok {
			out[st] = [2]time.Time{b[i].t, b[i+1].t}
		}
	}
	return out
}

// recordActuals fills in what each stage took (all but the analysis, which has not run yet)
// and the run's overhead: its wall time minus the playbook's duration.
func (r *run) recordActuals() {
	r.manMu.Lock()
	defer r.manMu.Unlock()
	bounds := r.stageBounds()
	for i := range r.man.Stages {
		if b, ok := bounds[r.man.Stages[i].Name]; ok {
			v := b[1].Sub(b[0]).Seconds()
			r.man.Stages[i].ActualS = &v
		}
	}
	// Only a run whose timeline ran to its end has an overhead: one that stopped before load (a
	// disk probe that fell short) would otherwise show a negative one.
	if _, loaded := bounds[estimate.StageLoad]; loaded && !r.man.Ended.IsZero() {
		v := r.man.Ended.Sub(r.man.Started).Seconds() - r.pb.Duration.Seconds()
		r.man.OverheadS = &v
	}
}

// recordHistory appends a finished run's stage times (analysis included) to the history.
func (r *run) recordHistory(analysis time.Duration) {
	if r.opts.history == nil || r.man.Status != rundir.StatusOK {
		return
	}
	er := r.estimateRun()
	s := estimate.Sample{Run: r.id, At: time.Now().UTC(), Target: er.Target, Engine: er.Engine, SyncLevel: er.SyncLevel, Orders: er.Orders,
		Probes: er.Probes, BookReused: er.BookReused, DurationS: r.pb.Duration.Seconds(), Stages: map[string]float64{}}
	for _, st := range r.man.Stages {
		if st.ActualS != nil {
			s.Stages[st.Name] = *st.ActualS
		}
	}
	s.Stages[estimate.StageAnalysis] = analysis.Seconds()
	r.opts.history.add(s)
	if err := estimate.Append(r.opts.ResultsDir, s); err != nil {
		r.log.Warn("record stage times", "err", err)
	}
	if r.man.OverheadS != nil {
		r.progress("overhead %.1f s (everything but the %s timeline), analysis %.1f s", *r.man.OverheadS, r.pb.Duration, analysis.Seconds())
	}
}
