package analysis

import (
	"errors"
	"fmt"
	"io/fs"
)

// The load generator's own lateness as a cause (loadgen/late-sends.ndjson, rundir.LateSend): a
// probe's latency counts from its intended send time, so while the sender had not yet handed due
// probes to the connection — its thread woken late, waiting on a run queue or a lock — their time
// went by in the client, before any server could see them. Each write of late probes is a span
// from when the sender was free to send them (the earliest one's due time, or its previous
// write's return if later) to their hand-over (not to the write's return: a write that waits is
// a server not reading). It covers the intervals made of probes' latencies — an
// excursion, a failover window — and no other: a snapshot or restart window measures the
// engines, a burst window the bursts.

// SourceLoadgen is the load generator's record of its own lateness.
const SourceLoadgen = "loadgen"

// blocksProbes is what a late send held up: the probes it carried, so it covers only intervals
// that measure them (measuresProbes).
const blocksProbes = "probes"

// CauseSendLag: due probes not yet sent by the load generator.
const CauseSendLag CauseKind = "send_lag"

// probeSender is the thread a late send's row names.
const probeSender = "probe sender"

// measuresProbes says whether the scope's interval is made of the probes' latencies.
func (sc phaseScope) measuresProbes() bool {
	return sc.kind == KindExcursion || sc.kind == string(WindowFailover)
}

// readLateSendSource adds the probe sender's late writes on the client node that ran it.
func readLateSendSource(d *runData, st *spanStream) {
	ls, err := d.run.LateSends()
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		d.warnf("late sends: %v", err)
	}
	st.has(SourceLoadgen)
	node := d.probeNode()
	var ss []causeSpan
	for _, l := range ls {
		from := l.From()
		if l.WokeNs <= from {
			continue
		}
		detail := fmt.Sprintf("%d probe(s) handed to the connection up to %s after due", l.Probes, fmtMs(nsToMs(l.WokeNs-l.DueNs)))
		if from > l.DueNs {
			detail += fmt.Sprintf(", %s after the sender's previous write returned", fmtMs(nsToMs(l.WokeNs-from)))
		}
		ss = append(ss, causeSpan{at: from, dur: l.WokeNs - from, w: 1, cover: 1, cause: string(CauseSendLag), source: SourceLoadgen, blocks: blocksProbes,
			thread: probeSender, names: CauseSendLag, counted: true, detail: detail})
	}
	st.add(node, ss...)
}

// probeNode is the client node that ran the probe stream: the inventory's first client, as the
// runner picks it.
func (d *runData) probeNode() string {
	if inv := d.man.Inventory; inv != nil {
		if cs := inv.Clients(); len(cs) > 0 {
			return cs[0].Name
		}
	}
	return "client"
}
