// Package rundir owns the formats of a run folder: every file a run writes that something reads
// back. Writers (the runner, agent/supervise, agent/sample, loadgen) and readers (results, the
// runner) import these types and codecs instead of keeping their own copies of the shapes.
//
//	manifest.json             Manifest
//	events.jsonl              Event, one JSON line each
//	<node>/status.json        engine.Status at the end of the run
//	<node>/transitions.jsonl  Transition, one JSON line each (the agent's journal)
//	<node>/samples/*.ndjson   Sample, one JSON line each (the agent's OS sampler)
//	loadgen/probes.bin        Probe records (ProbeWriter, ReadProbes)
//	loadgen/bursts.bin        Probe records, one per burst message
//	loadgen/stats.json        ProbeStats
//	loadgen/preload.json      PreloadStats
//
// It imports only rig's contract packages whose shapes these files embed (engine, inventory and
// the agent's answers: facts, tune, disk), so every writer can import it.
package rundir

// File and folder names inside a run folder (and inside a node's or the load generator's folder).
const (
	ManifestFile    = "manifest.json"
	EventsFile      = "events.jsonl"
	StatusFile      = "status.json"
	TransitionsFile = "transitions.jsonl"
	SamplesDir      = "samples"
	LoadgenDir      = "loadgen"
	ProbesFile      = "probes.bin"
	BurstsFile      = "bursts.bin"
	ProbesHlogFile  = "probes.hlog"
	StatsFile       = "stats.json"
	PreloadFile     = "preload.json"
)
