package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/rig-dev/rig/playbooks"
)

// The engines' own recordings (engine.recording: on; issue 37): after each timeline action and
// at the end of the load every server's agent takes its engine's recording since its last take
// and reads it into <node>/inside.ndjson (agent/recording.go). A take during the load runs
// beside the timeline, so the next action does not wait for it.

type recordings struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	noted map[string]bool // notes already warned about, by node and text
}

func (r *run) recordingOn() bool { return r.pb.Engine.RecordingMode() == playbooks.RecordingOn }

// takeRecordingsAsync takes every server's recording after a window, beside the timeline.
func (r *run) takeRecordingsAsync(ctx context.Context, window string) {
	if !r.recordingOn() {
		return
	}
	r.rec.wg.Add(1)
	go func() {
		defer r.rec.wg.Done()
		r.takeRecordings(ctx, window)
	}()
}

// takeRecordings takes every live server's recording, one agent at a time (each take starts a
// JDK tool or two on its node, and the local target's nodes share one machine).
func (r *run) takeRecordings(ctx context.Context, window string) {
	if !r.recordingOn() {
		return
	}
	for _, n := range r.liveNodes(r.servers) {
		resp, err := r.agent(n.Name).TakeRecording(ctx, window)
		if err != nil {
			r.log.Warn("take recording", "node", n.Name, "window", window, "err", err)
			r.noteRecording(n.Name, fmt.Sprintf("taking its recording after %s: %v", window, err))
			continue
		}
		r.log.Info("recording taken", "node", n.Name, "window", window, "files", resp.Files, "spans", resp.Spans)
		for _, note := range resp.Notes {
			r.noteRecording(n.Name, note)
		}
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

// finishRecordings waits for the takes under way and takes the rest of every recording.
func (r *run) finishRecordings(ctx context.Context) {
	if !r.recordingOn() {
		return
	}
	r.rec.wg.Wait()
	r.takeRecordings(ctx, "end")
}
