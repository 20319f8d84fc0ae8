package diskmodel

import "time"

// ProbePasses is how many passes a run's probe of a disk model makes (ProbeOptions.Repeats),
// keeping each figure's best.
const ProbePasses = 3

// MaxProbePass is the longest one pass of a probe may be modelled to take: a model whose caps or
// sync costs make it longer holds a run's start for minutes before anything is measured
// (sync_latency 10s: 21 fsyncs of 10 s a pass), so a playbook asking for one is refused.
const MaxProbePass = 20 * time.Second

// probeSlack is what a pass may take beyond its modelled time before the run gives up on it: the
// host's own disk and a busy machine's scheduling, which a model only adds to.
const probeSlack = 10 * time.Second

// ProbeTime is the least time the model l makes a probe with o take, by its arithmetic: every
// fsync of the probe (Probe's phases) waits for its unsynced bytes to land under the caps and for
// the sync cost, whichever is later (diskmodel/fusefs), and the idle disk's burst runs uncapped
// once. The host disk under the model can only add to it.
func ProbeTime(l Limits, o ProbeOptions) time.Duration {
	o = o.withDefaults(l)
	ops := func(n int64) int64 { return (n + l.EffectiveIOSize() - 1) / l.EffectiveIOSize() }
	var transfer time.Duration
	step := func(bytes, n int64) time.Duration {
		var land time.Duration
		if l.Throughput > 0 {
			land = time.Duration(float64(bytes) / float64(l.Throughput) * float64(time.Second))
		}
		if l.IOPS > 0 {
			land = max(land, time.Duration(float64(n)/float64(l.IOPS)*float64(time.Second)))
		}
		transfer += land
		return max(l.SyncCost(bytes), land)
	}
	syncs := int64(o.Syncs)
	var t time.Duration
	t += time.Duration(syncs) * step(ProbePage, 1)                    // fsync after 4 KiB
	t += time.Duration(syncs) * step(o.Block, ops(o.Block))           // fsync after a block
	t += step(0, 0)                                                   // truncate, fsync
	t += step(o.Bytes, ops(o.Bytes))                                  // sequential, one fsync
	t += step(int64(o.RandomWrites)*ProbePage, int64(o.RandomWrites)) // scattered pages, one fsync
	t -= min(l.Burst, transfer)
	return time.Duration(max(o.Repeats, 1)) * t
}

// ProbeBound is how long a probe of l with o may take before a run gives it up: twice each
// pass's modelled time (ProbeTime) plus a slack for the host, per pass.
func ProbeBound(l Limits, o ProbeOptions) time.Duration {
	pass := o
	pass.Repeats = 1
	return time.Duration(max(o.Repeats, 1)) * (2*ProbeTime(l, pass) + probeSlack)
}
