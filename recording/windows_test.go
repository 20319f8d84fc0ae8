package recording

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock's time moves only when the test advances it; sleepers wake when it passes them.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiting []fakeSleeper
	changed chan struct{} // closed and replaced whenever a sleeper comes or goes
}

type fakeSleeper struct {
	at   time.Time
	wake chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_000_000, 0), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	c.mu.Lock()
	if !t.After(c.now) {
		c.mu.Unlock()
		return ctx.Err()
	}
	s := fakeSleeper{at: t, wake: make(chan struct{})}
	c.waiting = append(c.waiting, s)
	c.notifyLocked()
	c.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *fakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitSleepers blocks until n goroutines sleep on the clock.
func (c *fakeClock) waitSleepers(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		got, ch := len(c.waiting), c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d sleepers, want %d", got, n)
		}
	}
}

// advanceTo moves the clock to t, waking the sleepers it passes, earliest first.
func (c *fakeClock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	slices.SortFunc(c.waiting, func(a, b fakeSleeper) int { return a.at.Compare(b.at) })
	var keep []fakeSleeper
	for _, s := range c.waiting {
		if !s.at.After(t) {
			close(s.wake)
		} else {
			keep = append(keep, s)
		}
	}
	c.waiting = keep
	c.notifyLocked()
}

// fakeSwitch records what Windows asked of it, with the clock's time.
type fakeSwitch struct {
	clock *fakeClock
	mu    sync.Mutex
	calls []string
	done  chan string
}

func newFakeSwitch(c *fakeClock) *fakeSwitch {
	return &fakeSwitch{clock: c, done: make(chan string, 16)}
}

func (f *fakeSwitch) at() string {
	return fmt.Sprintf("%gs", f.clock.Now().Sub(time.Unix(1_000_000, 0)).Seconds())
}

func (f *fakeSwitch) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := "start@" + f.at()
	f.calls = append(f.calls, c)
	f.done <- c
	return nil
}

func (f *fakeSwitch) Dump(_ context.Context, window string, stop bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := fmt.Sprintf("dump %s stop=%v@%s", window, stop, f.at())
	f.calls = append(f.calls, c)
	f.done <- c
	return nil
}

func (f *fakeSwitch) wait(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-f.done:
		if got != want {
			t.Fatalf("recorder call %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no recorder call; want %q", want)
	}
}

// windowsRig is a Windows on a fake clock and switch, with times in seconds from the clock's start.
type windowsRig struct {
	t  *testing.T
	c  *fakeClock
	sw *fakeSwitch
	w  *Windows
	c0 time.Time
}

func newWindowsRig(t *testing.T, lead, tail time.Duration) *windowsRig {
	c := newFakeClock()
	sw := newFakeSwitch(c)
	w, err := NewWindows(sw, WindowOptions{Lead: lead, Tail: tail, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return &windowsRig{t: t, c: c, sw: sw, w: w, c0: c.Now()}
}

func (r *windowsRig) sec(s float64) time.Time {
	return r.c0.Add(time.Duration(s * float64(time.Second)))
}

// open calls Open for a window starting at s beside the test; its error arrives on the channel.
func (r *windowsRig) open(s float64) chan error {
	ch := make(chan error, 1)
	go func() { ch <- r.w.Open(context.Background(), r.sec(s)) }()
	return ch
}

// close calls Close for window name ending now, the next window due at next (0: none).
func (r *windowsRig) close(name string, next float64) chan error {
	var nt time.Time
	if next > 0 {
		nt = r.sec(next)
	}
	ch := make(chan error, 1)
	go func() { ch <- r.w.Close(context.Background(), name, nt) }()
	return ch
}

// advance moves the clock to s once n goroutines sleep on it.
func (r *windowsRig) advance(s float64, sleepers int) {
	r.c.waitSleepers(r.t, sleepers)
	r.c.advanceTo(r.sec(s))
}

func (r *windowsRig) returned(ch chan error) {
	r.t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			r.t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		r.t.Fatal("did not return")
	}
}

func (r *windowsRig) spans() []string {
	var out []string
	for _, s := range r.w.Spans() {
		to := "running"
		if !s.To.IsZero() {
			to = fmt.Sprintf("%gs", s.To.Sub(r.c0).Seconds())
		}
		out = append(out, fmt.Sprintf("%gs-%s", s.From.Sub(r.c0).Seconds(), to))
	}
	return out
}

func (r *windowsRig) wantCalls(want ...string) {
	r.t.Helper()
	r.sw.mu.Lock()
	defer r.sw.mu.Unlock()
	if !slices.Equal(r.sw.calls, want) {
		r.t.Errorf("recorder calls %q, want %q", r.sw.calls, want)
	}
}

// The recorder starts Lead before a window and is dumped and stopped Tail after its end, and it
// is off outside: it ran only from 4 s to 8 s of a window from 5 s to 7 s.
func TestWindowsStartBeforeDumpAfter(t *testing.T) {
	r := newWindowsRig(t, time.Second, time.Second)
	o := r.open(5)
	r.advance(3.9, 1)
	if r.w.On() {
		t.Fatal("recording 1.1 s before the window, want only from Lead (1 s) before")
	}
	r.advance(4, 1)
	r.sw.wait(t, "start@4s")
	r.returned(o)
	r.c.advanceTo(r.sec(7))
	c := r.close("01-snapshot", 0)
	r.advance(8, 1)
	r.sw.wait(t, "dump 01-snapshot stop=true@8s")
	r.returned(c)
	if r.w.On() {
		t.Error("still recording after the window's dump")
	}
	if got := r.spans(); !slices.Equal(got, []string{"4s-8s"}) {
		t.Errorf("recorded %q, want 4s-8s", got)
	}
}

// Two windows whose lead and tail overlap are one recording: the first window's dump does not
// stop the recorder (the second is open by then), and the second's Open does not start it again.
func TestWindowsOverlappingMerged(t *testing.T) {
	r := newWindowsRig(t, time.Second, time.Second)
	o := r.open(5)
	r.advance(4, 1)
	r.sw.wait(t, "start@4s")
	r.returned(o)
	r.c.advanceTo(r.sec(7))
	ca := r.close("01-snapshot", 8.5) // dumps at 8 s
	ob := r.open(8.5)                 // opens at 7.5 s
	r.advance(7.5, 2)
	r.returned(ob)
	r.advance(8, 1)
	r.sw.wait(t, "dump 01-snapshot stop=false@8s")
	r.returned(ca)
	r.c.advanceTo(r.sec(10))
	cb := r.close("02-kill", 0)
	r.advance(11, 1)
	r.sw.wait(t, "dump 02-kill stop=true@11s")
	r.returned(cb)
	r.wantCalls("start@4s", "dump 01-snapshot stop=false@8s", "dump 02-kill stop=true@11s")
	if got := r.spans(); !slices.Equal(got, []string{"4s-11s"}) {
		t.Errorf("recorded %q, want one stretch 4s-11s", got)
	}
}

// A next window whose lead starts less than Lead after a dump keeps the recorder running
// through the gap: stopping and starting again that close together costs more than it saves.
func TestWindowsShortGapMerged(t *testing.T) {
	r := newWindowsRig(t, time.Second, time.Second)
	o := r.open(5)
	r.advance(4, 1)
	r.returned(o)
	r.c.advanceTo(r.sec(7))
	ca := r.close("01-snapshot", 9.5) // dumps at 8 s; the next opens at 8.5 s
	r.advance(8, 1)
	r.returned(ca)
	ob := r.open(9.5)
	r.advance(8.5, 1)
	r.returned(ob)
	r.c.advanceTo(r.sec(10))
	cb := r.close("02-step-down", 0)
	r.advance(11, 1)
	r.returned(cb)
	r.wantCalls("start@4s", "dump 01-snapshot stop=false@8s", "dump 02-step-down stop=true@11s")
}

// Windows far apart are recorded apart: the recorder is off between them.
func TestWindowsApart(t *testing.T) {
	r := newWindowsRig(t, time.Second, time.Second)
	o := r.open(5)
	r.advance(4, 1)
	r.returned(o)
	r.c.advanceTo(r.sec(7))
	ca := r.close("01-snapshot", 20)
	r.advance(8, 1)
	r.returned(ca)
	ob := r.open(20)
	r.advance(19, 1)
	r.returned(ob)
	r.c.advanceTo(r.sec(21))
	if err := r.w.Finish(context.Background(), "end"); err != nil {
		t.Fatal(err)
	}
	r.wantCalls("start@4s", "dump 01-snapshot stop=true@8s", "start@19s", "dump end stop=true@21s")
	if got := r.spans(); !slices.Equal(got, []string{"4s-8s", "19s-21s"}) {
		t.Errorf("recorded %q, want 4s-8s and 19s-21s", got)
	}
}

// A window opened later than its lead (the timeline ran behind) starts the recorder at once;
// Finish with nothing recording does nothing.
func TestWindowsLateOpenAndIdleFinish(t *testing.T) {
	r := newWindowsRig(t, time.Second, time.Second)
	if err := r.w.Finish(context.Background(), "end"); err != nil {
		t.Fatal(err)
	}
	r.c.advanceTo(r.sec(10))
	if err := r.w.Open(context.Background(), r.sec(5)); err != nil {
		t.Fatal(err)
	}
	r.wantCalls("start@10s")
	if _, err := NewWindows(r.sw, WindowOptions{Lead: -time.Second}); !errors.Is(err, ErrBadWindowOptions) {
		t.Errorf("a negative lead: %v, want ErrBadWindowOptions", err)
	}
}
