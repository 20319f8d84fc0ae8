package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
)

// The change stream (GET /changes) is fed by a check of the node's own state every
// changeCheckEvery: a few atomic loads in process, far cheaper than the agent asking over HTTP,
// and finer than the agent's former 20 ms poll.
const (
	changeCheckEvery = 5 * time.Millisecond
	changesKept      = 256
)

// changeLog keeps the newest changes of the node's observable state, with a version per change.
type changeLog struct {
	mu        sync.Mutex
	version   uint64
	list      []engine.Change // the newest changesKept
	key       changeKey
	lastCheck time.Time
	wake      chan struct{} // closed and replaced on every change: a broadcast to long polls
	done      chan struct{} // closed when run returns: long polls answer, so shutdown need not wait for them
}

// changeKey is what a change is a change of.
type changeKey struct {
	phase, role, leader string
	term, snapIndex     uint64
	snapRestored        bool
}

func keyOf(st *engine.Status) changeKey {
	k := changeKey{phase: st.Phase, role: st.Role, leader: st.Leader, term: st.Term}
	if s := st.LastSnapshot; s != nil {
		k.snapIndex, k.snapRestored = s.Index, s.Restored
	}
	return k
}

func newChangeLog() *changeLog {
	return &changeLog{wake: make(chan struct{}), done: make(chan struct{})}
}

// check records st when its key differs from the last one (or it is the first).
func (c *changeLog) check(st engine.Status) {
	k := keyOf(&st)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version == 0 || k != c.key {
		c.version++
		c.list = append(c.list, engine.Change{Version: c.version, PrevCheck: c.lastCheck, Status: st})
		if len(c.list) > changesKept {
			c.list = append(c.list[:0], c.list[len(c.list)-changesKept:]...)
		}
		c.key = k
		close(c.wake)
		c.wake = make(chan struct{})
	}
	c.lastCheck = st.Now
}

// since returns the changes after version v, and a channel closed at the next change.
func (c *changeLog) since(v uint64) (engine.Changes, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := engine.Changes{Version: c.version, Changes: []engine.Change{}}
	if v > c.version { // a version from an earlier process: start over
		v = 0
	}
	for _, ch := range c.list {
		if ch.Version > v {
			out.Changes = append(out.Changes, ch)
		}
	}
	out.Truncated = len(out.Changes) > 0 && out.Changes[0].Version > v+1
	return out, c.wake
}

// run checks the node until ctx ends.
func (c *changeLog) run(ctx context.Context, node *replica.Node) {
	defer close(c.done)
	t := time.NewTicker(changeCheckEvery)
	defer t.Stop()
	for {
		c.check(node.Status(false))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serve answers GET /changes?since=V&wait=D (engine.Changes).
func (c *changeLog) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since uint64
	if v := q.Get("since"); v != "" {
		var err error
		if since, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("since %q: want a version number", v)})
			return
		}
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > engine.MaxChangesWait {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("wait %q: want a Go duration from 0 to %s", v, engine.MaxChangesWait)})
			return
		}
		wait = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for {
		out, wake := c.since(since)
		if len(out.Changes) > 0 || wait == 0 {
			writeJSON(w, http.StatusOK, out)
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			writeJSON(w, http.StatusOK, out)
			return
		case <-c.done:
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
}
