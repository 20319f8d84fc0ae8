// Package loadgen is the rig's load generator (docs/architecture.md, "Load generator"): it builds a
// resting book (Preload), runs an open-loop probe stream (Probe) and sends micro-bursts (Burst)
// against a cluster that speaks engine/wire.
//
// Every probe has an intended send time fixed by the schedule (start + i/rate) and its latency
// is measured from it, never from when it actually went out: probes the sender could not send
// during a stall or a reconnect are charged the wait (no coordinated omission). A probe sent on
// a connection that died, or answered NotLeader or Error, is resent to the new leader with its
// original intended time; one without an answer when the run ends plus a grace period is lost.
// Each stream keeps one connection to the leader, found by following NotLeader redirects, kept
// alive with pings.
//
// Outputs: probes.bin (rundir.Probe records), probes.hlog (HdrHistogram interval log, readable
// by HistogramLogProcessor), stats.json (ProbeStats), bursts.bin.
package loadgen
