package playbooks

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/internal/units"
)

// issue is a whole-playbook rule that does not hold. path is where to point; deps are the
// other fields the rule read, so a rule built on a value that failed to parse stays quiet.
type issue struct {
	path string
	rule string
	deps []string
	msg  string
}

// check applies the rules that need more than one field. It sees one resolved combination.
func check(p *Playbook) []issue {
	var out []issue
	add := func(path, rule string, deps []string, format string, args ...any) {
		out = append(out, issue{path: path, rule: rule, deps: deps, msg: fmt.Sprintf(format, args...)})
	}
	end := p.Duration

	if p.Warmup >= end {
		add("warmup", "warmup", []string{"duration"},
			"%s is not shorter than the run (duration %s); want a warm-up that leaves time to measure", units.FormatDuration(p.Warmup), units.FormatDuration(end))
	}
	checkDriver(p, add)
	checkDisk(p.Disk, add)
	checkPlacement(p, add)
	if bg, ok := tuningInt(p, "vm.dirty_background_ratio"); ok {
		if fg, ok := tuningInt(p, "vm.dirty_ratio"); ok && bg >= fg {
			add("tuning.vm.dirty_background_ratio", "dirty-ratios", []string{"tuning.vm.dirty_ratio"},
				"%d is not below vm.dirty_ratio (%d); the kernel would quietly use half of vm.dirty_ratio instead", bg, fg)
		}
	}

	// What a kill leaves down, by the nominal schedule (a wait_for can only delay later actions).
	type down struct {
		idx          int
		node         string
		from, until  time.Duration
		relaunchedAt bool
	}
	var downs []down
	needMajority := false
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
		nodeMissing := false
		for _, pr := range a.Spec.Check(actions.Context{Servers: p.Cluster.Servers, Clients: p.Cluster.Clients, At: a.At, End: end}) {
			deps := make([]string, len(pr.Deps))
			for k, d := range pr.Deps {
				deps[k] = d
				if key, own := strings.CutPrefix(d, "@"); own {
					deps[k] = entryPath(key)
				}
			}
			add(entryPath(pr.Key), pr.Rule, deps, "%s", pr.Msg)
			nodeMissing = nodeMissing || pr.Rule == "node"
		}
		if dn, ok := a.Spec.(actions.Downer); ok && !nodeMissing {
			node, relaunch := dn.Down()
			if node == "" {
				continue
			}
			np := body + ".node"
			d := down{idx: i, node: node, from: a.At, until: -1}
			if relaunch > 0 {
				d.until, d.relaunchedAt = a.At+relaunch, true
			}
			var still []down
			again := false
			for _, o := range downs {
				if o.from > a.At || (o.until >= 0 && o.until <= a.At) {
					continue
				}
				// Roles resolve to a running node when the action runs, so only node-N can hit a
				// node that is already down.
				if o.node == node && actions.IsNodeN(o.node) {
					add(np, "already-down", []string{fmt.Sprintf("timeline[%d]", o.idx)},
						"%s is still down at %s (timeline[%d] killed it at %s%s); kill it again after it is relaunched",
						node, units.FormatDuration(a.At), o.idx, units.FormatDuration(o.from), relaunchNote(o.until))
					again = true
				}
				still = append(still, o)
			}
			if again {
				continue
			}
			if maxDown := (p.Cluster.Servers - 1) / 2; p.Cluster.Servers >= 3 && len(still)+1 > maxDown {
				names := make([]string, len(still))
				for k, o := range still {
					names[k] = fmt.Sprintf("timeline[%d] %s", o.idx, o.node)
				}
				add(body, "majority", []string{"cluster.servers"},
					"leaves %d of %d servers down at %s (still down: %s); at most %d may be down for the cluster to keep a majority and serve",
					len(still)+1, p.Cluster.Servers, units.FormatDuration(a.At), strings.Join(names, ", "), maxDown)
			}
			downs = append(downs, d)
		}
		if aw, ok := a.Spec.(actions.Awaiter); ok && !nodeMissing {
			node, phase := aw.Awaits()
			for _, o := range downs {
				if o.relaunchedAt || node != "" && (node != o.node || !actions.IsNodeN(o.node)) {
					continue // it comes back, or the wait is for another node (a role resolves to a running one)
				}
				target := "every server"
				if node != "" {
					target = node
				}
				add(body, "wait-never", []string{fmt.Sprintf("timeline[%d]", o.idx)},
					"waits for %s to be %s, but timeline[%d] kills %s without relaunch_after, so it can only time out",
					target, phase, o.idx, o.node)
				break
			}
		}
	}
	return out
}

func relaunchNote(until time.Duration) string {
	if until < 0 {
		return ", with no relaunch"
	}
	return ", relaunched at " + units.FormatDuration(until)
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
