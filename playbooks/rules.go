package playbooks

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/internal/units"
)

// ruleBreach is a whole-playbook rule that does not hold. path is where to point; deps are the
// other fields the rule read, so a rule built on a value that failed to parse stays quiet.
type ruleBreach struct {
	path string
	rule string
	deps []string
	msg  string
}

// crossFieldRules applies the rules that need more than one field. It sees one resolved combination.
func crossFieldRules(p *Playbook) []ruleBreach {
	var out []ruleBreach
	add := func(path, rule string, deps []string, format string, args ...any) {
		out = append(out, ruleBreach{path: path, rule: rule, deps: deps, msg: fmt.Sprintf(format, args...)})
	}
	end := p.Duration

	if p.Warmup >= end {
		add("warmup", "warmup", []string{"duration"},
			"%s is not shorter than the run (duration %s); want a warm-up that leaves time to measure", units.FormatDuration(p.Warmup), units.FormatDuration(end))
	}
	checkDriver(p, add)
	checkDisk(p.Disk, add)
	checkDiskModels(p, add)
	checkPlacement(p, add)
	if bg, ok := tuningInt(p, "vm.dirty_background_ratio"); ok {
		if fg, ok := tuningInt(p, "vm.dirty_ratio"); ok && bg >= fg {
			add("tuning.vm.dirty_background_ratio", "dirty-ratios", []string{"tuning.vm.dirty_ratio"},
				"%d is not below vm.dirty_ratio (%d); the kernel would quietly use half of vm.dirty_ratio instead", bg, fg)
		}
	}

	needMajority := false
	nodeMissing := map[int]bool{}
	for i, a := range p.Timeline {
		path := fmt.Sprintf("timeline[%d]", i)
		at := path + ".at"
		if i > 0 && a.At < p.Timeline[i-1].At {
			add(at, "order", []string{fmt.Sprintf("timeline[%d].at", i-1)},
				"%s is before the previous action (timeline[%d] at %s); actions run in list order, so list them by offset",
				units.FormatDuration(a.At), i-1, units.FormatDuration(p.Timeline[i-1].At))
		}
		if a.At >= end {
			add(at, "after-end", []string{"duration"},
				"%s is at or after the end of the run (duration %s); want an offset below %s", units.FormatDuration(a.At), units.FormatDuration(end), units.FormatDuration(end))
		}
		if a.Spec == nil {
			nodeMissing[i] = true
			continue
		}
		body := path + "." + a.Kind
		if d, ok := a.Spec.(actions.Disruptor); ok {
			if !needMajority && p.Cluster.Servers < 3 {
				add(body, "servers<3", []string{"cluster.servers"},
					"the timeline %s, which needs cluster.servers >= 3 (it is %d): a smaller cluster cannot lose a node and keep serving",
					d.Disrupts(), p.Cluster.Servers)
			}
			needMajority = true
		}
		if c, ok := a.Spec.(actions.EngineCaller); ok && !p.Engine.OffersAdmin(c.Calls()) {
			add(body, "engine-lacks-admin", []string{"engine.driver", "engine.admin_gc"},
				"calls POST %s on the engine, which the %s engine does not offer; for a command-driven engine that answers it (docs/engines.md), say so with engine.admin_gc: true",
				c.Calls(), p.Engine.DriverName())
		}
		// The entry's own rules; its keys' paths are under its body, "at" is the entry's.
		entryPath := func(key string) string {
			switch key {
			case "":
				return body
			case "at":
				return at
			}
			return body + "." + key
		}
		for _, pr := range a.Spec.Check(entryContext(p, a)) {
			deps := make([]string, len(pr.Deps))
			for k, d := range pr.Deps {
				deps[k] = d
				if key, own := strings.CutPrefix(d, "@"); own {
					deps[k] = entryPath(key)
				}
			}
			add(entryPath(pr.Key), pr.Rule, deps, "%s", pr.Msg)
			nodeMissing[i] = nodeMissing[i] || pr.Rule == "node"
		}
	}

	// The timeline's state (walkDowns): a node that is down cannot be taken down again, nor acted
	// on where the entry needs what is down of it, nor taken down while a lasting entry needs it;
	// with no majority up nothing needs the leader; a kill or a partition may not leave a
	// majority down, and nothing may leave every server down unless the playbook allows it.
	spans := walkDowns(p, func(i int) bool { return nodeMissing[i] }, func(s downStep) {
		a := p.Timeline[s.idx]
		body := fmt.Sprintf("timeline[%d].%s", s.idx, a.Kind)
		key := body
		if k := downKey(a.Spec); k != "" {
			key += "." + k
		}
		// The rules read the node references of this entry and of those still down: one that
		// failed to parse holds its default, so a rule on it stays quiet.
		deps := []string{"cluster.servers", key}
		for _, o := range s.still {
			b := p.Timeline[o.idx]
			deps = append(deps, fmt.Sprintf("timeline[%d].%s.%s", o.idx, b.Kind, downKey(b.Spec)))
		}
		for _, o := range s.again {
			if s.down != nil {
				add(key, "already-down", []string{fmt.Sprintf("timeline[%d]", o.idx)},
					"%s is still down at %s (timeline[%d] %s took it down at %s%s); want an offset after it is back, or another node",
					o.node, units.FormatDuration(s.at), o.idx, o.kind, units.FormatDuration(o.from), relaunchNote(o.until))
				continue
			}
			add(key, "node-down", []string{fmt.Sprintf("timeline[%d]", o.idx)},
				"%s's %s is down at %s (timeline[%d] %s took it down at %s%s), and %s needs its %s up; want an offset after it is back, or another node",
				o.node, o.layer, units.FormatDuration(s.at), o.idx, o.kind, units.FormatDuration(o.from), relaunchNote(o.until), a.Kind, s.touch.Needs)
		}
		for _, h := range s.held {
			add(key, "held", []string{fmt.Sprintf("timeline[%d]", h.idx)},
				"takes %s's %s down at %s, while timeline[%d] %s (from %s until %s) needs it up; want an offset at %s or later, or another node",
				h.node, s.down.Takes, units.FormatDuration(s.at), h.idx, h.kind, units.FormatDuration(h.from), units.FormatDuration(h.until), units.FormatDuration(h.until))
		}
		if len(s.again) > 0 || len(s.held) > 0 {
			return
		}
		n, servers := s.count(), p.Cluster.Servers
		if servers < 3 {
			return // servers<3 above says it
		}
		// With a majority down no leader can be elected: what acts on the leader fails when the
		// entry runs, and a role resolves to no node (only node-N names one).
		if len(s.still) > (servers-1)/2 {
			if s.touch.Leader {
				add(body, "no-leader", deps,
					"acts on the leader, but at %s %d of %d servers are down (%s), so none can be elected; want an offset after a majority is back (with a wait_for: {phase: ready} before it)",
					units.FormatDuration(s.at), len(s.still), servers, describeSpans(s.still))
				return
			}
			for _, ref := range s.touch.Nodes {
				if !actions.IsNodeN(ref) {
					add(key, "role-without-leader", deps,
						"%q is a role, but at %s %d of %d servers are down (%s), so there is no leader to resolve it by; want node-N",
						ref, units.FormatDuration(s.at), len(s.still), servers, describeSpans(s.still))
					return
				}
			}
		}
		if s.down == nil {
			return
		}
		still := describeSpans(s.still)
		if still == "" {
			still = "none before it"
		}
		if n >= servers {
			if !p.AllowAllDown {
				add(body, "all-down", append(deps, "allow_all_down"),
					"leaves all %d servers down at %s (still down: %s): nothing serves until one is back; if that is the experiment, say so with allow_all_down: true (top level)",
					servers, units.FormatDuration(s.at), still)
			}
			return
		}
		if maxDown := (servers - 1) / 2; n > maxDown && !s.down.Majority {
			add(body, "majority", deps,
				"leaves %d of %d servers down at %s (still down: %s); at most %d may be down for the cluster to keep a majority and serve",
				n, servers, units.FormatDuration(s.at), still, maxDown)
		}
	})
	for i, a := range p.Timeline {
		aw, ok := a.Spec.(actions.Awaiter)
		if !ok || nodeMissing[i] {
			continue
		}
		node, phase := aw.Awaits()
		for _, o := range spans {
			if o.idx >= i || o.until >= 0 || node != "" && !o.sameNode(node) {
				continue // it comes back, or the wait is for another node (a role resolves to a running one)
			}
			target := "every server"
			if node != "" {
				target = node
			}
			add(fmt.Sprintf("timeline[%d].%s", i, a.Kind), "wait-never", []string{fmt.Sprintf("timeline[%d]", o.idx)},
				"waits for %s to be %s, but timeline[%d] %s takes %s down for the rest of the run, so it can only time out",
				target, phase, o.idx, o.kind, o.node)
			break
		}
	}
	return out
}

func relaunchNote(until time.Duration) string {
	if until < 0 {
		return ", for the rest of the run"
	}
	return ", back at " + units.FormatDuration(until)
}

// downKey is the key of an entry that names its nodes (node or nodes), where its problems point.
func downKey(s actions.Spec) string {
	for _, k := range []string{"node", "nodes"} {
		if _, ok := actions.FieldOf(s, k); ok {
			return k
		}
	}
	return ""
}

// entryContext is what an entry's Check and plan line see of the playbook.
func entryContext(p *Playbook, a Action) actions.Context {
	c := actions.Context{Servers: p.Cluster.Servers, Clients: p.Cluster.Clients, At: a.At, End: p.Duration, OwnClient: p.Engine.BurstClient() != nil}
	if !p.Placement.IsZero() {
		c.ZoneDelay = p.Placement.Between.Delay + p.Placement.Between.Jitter
	}
	return c
}

func tuningInt(p *Playbook, key string) (int64, bool) {
	for _, s := range p.Tuning {
		if s.Key == key {
			v, err := strconv.ParseInt(s.Value, 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
