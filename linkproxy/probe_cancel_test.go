package linkproxy

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A probe ends when its context is cancelled (a run's load ended), even in the middle
// of a round trip: one of `delay: 10s` used to hold the timeline for its whole bound (103 s of a
// 15 s run). Here a round trip takes 10 s; the probe must return well before one could finish.
func TestProbeEndsOnCancel(t *testing.T) {
	l := startLink(t, echoServer(t), Shape{Delay: 5 * time.Second}, Shape{Delay: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := l.Probe(ctx, ProbeOptions{Count: 5})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("probe after cancel: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("probe took %v after its context was cancelled at 200ms; a round trip is 10s", took)
	}
}
