// Package rundir owns the names and formats of a run folder: every file a run writes. Writers
// (the runner, agent/supervise, agent/sample, loadgen, analysis) and readers (analysis, sweep,
// rig report, the runner) import these names, types and codecs instead of keeping their own
// copies.
//
//	manifest.json                     Manifest
//	events.jsonl                      Event, one JSON line each
//	controller.json                   ControllerBeat (the controller's heartbeat)
//	controller.log                    the controller's log
//	loadgen-<mode>.json, .log         the load generator's config and log for one command
//	summary.json, report.md, plots/   the analysis (analysis.Analyze)
//	<node>/status.json                engine.Status at the end of the run
//	<node>/orders.json                engine.HeldOrders at the end of the run (the durability check)
//	<node>/engine.json                the engine's config file as the agent wrote it for its start
//	<node>/transitions.jsonl          Transition, one JSON line each (the agent's journal)
//	<node>/engine.log, agent.log      the engine's and the agent's logs
//	<node>/samples/*.ndjson           Sample, one JSON line each (the agent's OS sampler)
//	<node>/disk-syncs.ndjson          DiskSync, one JSON line per fsync of the node's disk model
//	<node>/sched/*.ndjson             SchedSample, one JSON line each (the agent's scheduler sampler)
//	<node>/pauses.ndjson              InsideSpan, one JSON line each: the engine runtime's GC pauses (always on)
//	<node>/inside.ndjson              InsideSpan, one JSON line each: the engine's own recording, read
//	<node>/recordings/                the engine's recordings (JFR, Go trace), one per window
//	loadgen/probes.bin                Probe records (ProbeWriter, ReadProbes)
//	loadgen/probes.hlog               HdrHistogram interval log of probe latency in ns
//	loadgen/bursts.bin                Probe records, one per burst message
//	loadgen/stats.json                ProbeStats
//	loadgen/acked.bin                 Acked records: the acknowledged-order ledger (AckedWriter, ReadAcked)
//	loadgen/preload.json              PreloadStats
//	<node>/loadgen/bursts-N/bursts.json  BurstStats of another client node's senders
//	<node>/loadgen/bursts-N/transport.json  TransportSamples: the servers' counters around bursts
//	                                  sent through the engine's own client
//
// It imports only the packages whose shapes these files embed (engine, engine/driver's resolved
// settings, inventory, the agent's answers: facts, tune, disk; diskmodel's records, linkproxy's
// round trips) and internal helpers, none of which writes or reads a run folder, so every
// writer and reader can import it (internal/layers checks both).
package rundir

import (
	"fmt"
	"path"
)

// MaxJSONBytes bounds a run folder's JSON file (manifest.json, summary.json, a node's
// status.json) as it is read back: a folder the user names to rig report may hold anything, and a
// FIFO or a symlink to /dev/zero in place of one is refused (internal/untrusted), not read.
const MaxJSONBytes = 64 << 20

// File and folder names inside a run folder (and inside a node's or the load generator's folder).
const (
	ManifestFile      = "manifest.json"
	EventsFile        = "events.jsonl"
	ControllerLogFile = "controller.log"
	SummaryFile       = "summary.json"
	ReportFile        = "report.md"
	PlotsDir          = "plots"

	// In a node's folder.
	StatusFile       = "status.json"
	HeldOrdersFile   = "orders.json" // engine.HeldOrders at the end of the run
	TransitionsFile  = "transitions.jsonl"
	EngineConfigFile = "engine.json"
	EngineLogFile    = "engine.log"
	AgentLogFile     = "agent.log"
	SamplesDir       = "samples"
	SamplesExt       = ".ndjson" // <node>/samples/<name>.ndjson

	// The load generator's folder (LoadgenDir in the run folder, and in a client node's folder
	// for the bursts its senders sent).
	LoadgenDir     = "loadgen"
	ProbesFile     = "probes.bin"
	ProbesHlogFile = "probes.hlog"
	BurstsFile     = "bursts.bin"
	StatsFile      = "stats.json"
	PreloadFile    = "preload.json"
	BurstStatsFile = "bursts.json"
	// TransportFile is beside a BurstStatsFile of bursts sent through the engine's own client:
	// the servers' transport counters around them (TransportSamples).
	TransportFile = "transport.json"
)

// LoadgenFiles are what a probe or preload run writes into its output folder, each gathered
// into the run folder's loadgen/.
var LoadgenFiles = []string{ProbesFile, ProbesHlogFile, StatsFile, LateSendsFile, BurstsFile, PreloadFile, AckedFile}

// LoadgenCommandName is the base name (no extension) of the config and log of one load
// generator command in the run folder: loadgen-<what>.json and loadgen-<what>.log.
func LoadgenCommandName(what string) string { return "loadgen-" + what }

// RemoteBurstsDir is where, relative to the run folder, a client node's `rig loadgen burst`
// writes the figures of the bursts numbered from first (slash-separated: a node's path).
func RemoteBurstsDir(node string, first uint32) string {
	return path.Join(node, LoadgenDir, fmt.Sprintf("bursts-%d", first))
}

// RemoteBurstsGlob matches every RemoteBurstsDir's BurstStatsFile (for filepath.Glob from the
// run folder).
const RemoteBurstsGlob = "*/" + LoadgenDir + "/bursts-*/" + BurstStatsFile
