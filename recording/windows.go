package recording

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rig-dev/rig/internal/ctxtime"
)

// Recording only around windows. An engine's recorder costs every event the runtime writes
// while it runs, and what a run wants explained happens in its windows (a snapshot, a kill and
// the restart after it, a step-down, a burst), whose start the timeline knows ahead. So the
// recorder runs as a ring from Lead before each window's start to Tail after its end, is dumped
// there, and stopped unless another window is open or due within Lead: windows that overlap
// (with their lead and tail) are one recording, dumped at each window's end.

// Clock is what Windows reads time from and sleeps on; tests inject one.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t, or early with ctx's error.
	SleepUntil(ctx context.Context, t time.Time) error
}

// WallClock is the real clock.
type WallClock struct{}

func (WallClock) Now() time.Time { return time.Now() }

func (WallClock) SleepUntil(ctx context.Context, t time.Time) error {
	return ctxtime.SleepUntil(ctx, t)
}

// Switch is the recorder Windows runs: every server's, as one.
type Switch interface {
	// Start starts recording (a ring: nothing is written until Dump).
	Start(ctx context.Context) error
	// Dump takes the recording since the last dump as window's; stop says the recorder stops
	// after it (no window open or due).
	Dump(ctx context.Context, window string, stop bool) error
}

// WindowOptions say how far around a window the recorder runs.
type WindowOptions struct {
	// Lead is how long before a window's start the recorder starts: long enough that what
	// leads into the window (a sync already under way, a GC cycle) is in the ring, and that a
	// JVM's recorder (started by a tool that takes a second) is running when the window opens.
	Lead time.Duration
	// Tail is how long after a window's end it is dumped: the window's end is when the runner
	// saw it end, and what ended it is written a little later.
	Tail  time.Duration
	Clock Clock // nil: WallClock
}

// DefaultWindowOptions: a second each way.
var DefaultWindowOptions = WindowOptions{Lead: time.Second, Tail: time.Second}

// JFRWindowLead is the lead for Java Flight Recorder: JFR instruments the file classes as its
// recording starts, so the first forces after the start may be missing. (It was set when jcmd, a
// JVM of its own taking about a second to answer, started the recording; the attach socket
// answers in under a millisecond, and the lead was not measured again.)
const JFRWindowLead = 3 * time.Second

// Windows runs a recorder around windows. Open before each window, Close after it (Close sleeps
// Tail: call it beside the timeline); both are safe to call from several goroutines.
type Windows struct {
	opt WindowOptions
	sw  Switch
	mu  sync.Mutex
	on  bool // the recorder runs
	// open counts windows opened and not yet dumped; due is the latest start (minus Lead) of a
	// window announced by Close's next, so a dump in between does not stop the recorder.
	open int
	due  time.Time
	// spans are the stretches the recorder ran: [start, stop), the last open while on.
	spans []Span
}

// Span is a stretch a recorder ran.
type Span struct {
	From, To time.Time
}

// ErrBadWindowOptions classifies invalid options.
var ErrBadWindowOptions = errors.New("bad recording window options")

// NewWindows runs sw around the windows opened on it.
func NewWindows(sw Switch, opt WindowOptions) (*Windows, error) {
	if opt.Lead < 0 || opt.Tail < 0 {
		return nil, fmt.Errorf("%w: lead %s, tail %s: want 0 or more", ErrBadWindowOptions, opt.Lead, opt.Tail)
	}
	if opt.Clock == nil {
		opt.Clock = WallClock{}
	}
	return &Windows{opt: opt, sw: sw}, nil
}

// Open waits until Lead before at, a window's start, and starts the recorder unless it runs.
// A window opened late (at already less than Lead away) starts it at once.
func (w *Windows) Open(ctx context.Context, at time.Time) error {
	if err := w.opt.Clock.SleepUntil(ctx, at.Add(-w.opt.Lead)); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open++
	if w.on {
		return nil
	}
	if err := w.sw.Start(ctx); err != nil {
		w.open--
		return fmt.Errorf("start recording: %w", err)
	}
	w.on = true
	w.spans = append(w.spans, Span{From: w.opt.Clock.Now()})
	return nil
}

// Close follows a window's end (now): it waits Tail and dumps the recording as window's, and
// stops the recorder unless a window is still open or next (the start of the timeline's next
// window; zero: none) is due within Lead of the dump, so back-to-back windows are one recording.
func (w *Windows) Close(ctx context.Context, window string, next time.Time) error {
	end := w.opt.Clock.Now().Add(w.opt.Tail)
	w.mu.Lock()
	if !next.IsZero() && next.After(w.due) {
		w.due = next
	}
	w.mu.Unlock()
	serr := w.opt.Clock.SleepUntil(ctx, end)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open > 0 {
		w.open--
	}
	if !w.on {
		return serr
	}
	if serr != nil {
		// Cancelled (the run is ending): Finish takes what is left.
		return serr
	}
	now := w.opt.Clock.Now()
	// The next window's Open starts the recorder again at due-Lead: when that is less than
	// Lead from now, the recorder keeps running rather than stop and start that close together.
	soon := w.due.After(now) && !w.due.Add(-w.opt.Lead).After(now.Add(w.opt.Lead))
	stop := w.open == 0 && !soon
	if err := w.sw.Dump(ctx, window, stop); err != nil {
		return fmt.Errorf("dump recording after %s: %w", window, err)
	}
	if stop {
		w.stopped(now)
	}
	return nil
}

// Finish dumps and stops the recorder if it runs (the run's end).
func (w *Windows) Finish(ctx context.Context, window string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = 0
	if !w.on {
		return nil
	}
	err := w.sw.Dump(ctx, window, true)
	w.stopped(w.opt.Clock.Now())
	if err != nil {
		return fmt.Errorf("dump recording at %s: %w", window, err)
	}
	return nil
}

func (w *Windows) stopped(at time.Time) {
	w.on = false
	w.spans[len(w.spans)-1].To = at
}

// On says whether the recorder runs now.
func (w *Windows) On() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.on
}

// Spans are the stretches the recorder ran so far (the last one's To is zero while it runs).
func (w *Windows) Spans() []Span {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Span(nil), w.spans...)
}
