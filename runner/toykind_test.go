package runner

import (
	"context"
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
	"github.com/rig-dev/rig/sweep"
	"github.com/rig-dev/rig/target/targettest"
)

// toyKind is an action kind that lives in this file alone: one type and one registration. It
// declares everything the analysis asks of a kind: its events (a start with its own payload and
// an end toyWindow later), its window, its plot marker, and rows of its own with their figures.
type toyKind struct{ Answer int }

const (
	toyName   = "toy"
	toyEnd    = rundir.ActionName("toy_end")
	toyWindow = 300 * time.Millisecond
)

// toyMarker is the toy's plot marker: a colour no other marker has.
var toyMarker = color.RGBA{R: 0x00, G: 0xb0, B: 0xb0, A: 0xff}

type toyPayload struct {
	Answer int `json:"answer"`
}

func (*toyKind) Kind() string { return toyName }
func (*toyKind) Fields() []actions.Field {
	return []actions.Field{{Key: "answer",
		Set: func(s actions.Spec, raw string) error {
			n, err := strconv.Atoi(raw)
			if err == nil && n < 0 {
				err = strconv.ErrRange
			}
			s.(*toyKind).Answer = n
			return err
		},
		Get: func(s actions.Spec) string { return strconv.Itoa(s.(*toyKind).Answer) }}}
}
func (*toyKind) Check(actions.Context) []actions.Problem { return nil }
func (t *toyKind) Describe(actions.Varied) string        { return "toy " + strconv.Itoa(t.Answer) }
func (t *toyKind) String() string                        { return "toy " + strconv.Itoa(t.Answer) }
func (*toyKind) EndEvent() rundir.ActionName             { return toyEnd }
func (*toyKind) Events() []actions.EventKind {
	return []actions.EventKind{
		{Name: toyName, Payload: func() any { return &toyPayload{} }, Marker: toyMarker},
		{Name: toyEnd},
	}
}
func (*toyKind) Figures() []actions.Figure {
	return []actions.Figure{
		{Key: "answer", Label: "answer", Unit: "count", Dir: stats.HigherIsBetter},
		{Key: "held", Label: "held", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true},
		{Key: "worst", Label: "worst probe", Unit: "ms", Dir: stats.LowerIsBetter},
	}
}

// Row: the answer its event carried, how long its window held, and the worst latency of the
// probes sent inside it (none where the run had no probes).
func (*toyKind) Row(run actions.RunView, w actions.Window) map[string]float64 {
	out := map[string]float64{}
	var p toyPayload
	if json.Unmarshal(w.Start.Action.Payload, &p) == nil {
		out["answer"] = float64(p.Answer)
	}
	end := run.LoadEnd()
	if w.End != nil {
		end = w.End.T
	}
	out["held"] = float64(end.Sub(w.Start.T)) / 1e6
	if pf := run.Probes(w.Start.T, end); pf.MaxMs != nil {
		out["worst"] = *pf.MaxMs
	}
	return out
}

func (t *toyKind) Run(ctx context.Context, env actions.Env) error {
	node := env.Leader()
	if err := actions.RecordAction(env, node, toyName, toyPayload{t.Answer}); err != nil {
		return err
	}
	env.Go(ctx, func(ctx context.Context) error {
		if err := ctxtime.Sleep(ctx, toyWindow); err != nil {
			return nil
		}
		return actions.RecordAction(env, node, string(toyEnd), nil)
	})
	return nil
}

var registerToy sync.Once

// A kind added as one file and one registration goes through validation (its keys checked, a
// bad value refused where it is), the run on the fake cluster, events.jsonl with its own
// payload and end event, summary.json's rows and pooled figures, report.md's table of its own,
// the latency plot's marker, and the sweep report's table: nothing outside this file names it.
func TestToyKindEndToEnd(t *testing.T) {
	registerToy.Do(func() { actions.Register(func() actions.Spec { return &toyKind{} }) })

	if _, err := playbooks.Parse("bad.yaml", []byte(strings.Replace(basePlaybook, "%s", "2s", 1)+"timeline:\n  - {at: 500ms, toy: {answer: -1}}\n"), testDrivers); err == nil || !strings.Contains(err.Error(), "answer") {
		t.Errorf("a bad toy value: %v; want a problem at answer", err)
	}
	res := runFake(t, context.Background(), &targettest.Target{Cluster: targettest.NewCluster()}, plan(t, "2s", "timeline:\n  - {at: 500ms, toy: {answer: 42}}\n"))
	if res.err != nil {
		t.Fatal(res.err)
	}
	var payload []string
	var start, end *rundir.Event
	for i, e := range res.events {
		switch {
		case e.IsAction(toyName):
			payload, start = append(payload, e.Node+" "+string(e.Action.Payload)), &res.events[i]
		case e.IsAction(toyEnd):
			end = &res.events[i]
		}
	}
	if len(payload) != 1 || !strings.HasSuffix(payload[0], ` {"answer":42}`) || strings.HasPrefix(payload[0], " ") {
		t.Errorf("toy events %q; want one, on the leader, with its payload", payload)
	}
	if start == nil || end == nil || end.Node != start.Node || end.T.Sub(start.T) < toyWindow {
		t.Fatalf("toy start %+v, end %+v; want its end on its node %s later", start, end, toyWindow)
	}

	dir := res.outs[0].Dir
	var sum analysis.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	found := false
	for _, a := range sum.Actions {
		found = found || a.Action == toyName
	}
	if err != nil || !found {
		t.Errorf("summary.json actions %v (%v); want the toy", sum.Actions, err)
	}
	rows := sum.KindRows[toyName]
	if len(rows) != 1 || rows[0].Values["answer"] != 42 || rows[0].ToS == nil || *rows[0].ToS-rows[0].AtS < toyWindow.Seconds() {
		t.Fatalf("summary.json toy rows %+v; want one, answer 42, over its window", rows)
	}
	held := rows[0].Values["held"]
	if want := float64(end.T.Sub(start.T)) / 1e6; held != want {
		t.Errorf("toy row %+v: held %g ms, want %g (its events' times)", rows[0].Values, held, want)
	}
	if _, ok := rows[0].Values["worst"]; ok {
		t.Errorf("toy row %+v: a worst probe from a run without probes", rows[0].Values)
	}
	if p := sum.RowPooled[toyName]; len(p) != 2 || p[1].Key != "held" || p[1].N != 1 || p[1].Median != held {
		t.Errorf("summary.json pooled toy %+v; want answer and held, one value each", p)
	}

	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rep), "## toy\n\n| # | at | node | to | answer | held | worst probe |\n") || !strings.Contains(string(rep), " | 42 count | ") {
		t.Errorf("report.md has no toy table with its row:\n%s", rep)
	}

	if n := colourPixels(t, filepath.Join(dir, analysis.PlotNodes), toyMarker); n == 0 {
		t.Errorf("%s: no pixel of the toy's marker colour %v", analysis.PlotNodes, toyMarker)
	}

	set, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sweep.Build(set, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var m *sweep.Metric
	for i := range r.Metrics {
		if r.Metrics[i].Key == "toy.held" {
			m = &r.Metrics[i]
		}
	}
	if m == nil || m.Table != toyName || !m.Headline || !slices.Equal(r.Groups[0].Values(*m), []float64{held}) {
		t.Fatalf("sweep metric toy.held %+v; want the toy's table with the run's value %g", m, held)
	}
	if md := r.Markdown(); !strings.Contains(md, "## toy\n") || !strings.Contains(md, "held (ms)") {
		t.Errorf("sweep report has no toy table:\n%s", md)
	}
	if !slices.Contains(sweep.HeadlineKeys(), "toy.held") {
		t.Errorf("headline keys %v; want toy.held (its declaration says headline)", sweep.HeadlineKeys())
	}
}

// colourPixels counts the pixels of exactly c in the PNG at path.
func colourPixels(t *testing.T, path string, c color.RGBA) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == c {
				n++
			}
		}
	}
	return n
}
