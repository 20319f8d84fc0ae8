package cost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server"
	"github.com/rig-dev/rig/engine/server/servertest"
)

// inProcess is a one-node reference engine in the test's process, its flight recorder on or
// off; the bench's Engine seam with real raft, log and load generator but no exec.
type inProcess struct {
	t       *testing.T
	started []bool
	windows bool     // the recorder starts idle and is switched (Running.Switch)
	calls   []string // the switch's
}

// frSwitch switches an in-process recorder as the engine's admin API does.
type frSwitch struct {
	e  *inProcess
	fr *trace.FlightRecorder
}

func (s frSwitch) Start(context.Context) error {
	s.e.calls = append(s.e.calls, "start")
	return s.fr.Start()
}

func (s frSwitch) Dump(_ context.Context, window string, stop bool) error {
	s.e.calls = append(s.e.calls, fmt.Sprintf("dump %s stop=%v", window, stop))
	if _, err := s.fr.WriteTo(io.Discard); err != nil {
		return err
	}
	if stop {
		s.fr.Stop()
	}
	return nil
}

func (e *inProcess) Name() string { return "in-process reference engine" }

func (e *inProcess) Start(ctx context.Context, dir string, recording bool) (Running, error) {
	e.started = append(e.started, recording)
	var fr *trace.FlightRecorder
	if recording {
		fr = trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: time.Minute, MaxBytes: 16 << 20})
	}
	cfg := servertest.Start(e.t, func(c *engine.Config) { c.SyncLevel = 0 }, func(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
		return server.New(node, log, token).WithFlightRecorder(fr).Run(ctx)
	})
	run := Running{Servers: []string{cfg.ClientAddr}, Stop: func() error { return nil }}
	if recording && e.windows {
		run.Switch, run.Stop = frSwitch{e, fr}, func() error { fr.Stop(); return nil }
		return run, nil
	}
	if recording {
		// Only one recorder may run in a process; it starts after the engine, as a run's
		// window is recorded after the engine's start.
		if err := fr.Start(); err != nil {
			return Running{}, err
		}
		run.Stop = func() error { fr.Stop(); return nil }
		run.Dump = func(ctx context.Context) (int64, error) {
			f, err := os.Create(filepath.Join(dir + ".trace"))
			if err != nil {
				return 0, err
			}
			defer f.Close()
			return fr.WriteTo(f)
		}
	}
	return run, nil
}

// TestRunInterleaves: one round is two phases, recording first in round 1 and second in round
// 2, each preloaded and probed by the load generator, the recorded one's recording fetched.
func TestRunInterleaves(t *testing.T) {
	e := &inProcess{t: t}
	rep, err := Run(context.Background(), Options{Engine: e, Rounds: 2, Orders: 2000, ProbeRate: 500, ProbeFor: 300 * time.Millisecond, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, false, true}; len(e.started) != 4 || e.started[0] != want[0] || e.started[1] != want[1] || e.started[2] != want[2] || e.started[3] != want[3] {
		t.Errorf("phases started recording %v, want %v", e.started, want)
	}
	if len(rep.Phases) != 4 {
		t.Fatalf("%d phases", len(rep.Phases))
	}
	for _, p := range rep.Phases {
		if p.PreloadPerS <= 0 || p.ProbeP50Us <= 0 || p.Probes < 100 {
			t.Errorf("phase %+v: no figures", p)
		}
		if p.Recording != (p.DumpBytes > 0) {
			t.Errorf("phase %+v: a recording fetched only in recorded phases", p)
		}
	}
	if rep.On.ProbeP50Us <= 0 || rep.Off.PreloadPerS <= 0 || rep.DumpMBPerSec <= 0 {
		t.Errorf("report %+v", rep)
	}
}

func TestSummarize(t *testing.T) {
	r := Report{Phases: []Phase{
		{Recording: true, PreloadPerS: 95, ProbeP50Us: 102},
		{Recording: false, PreloadPerS: 100, ProbeP50Us: 100},
		{Recording: false, PreloadPerS: 100, ProbeP50Us: 100},
		{Recording: true, PreloadPerS: 97, ProbeP50Us: 101},
	}}
	r.summarize()
	if r.On.PreloadPerS != 96 || r.On.ProbeP50Us != 101.5 || r.P50Overhead < 1.49 || r.P50Overhead > 1.51 {
		t.Errorf("on %+v, p50 overhead %v", r.On, r.P50Overhead)
	}
	if r.PreloadLoss < 3.99 || r.PreloadLoss > 4.01 || !r.MeetsGoal {
		t.Errorf("preload loss %v, meets %v; want 4 %%, within the goal", r.PreloadLoss, r.MeetsGoal)
	}
	r.Phases[0].ProbeP50Us, r.Phases[3].ProbeP50Us = 110, 110
	r.summarize()
	if r.MeetsGoal {
		t.Errorf("p50 +%.1f %% meets the goal", r.P50Overhead)
	}
	if _, err := Run(context.Background(), Options{Rounds: 1}); err == nil {
		t.Error("no engine accepted")
	}
}

// With Windows the recorder runs only around the probe stream's windows, started a second
// before each and dumped and stopped a second after: not in the preload, and on for the share
// of the stream the windows and their lead and tail cover.
func TestRunWindows(t *testing.T) {
	e := &inProcess{t: t, windows: true}
	rep, err := Run(context.Background(), Options{Engine: e, Rounds: 1, Orders: 2000, ProbeRate: 500, ProbeFor: 3 * time.Second,
		Windows: Windows{Every: 1500 * time.Millisecond, For: 200 * time.Millisecond}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// One window: at 1.5 s (its lead from 0.5 s, its tail to 2.7 s); the next, at 3 s, would end
	// after the stream.
	if want := []string{"start", "dump 01-window stop=true"}; !slices.Equal(e.calls, want) {
		t.Errorf("recorder switched %q, want %q", e.calls, want)
	}
	if s := rep.RecordedShare; s < 0.6 || s > 0.9 {
		t.Errorf("recorded %.2f of the stream, want about 2.2 s of 3 s", s)
	}
	for _, p := range rep.Phases {
		if p.Recording && (p.InP50Us <= 0 || p.OutP50Us <= 0) {
			t.Errorf("windowed phase %+v: the probes not split into inside and outside the recording", p)
		}
	}
	if _, err := Run(context.Background(), Options{Engine: e, Rounds: 1, Orders: 1, ProbeRate: 1, ProbeFor: time.Second,
		Windows: Windows{Every: 2 * time.Second, For: time.Second}, Dir: t.TempDir()}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("windows that never end within the stream: %v, want ErrBadOptions", err)
	}
}
