package analysis

import (
	"cmp"
	"math"
	"slices"

	"github.com/rig-dev/rig/rundir"
)

// An engine's log syncs (spans with Blocks commit: the reference engine's log store, as its own
// engine_syncs record them and as the disk model and a Go trace see the same syncs) as causes of
// client latency. A command is answered once a quorum holds it: the leader syncs a batch before
// it sends it on, and each follower before it acknowledges it, so a slow sync holds every command
// behind it — on the leader wherever enough followers are up for a quorum, on a follower only
// where too few other followers could acknowledge meanwhile (the others syncing too, or down). A sync
// covers an excursion (or a failover or burst window) only over the moments it held the commit
// so; the rest of it, and every sync in a snapshot or restart window (which wait for no
// command), is a row that covers nothing.

// commitBeside is a sync's row detail where it held no commit.
const commitBeside = "while a quorum could acknowledge without it, not covering"

// commitMeasured says whether the scope's interval measures client latency, which waits on the
// commit.
func (sc phaseScope) commitMeasured() bool {
	return sc.kind != string(WindowSnapshot) && sc.kind != string(WindowRestart)
}

// onCommitPath marks c as one of its node's log store syncs, judged by commitHeld. A Go trace's
// keeps its goroutine as its thread; the others, threadless, are the commit path's.
func (c *causeSpan) onCommitPath() {
	c.blocks, c.thread = rundir.BlocksCommit, cmp.Or(c.thread, "commit path")
}

// isCommit says whether the span held its node's part in the commit (rundir.BlocksCommit).
func (c causeSpan) isCommit() bool { return c.blocks == rundir.BlocksCommit }

// commitHeld is, per node, the moments of [from, to] its commit syncs held the commit: where it
// led and synced, or it followed and synced while fewer followers than a quorum needs (servers/2)
// were up and not syncing. A moment no event names a leader for, or with too few followers up
// for any quorum, is held by none of them. The nodes are the servers (d.nodes); a node is down
// over sc.down of its restarts (kill until ready).
func (d *runData) commitHeld(st *spanStream, from, to int64, sc phaseScope) map[string][]span {
	if !sc.commitMeasured() || sc.leader == nil {
		return nil
	}
	syncs := map[string][]span{}
	cuts := []int64{from, to}
	for _, n := range d.nodes {
		for _, sp := range st.over(n, from, to) {
			if !sp.isCommit() {
				continue
			}
			c := span{max(sp.at, from), min(sp.at+sp.dur, to)}
			if c.to > c.from {
				syncs[n] = append(syncs[n], c)
				cuts = append(cuts, c.from, c.to)
			}
		}
	}
	if len(syncs) == 0 {
		return nil
	}
	for _, ds := range sc.downs {
		for _, s := range ds {
			if s.to > from && s.from < to {
				cuts = append(cuts, max(s.from, from), min(s.to, to))
			}
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	in := func(ss []span, at int64) bool {
		return slices.ContainsFunc(ss, func(s span) bool { return s.from <= at && at < s.to })
	}
	need := len(d.nodes) / 2
	held := map[string][]span{}
	hold := func(n string, s span) {
		h := held[n]
		if k := len(h) - 1; k >= 0 && h[k].to == s.from {
			h[k].to = s.to
			return
		}
		held[n] = append(h, s)
	}
	for i := 0; i+1 < len(cuts); i++ {
		seg := span{cuts[i], cuts[i+1]}
		mid := seg.from + (seg.to-seg.from)/2
		leader := sc.leader(mid)
		if leader == "" {
			continue
		}
		var up, syncing []string
		for _, n := range d.nodes {
			if n == leader || in(sc.downs[n], mid) {
				continue
			}
			up = append(up, n)
			if in(syncs[n], mid) {
				syncing = append(syncing, n)
			}
		}
		if len(up) < need {
			continue // no quorum: nothing is committed, whoever syncs
		}
		if in(syncs[leader], mid) {
			hold(leader, seg)
		}
		if len(up)-len(syncing) < need {
			for _, n := range syncing {
				hold(n, seg)
			}
		}
	}
	return held
}

// clipTo is the parts of hs inside c.
func clipTo(hs []span, c span) []span {
	var out []span
	for _, h := range hs {
		if p := (span{max(h.from, c.from), min(h.to, c.to)}); p.to > p.from {
			out = append(out, p)
		}
	}
	return out
}

// restartDowns is each node's time down over the run's restarts: kill until ready, or until the
// end of the run where it never was.
func (d *runData) restartDowns(s *Summary) map[string][]span {
	out := map[string][]span{}
	for _, r := range s.Restarts {
		end := int64(math.MaxInt64)
		if r.ReadyS != nil {
			end = d.origin + int64(math.Round(*r.ReadyS*1e9))
		}
		out[r.Node] = append(out[r.Node], span{d.origin + int64(math.Round(r.KillS*1e9)), end})
	}
	return out
}
