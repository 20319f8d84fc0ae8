// Package conformance is `rig engine check`: it starts the engine a playbook names, through the
// playbook's engine driver, as a cluster on the local target and checks it against the engine
// contract (engine/contract.go, docs/engines.md): the /status fields and their types, phases in
// order after launch and after kill -9 + relaunch, one snapshot index on every node, step-down
// moving the leader, equal state hashes after load, and every asked setting carried and in
// effect. Each check reports what it saw, so a failing engine learns what to fix.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rig-dev/rig/engine/driver"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
)

// Check names, in the order the suite runs them.
const (
	CheckStatusFields   = "status fields"
	CheckLaunchPhases   = "phases after launch"
	CheckOneLeader      = "one leader"
	CheckSettings       = "settings carried and in effect"
	CheckLoadHashes     = "state hashes after load"
	CheckBurst          = "a burst through the engine's ingress"
	CheckSnapshotIndex  = "snapshot at one index"
	CheckRelaunchPhases = "phases after kill -9 + relaunch"
	CheckStepDown       = "step-down moves the leader"
	CheckFinalHashes    = "state hashes at the end"
)

// Options configure a check.
type Options struct {
	Playbook     *playbooks.Playbook
	Dir          string // folder for the nodes (agent folders, engine logs); created
	FirstAddress string // local target's first loopback address
	Binary       string // the rig binary the agents run (default: this executable)
	Orders       int64  // preloaded before the hashes are compared (default 10,000)
	Timeout      time.Duration
	Logger       *slog.Logger
}

// Result is one check: passed or not, and what was seen.
type Result struct {
	Check   string `json:"check"`
	Pass    bool   `json:"pass"`
	Skipped bool   `json:"skipped,omitempty"` // not run: an earlier check left nothing to run it on
	Seen    string `json:"seen"`
}

// Failed lists the names of the checks that ran and failed.
func Failed(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if !r.Pass && !r.Skipped {
			out = append(out, r.Check)
		}
	}
	return out
}

// WriteTable prints the results as a table.
func WriteTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tSEEN")
	for _, r := range rs {
		res := "pass"
		switch {
		case r.Skipped:
			res = "skip"
		case !r.Pass:
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Check, res, r.Seen)
	}
	tw.Flush()
}

type suite struct {
	secret  string // the check's engine secret (engine.ClusterSecretEnv)
	o       Options
	cl      target.Cluster
	servers []inventory.Node
	cfgs    map[string]engine.Config
	since   map[string]uint64 // journal cursor per node
	out     []Result
}

// Run runs the suite. The error is for a suite that could not run at all (no cluster); an
// engine that fails checks gives results with Pass false and no error.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Playbook == nil {
		return nil, errors.New("conformance: no playbook")
	}
	if o.Playbook.Cluster.Servers < 3 {
		return nil, fmt.Errorf("conformance: the playbook has %d servers; the suite kills one and moves the leader, so it needs at least 3", o.Playbook.Cluster.Servers)
	}
	if o.Orders <= 0 {
		o.Orders = 10_000
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	// The check is the run that holds the addresses, their agents' leases and disks: a run
	// refused beside it is told which check, and where.
	cl, err := startLocal(ctx, local.Options{FirstAddress: o.FirstAddress}, target.StartOptions{
		RunDir: dir, Run: checkID(dir), Servers: o.Playbook.Cluster.Servers, Clients: 1, Binary: o.Binary, Logger: o.Logger,
		NoRunQueue: true, // the check samples no scheduler
	})
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	defer cl.Stop(context.WithoutCancel(ctx))
	secret, err := engine.NewClusterSecret()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	s := &suite{o: o, cl: cl, servers: cl.Inventory().Servers(), cfgs: map[string]engine.Config{}, since: map[string]uint64{}, secret: secret}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	s.run(ctx)
	return s.out, nil
}

// startLocal starts the check's cluster on the local target (a test sees what it is asked).
var startLocal = func(ctx context.Context, lo local.Options, so target.StartOptions) (target.Cluster, error) {
	return local.New(lo).Start(ctx, so)
}

// checkID names a check by its folder (rig check makes DATE-check-PLAYBOOK), as a run is named
// by its run folder; it goes where run ids go (locks, leases), so it keeps their grammar.
func checkID(dir string) string {
	if id := filepath.Base(dir); inventory.CheckName("check", id) == nil {
		return id
	}
	return "check"
}

func (s *suite) add(check string, pass bool, format string, args ...any) {
	s.out = append(s.out, Result{Check: check, Pass: pass, Seen: fmt.Sprintf(format, args...)})
}

func (s *suite) agent(n string) *agent.Client { return s.cl.Agent(n) }

func (s *suite) start(ctx context.Context) error {
	for _, n := range s.servers {
		if st, err := s.agent(n.Name).EngineStatus(ctx); err == nil {
			s.since[n.Name] = st.LastSeq
		}
		cfg := launch.EngineConfig(s.servers, n, filepath.Join("data", "check"))
		s.cfgs[n.Name] = cfg
		req, err := launch.StartRequest(s.o.Playbook, cfg, s.secret)
		if err != nil {
			return fmt.Errorf("conformance: start engine on %s: %w", n.Name, err)
		}
		if err := s.agent(n.Name).StartEngine(ctx, req); err != nil {
			return fmt.Errorf("conformance: start engine on %s: %w", n.Name, err)
		}
	}
	return nil
}

func (s *suite) run(ctx context.Context) {
	launched := s.launchPhases(ctx)
	s.statusFields(ctx)
	if !launched {
		// A setting that keeps the cluster from electing is named here rather than left behind
		// a phase timeout.
		s.settings(ctx)
		s.skip(CheckOneLeader, CheckLoadHashes, CheckBurst, CheckSnapshotIndex, CheckRelaunchPhases, CheckStepDown, CheckFinalHashes)
		return
	}
	leader := s.oneLeader(ctx)
	s.settings(ctx)
	s.hashes(ctx, CheckLoadHashes, true)
	s.burst(ctx)
	s.snapshot(ctx, leader)
	s.relaunch(ctx, leader)
	s.stepDown(ctx)
	s.hashes(ctx, CheckFinalHashes, false)
}

func (s *suite) skip(checks ...string) {
	for _, c := range checks {
		s.out = append(s.out, Result{Check: c, Skipped: true, Seen: "not run: no node reached ready after launch"})
	}
}

// --- status fields ---

// statusTypes are the JSON types of the fields GET /status must have (engine.Status).
var statusTypes = map[string]string{
	"node": "string", "role": "string", "phase": "string", "term": "number", "commit_index": "number",
	"applied_index": "number", "last_log_index": "number", "launch_log_index": "number", "orders": "number",
	"state_hash": "string", "pid": "number", "started": "string", "now": "string", "config": "object",
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func (s *suite) statusFields(ctx context.Context) {
	var bad []string
	unsupported := map[string]bool{}
	for _, n := range s.servers {
		raw, err := s.agent(n.Name).EngineStatusRaw(ctx, true)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			bad = append(bad, fmt.Sprintf("%s: not a JSON object: %v", n.Name, err))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(statusTypes)) {
			v, ok := m[k]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s: %s missing", n.Name, k))
			case jsonType(v) != statusTypes[k]:
				bad = append(bad, fmt.Sprintf("%s: %s is %s %v, want %s", n.Name, k, jsonType(v), v, statusTypes[k]))
			}
		}
		var st engine.Status
		if json.Unmarshal(raw, &st) == nil {
			if !validRole(st.Role) {
				bad = append(bad, fmt.Sprintf("%s: role %q, want leader, follower or candidate", n.Name, st.Role))
			}
			if _, ok := rank[st.Phase]; !ok {
				bad = append(bad, fmt.Sprintf("%s: phase %q, want one of %s", n.Name, st.Phase, strings.Join(engine.Phases, ", ")))
			}
			// An engine that hashes its snapshots has no hash before its first one.
			if st.StateHash == "" && st.Supports(engine.UnsupportedStateHash) {
				bad = append(bad, fmt.Sprintf("%s: state_hash empty with ?hash=1", n.Name))
			}
			for _, u := range st.Unsupported {
				unsupported[u] = true
			}
			if node, _ := st.Config["node"].(string); node != n.Name {
				bad = append(bad, fmt.Sprintf("%s: config.node %q", n.Name, node))
			}
		}
	}
	if len(bad) > 0 {
		s.add(CheckStatusFields, false, "%s", strings.Join(bad, "; "))
		return
	}
	s.add(CheckStatusFields, true, "%d fields with their types on %d nodes%s", len(statusTypes), len(s.servers), notSupported(unsupported))
}

// notSupported names what the engine says it does not provide (engine.Status Unsupported), so a
// zero it reports there is not read as a value.
func notSupported(u map[string]bool) string {
	if len(u) == 0 {
		return ""
	}
	return "; not supported by the engine: " + strings.Join(slices.Sorted(maps.Keys(u)), ", ")
}

func validRole(r string) bool {
	return r == engine.RoleLeader || r == engine.RoleFollower || r == engine.RoleCandidate
}

// --- phases ---

var rank = func() map[string]int {
	m := map[string]int{}
	for i, p := range engine.Phases {
		m[p] = i
	}
	return m
}()

// phases follows one node's phase transitions of launch number launch, from journal cursor since,
// until ready (or the timeout) and says whether they went in contract order; it returns the cursor
// it reached.
func (s *suite) phases(ctx context.Context, node string, launch int, since uint64) (seen []string, cursor uint64, ok bool, why string) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	cursor = since
	for {
		trs, err := s.agent(node).Transitions(ctx, cursor, time.Second)
		if err != nil {
			return seen, cursor, false, fmt.Sprintf("no ready within %v (%v)", s.o.Timeout, err)
		}
		for _, tr := range trs {
			cursor = tr.Seq
			if tr.Kind != rundir.TransPhase || tr.Launch != launch || tr.To == rundir.PhaseDown {
				continue
			}
			r, known := rank[tr.To]
			if !known {
				return append(seen, tr.To), cursor, false, fmt.Sprintf("unknown phase %q", tr.To)
			}
			if len(seen) > 0 && r < rank[seen[len(seen)-1]] {
				return append(seen, tr.To), cursor, false, fmt.Sprintf("%s after %s", tr.To, seen[len(seen)-1])
			}
			seen = append(seen, tr.To)
			if tr.To == engine.PhaseReady {
				return seen, cursor, true, ""
			}
		}
	}
}

// settingsPoll is how often the launch wait compares the settings in effect with those asked. A
// status is cheap; a wrong-unit setting that keeps a cluster from electing is named within it.
const settingsPoll = 250 * time.Millisecond

// launchPhases follows every node's phases at once, as `rig run` waits for readiness, and compares
// the settings in effect on every status meanwhile: a setting that keeps the cluster from electing
// (a timeout in the wrong unit) ends the wait at once, and the settings check names it, instead
// of a phase timeout per node, one after another.
func (s *suite) launchPhases(ctx context.Context) bool {
	type result struct {
		seen   []string
		cursor uint64
		ok     bool
		why    string
	}
	wait, stop := context.WithCancel(ctx)
	defer stop()
	results := make([]result, len(s.servers))
	var wg sync.WaitGroup
	for i, n := range s.servers {
		wg.Go(func() {
			r := &results[i]
			r.seen, r.cursor, r.ok, r.why = s.phases(wait, n.Name, 1, s.since[n.Name])
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	badSetting := ""
	tick := time.NewTicker(settingsPoll)
	defer tick.Stop()
watch:
	for {
		select {
		case <-done:
			break watch
		case <-tick.C:
			if bad := s.earlySettingErrors(wait); len(bad) > 0 {
				badSetting = bad[0]
				stop()
				<-done
				break watch
			}
		}
	}
	var lines []string
	pass, anyReady := true, false
	for i, n := range s.servers {
		r := results[i]
		s.since[n.Name] = r.cursor
		line := n.Name + ": " + strings.Join(r.seen, " → ")
		switch {
		case r.ok:
			anyReady = true
		case badSetting != "":
			pass = false
			line += " (stopped waiting: a setting is not in effect)"
		default:
			pass = false
			line += " (" + r.why + ")"
		}
		lines = append(lines, line)
	}
	if badSetting != "" {
		lines = append(lines, "stopped on "+badSetting)
	}
	s.add(CheckLaunchPhases, pass, "%s", strings.Join(lines, "; "))
	return anyReady && pass
}

// --- roles ---

func (s *suite) statuses(ctx context.Context) map[string]engine.Status {
	out := map[string]engine.Status{}
	for _, n := range s.servers {
		if st, err := s.agent(n.Name).EngineStatusHash(ctx); err == nil {
			out[n.Name] = st
		}
	}
	return out
}

// leaders waits until exactly one node leads and every other follows it; it returns the leader
// ("" on timeout) and the roles last seen.
func (s *suite) leaders(ctx context.Context, not string) (string, string) {
	deadline := time.Now().Add(s.o.Timeout)
	var roles []string
	for {
		sts := s.statuses(ctx)
		roles = roles[:0]
		var leads []string
		for _, n := range s.servers {
			st, ok := sts[n.Name]
			if !ok {
				roles = append(roles, n.Name+"=?")
				continue
			}
			roles = append(roles, fmt.Sprintf("%s=%s (term %d)", n.Name, st.Role, st.Term))
			if st.Role == engine.RoleLeader {
				leads = append(leads, n.Name)
			}
		}
		if len(leads) == 1 && leads[0] != not {
			agree := true
			for _, st := range sts {
				agree = agree && (st.Role == engine.RoleLeader || st.Leader == leads[0] || st.Leader == "")
			}
			if agree && len(sts) == len(s.servers) {
				return leads[0], strings.Join(roles, ", ")
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", strings.Join(roles, ", ")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) oneLeader(ctx context.Context) string {
	leader, roles := s.leaders(ctx, "")
	s.add(CheckOneLeader, leader != "", "%s", roles)
	return leader
}

// --- settings ---

func (s *suite) settings(ctx context.Context) {
	asked := s.o.Playbook.Engine.Settings()
	if bad := s.settingErrors(ctx); len(bad) > 0 {
		s.add(CheckSettings, false, "%s", strings.Join(bad, "; "))
		return
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(asked)) {
		kv = append(kv, k+"="+asked[k])
	}
	how := "in effect"
	if _, ok := s.o.Playbook.Engine.EngineDriver().(driver.Templater); ok {
		how = "carried (/proc) and in effect"
	}
	s.add(CheckSettings, true, "%s %s on every node", strings.Join(kv, " "), how)
}

// settingErrors compares every asked setting with the one in effect on every node (the check
// `rig run` makes before load), naming the node.
func (s *suite) settingErrors(ctx context.Context) []string {
	var bad []string
	for _, n := range s.servers {
		state, err := s.agent(n.Name).EngineStatus(ctx)
		if err != nil || state.Status == nil {
			bad = append(bad, fmt.Sprintf("%s: no status (%v)", n.Name, err))
			continue
		}
		for _, e := range launch.SettingErrors(s.o.Playbook, state, *state.Status) {
			bad = append(bad, n.Name+": "+e.Error())
		}
	}
	return bad
}

// earlySettingErrors is launch.EarlyEffectErrors on every node that answers, as `rig run` checks
// while it waits for readiness.
func (s *suite) earlySettingErrors(ctx context.Context) []string {
	var bad []string
	for _, n := range s.servers {
		if st, err := s.agent(n.Name).EngineStatus(ctx); err == nil && st.Status != nil {
			for _, e := range launch.EarlyEffectErrors(s.o.Playbook, *st.Status) {
				bad = append(bad, n.Name+": "+e.Error())
			}
		}
	}
	return bad
}

// --- load and hashes ---

func (s *suite) clientAddrs() []string {
	var out []string
	for _, n := range s.servers {
		out = append(out, s.cfgs[n.Name].ClientAddr)
	}
	return out
}

// hashes (after a preload when load is set) waits for every node to apply the same index and
// compares their state hashes.
func (s *suite) hashes(ctx context.Context, check string, load bool) {
	if load {
		lctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		st, err := loadgen.Preload(lctx, loadgen.PreloadOptions{BookShape: loadspec.BookShape{Orders: s.o.Orders, Instruments: 4}, Servers: s.clientAddrs(), Logger: s.o.Logger})
		cancel()
		if err != nil {
			s.add(check, false, "preload of %d orders through the client protocol (docs/wire.md): %v", s.o.Orders, err)
			return
		}
		if st.Orders != s.o.Orders {
			s.add(check, false, "preload: %d of %d orders acknowledged", st.Orders, s.o.Orders)
			return
		}
	}
	if ok, seen := s.snapshotForHashes(ctx); !ok {
		s.add(check, false, "%s", seen)
		return
	}
	var minOrders int64
	if load {
		minOrders = s.o.Orders
	}
	names := make([]string, len(s.servers))
	for i, n := range s.servers {
		names[i] = n.Name
	}
	deadline := time.Now().Add(s.o.Timeout)
	for {
		met, pass, detail := compareHashes(names, s.statuses(ctx), minOrders)
		if met {
			s.add(check, pass, "%s", detail)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.add(check, false, "applied indexes never met: %s", detail)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// compareHashes compares the nodes' state hashes once every node has one of the same log
// position (met), and says what each node reported. pass wants one non-empty hash and at least
// minOrders resting orders where the engine counts them.
func compareHashes(names []string, sts map[string]engine.Status, minOrders int64) (met, pass bool, detail string) {
	var idx []string
	positions := map[uint64]bool{}
	hashes := map[string]bool{}
	ofSnapshot := false
	for _, n := range names {
		st := sts[n]
		hashes[st.StateHash] = true
		// A snapshot's hash is of the index every node took it at, not of the applied one.
		positions[st.StateHashPosition()] = true
		switch {
		case st.StateHashOfSnapshot() && st.StateHash == "":
			idx = append(idx, n+" no snapshot hashed yet")
			continue
		case st.StateHashOfSnapshot():
			ofSnapshot = true
			idx = append(idx, fmt.Sprintf("%s snapshot bytes at %d hash %s", n, st.StateHashPosition(), st.StateHash))
			continue
		}
		orders := engine.NotSupported
		if st.Supports(engine.UnsupportedOrders) {
			orders = strconv.Itoa(st.Orders)
		}
		idx = append(idx, fmt.Sprintf("%s state at %d orders %s hash %s", n, st.AppliedIndex, orders, orNone(st.StateHash)))
	}
	if len(positions) != 1 || len(sts) != len(names) {
		return false, false, strings.Join(idx, "; ")
	}
	pass = len(hashes) == 1 && !hashes[""]
	if first := sts[names[0]]; minOrders > 0 && first.Supports(engine.UnsupportedOrders) {
		pass = pass && first.Orders >= int(minOrders)
	}
	if len(hashes) > 1 && !hashes[""] && ofSnapshot {
		idx = append(idx, engine.SnapshotHashNote)
	}
	return true, pass, strings.Join(idx, "; ")
}

func orNone(hash string) string {
	if hash == "" {
		return "(none)"
	}
	return hash
}

// snapshotForHashes has the leader snapshot when the engine hashes snapshots rather than its live
// state (engine.UnsupportedStateHash), so every node has a hash at one index to compare; it
// says what failed otherwise.
func (s *suite) snapshotForHashes(ctx context.Context) (bool, string) {
	live := true
	for _, st := range s.statuses(ctx) {
		live = live && st.Supports(engine.UnsupportedStateHash)
	}
	if live {
		return true, ""
	}
	leader, roles := s.leaders(ctx, "")
	if leader == "" {
		return false, "the engine hashes snapshots, and no single leader to take one: " + roles
	}
	// Right after a step-down the new leader may still be settling its cluster (Aeron: the control
	// toggle is not neutral yet) and answers 409: the same snapshot passes a moment later.
	deadline := time.Now().Add(s.o.Timeout)
	b, err := s.agent(leader).EngineAdmin(ctx, engine.AdminSnapshot)
	for errors.Is(err, agent.ErrConflict) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		b, err = s.agent(leader).EngineAdmin(ctx, engine.AdminSnapshot)
	}
	var snap engine.Snapshot
	if err == nil {
		err = json.Unmarshal(b, &snap)
	}
	if err != nil || snap.Index == 0 {
		return false, fmt.Sprintf("the engine hashes snapshots: POST /snapshot on %s: %v %s", leader, err, strings.TrimSpace(string(b)))
	}
	for {
		sts := s.statuses(ctx)
		var seen []string
		all := len(sts) == len(s.servers)
		for _, n := range s.servers {
			st := sts[n.Name]
			seen = append(seen, fmt.Sprintf("%s hash at %d", n.Name, st.StateHashIndex))
			all = all && st.StateHashIndex >= snap.Index
		}
		if all {
			return true, ""
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, fmt.Sprintf("the engine hashes snapshots; leader %s's at %d, nodes: %s", leader, snap.Index, strings.Join(seen, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- snapshot ---

func (s *suite) snapshot(ctx context.Context, leader string) {
	if leader == "" {
		s.add(CheckSnapshotIndex, false, "not run: no leader")
		return
	}
	b, err := s.agent(leader).EngineAdmin(ctx, engine.AdminSnapshot)
	var snap engine.Snapshot
	if err == nil {
		err = json.Unmarshal(b, &snap)
	}
	if err != nil || snap.Index == 0 {
		s.add(CheckSnapshotIndex, false, "POST /snapshot on %s: %v %s", leader, err, strings.TrimSpace(string(b)))
		return
	}
	deadline := time.Now().Add(s.o.Timeout)
	for {
		sts := s.statuses(ctx)
		var seen []string
		all := len(sts) == len(s.servers)
		for _, n := range s.servers {
			ls := sts[n.Name].LastSnapshot
			if ls == nil {
				seen = append(seen, n.Name+" none")
				all = false
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %d", n.Name, ls.Index))
			all = all && ls.Index == snap.Index
		}
		if all {
			s.add(CheckSnapshotIndex, true, "leader's snapshot at %d; every node: %s", snap.Index, strings.Join(seen, ", "))
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.add(CheckSnapshotIndex, false, "leader's snapshot at %d; nodes: %s", snap.Index, strings.Join(seen, ", "))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- kill -9 and relaunch ---

func (s *suite) relaunch(ctx context.Context, leader string) {
	var node string
	for _, n := range s.servers {
		if n.Name != leader {
			node = n.Name
			break
		}
	}
	a := s.agent(node)
	before, err := a.EngineStatus(ctx)
	if err == nil {
		err = a.Signal(ctx, "KILL")
	}
	if err != nil {
		s.add(CheckRelaunchPhases, false, "kill -9 %s: %v", node, err)
		return
	}
	deadline := time.Now().Add(s.o.Timeout)
	for {
		st, err := a.EngineStatus(ctx)
		if err == nil && !st.Running {
			break
		}
		if time.Now().After(deadline) {
			s.add(CheckRelaunchPhases, false, "%s still running %v after SIGKILL", node, s.o.Timeout)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Relaunch(ctx); err != nil {
		s.add(CheckRelaunchPhases, false, "relaunch %s: %v", node, err)
		return
	}
	seen, cursor, ok, why := s.phases(ctx, node, len(before.Launches)+1, s.since[node])
	s.since[node] = cursor
	line := node + ": " + strings.Join(seen, " → ")
	if !ok {
		line += " (" + why + ")"
	}
	if ok {
		if st, err := a.EngineStatusHash(ctx); err == nil && st.LastSnapshot != nil && st.LastSnapshot.Restored {
			line += fmt.Sprintf("; restored its snapshot at %d", st.LastSnapshot.Index)
		}
		// The relaunched process must hold and apply the settings as the first one did.
		if state, err := a.EngineStatus(ctx); err == nil && state.Status != nil {
			for _, e := range launch.SettingErrors(s.o.Playbook, state, *state.Status) {
				ok = false
				line += "; after the relaunch " + e.Error()
			}
		}
	}
	s.add(CheckRelaunchPhases, ok, "%s", line)
}

// --- step-down ---

func (s *suite) stepDown(ctx context.Context) {
	old, _ := s.leaders(ctx, "")
	if old == "" {
		s.add(CheckStepDown, false, "no single leader to step down")
		return
	}
	how := ""
	if st, err := s.agent(old).EngineStatus(ctx); err == nil && st.Status != nil && st.Status.StepDown == engine.StepDownRelaunch {
		stopped, err := s.stopAndRelaunch(ctx, old)
		if err != nil {
			s.add(CheckStepDown, false, "%v", err)
			return
		}
		how = fmt.Sprintf(" (graceful stop in %s, relaunched)", stopped.Round(time.Millisecond))
	} else if b, err := s.agent(old).EngineAdmin(ctx, engine.AdminStepDown); err != nil {
		s.add(CheckStepDown, false, "POST /step-down on %s: %v %s", old, err, strings.TrimSpace(string(b)))
		return
	}
	now, roles := s.leaders(ctx, old)
	if now == "" {
		s.add(CheckStepDown, false, "%s stepped down, no other leader within %v: %s", old, s.o.Timeout, roles)
		return
	}
	s.add(CheckStepDown, true, "%s → %s%s", old, now, how)
}

// stopAndRelaunch steps node down as an engine with engine.StepDownRelaunch asks: SIGTERM, its
// exit within engine.StepDownStopBound (else it is killed and named), a relaunch at once.
func (s *suite) stopAndRelaunch(ctx context.Context, node string) (time.Duration, error) {
	a := s.agent(node)
	start := time.Now()
	if err := a.Signal(ctx, "TERM"); err != nil {
		return 0, fmt.Errorf("SIGTERM %s: %v", node, err)
	}
	for {
		st, err := a.EngineStatus(ctx)
		if err == nil && !st.Running {
			// 143: a JVM's exit on SIGTERM once its shutdown hooks are done.
			if e := st.Exit; e != nil && e.Code != 0 && e.Code != 128+15 && e.Signal != "TERM" {
				return 0, fmt.Errorf("%s exited with code %d on SIGTERM, not from a graceful stop: %s", node, e.Code, e.LogTail)
			}
			break
		}
		if time.Since(start) > engine.StepDownStopBound || ctx.Err() != nil {
			a.Signal(ctx, "KILL")
			return 0, fmt.Errorf("%s did not stop within %s of SIGTERM: its engine cannot be stopped gracefully (killed; its engine.log names what it waited for)", node, engine.StepDownStopBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := time.Since(start)
	if err := a.Relaunch(ctx); err != nil {
		return 0, fmt.Errorf("relaunch %s after its graceful stop: %v", node, err)
	}
	return stopped, nil
}
