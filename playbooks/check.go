package playbooks

import (
	"github.com/rig-dev/rig/internal/units"

	"fmt"
	"strconv"
	"strings"
	"time"
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
		switch a.Kind {
		case ActKill, ActStepDown:
			if !needMajority && p.Cluster.Servers < 3 {
				what := "kills a server"
				if a.Kind == ActStepDown {
					what = "steps the leader down"
				}
				add(path+"."+a.Kind, "servers<3", []string{"cluster.servers"},
					"the timeline %s, which needs cluster.servers >= 3 (it is %d): a smaller cluster cannot lose a node and keep serving",
					what, p.Cluster.Servers)
			}
			needMajority = true
		}
		switch a.Kind {
		case ActKill:
			if a.Kill == nil || a.Kill.Node == "" {
				continue
			}
			np := path + ".kill.node"
			if msg := nodeExists(a.Kill.Node, p.Cluster.Servers); msg != "" {
				add(np, "node", []string{"cluster.servers"}, "%s", msg)
				continue // a kill of no node takes nothing down
			}
			d := down{idx: i, node: a.Kill.Node, from: a.At, until: -1}
			if r := a.Kill.RelaunchAfter; r > 0 {
				d.until, d.relaunchedAt = a.At+r, true
				if a.At < end && a.At+r >= end {
					add(path+".kill.relaunch_after", "relaunch-after-end", []string{"duration", at},
						"the relaunch at %s (at %s + %s) is at or after the end of the run (duration %s); want the relaunch to happen inside the run",
						units.FormatDuration(a.At+r), units.FormatDuration(a.At), units.FormatDuration(r), units.FormatDuration(end))
				}
			}
			var still []down
			again := false
			for _, o := range downs {
				if o.from > a.At || (o.until >= 0 && o.until <= a.At) {
					continue
				}
				// Roles resolve to a running node when the action runs, so only node-N can hit a
				// node that is already down.
				if o.node == a.Kill.Node && nodeNRe.MatchString(o.node) {
					add(np, "already-down", []string{fmt.Sprintf("timeline[%d]", o.idx)},
						"%s is still down at %s (timeline[%d] killed it at %s%s); kill it again after it is relaunched",
						a.Kill.Node, units.FormatDuration(a.At), o.idx, units.FormatDuration(o.from), relaunchNote(o.until))
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
				add(path+".kill", "majority", []string{"cluster.servers"},
					"leaves %d of %d servers down at %s (still down: %s); at most %d may be down for the cluster to keep a majority and serve",
					len(still)+1, p.Cluster.Servers, units.FormatDuration(a.At), strings.Join(names, ", "), maxDown)
			}
			downs = append(downs, d)
		case ActBurst:
			b := a.Burst
			if b == nil || b.Count < 1 {
				continue
			}
			if max := MaxSendersPerClient * p.Cluster.Clients; b.Senders > max {
				add(path+".burst.senders", "senders-per-client", []string{"cluster.clients"},
					"%d senders over %d client node(s) is more than %d: at most %d per client node (each is a socket and a 64 MiB retransmit ring); want fewer senders or more clients",
					b.Senders, p.Cluster.Clients, max, MaxSendersPerClient)
			}
			if last := a.At + time.Duration(b.Count-1)*b.Every; b.Count > 1 && a.At < end && last >= end {
				add(path+".burst.count", "burst-after-end", []string{"duration", at, path + ".burst.every"},
					"the last of %d bursts starts at %s (at %s + %d x %s), at or after the end of the run (duration %s); want fewer bursts or a longer run",
					b.Count, units.FormatDuration(last), units.FormatDuration(a.At), b.Count-1, units.FormatDuration(b.Every), units.FormatDuration(end))
			}
		case ActWaitFor:
			w := a.WaitFor
			if w == nil {
				continue
			}
			if w.Node != "" {
				if msg := nodeExists(w.Node, p.Cluster.Servers); msg != "" {
					add(path+".wait_for.node", "node", []string{"cluster.servers"}, "%s", msg)
				}
			}
			for _, o := range downs {
				if o.relaunchedAt || w.Node != "" && (w.Node != o.node || !nodeNRe.MatchString(o.node)) {
					continue // it comes back, or the wait is for another node (a role resolves to a running one)
				}
				target := "every server"
				if w.Node != "" {
					target = w.Node
				}
				add(path+".wait_for", "wait-never", []string{fmt.Sprintf("timeline[%d]", o.idx)},
					"waits for %s to be %s, but timeline[%d] kills %s without relaunch_after, so it can only time out",
					target, w.Phase, o.idx, o.node)
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

// nodeExists returns why ref names no server of a cluster of n, or "".
func nodeExists(ref string, n int) string {
	servers := "node-0"
	if n > 1 {
		servers = fmt.Sprintf("node-0..node-%d", n-1)
	}
	switch ref {
	case "leader":
		return ""
	case "follower":
		if n < 2 {
			return fmt.Sprintf("there is no follower: the cluster has 1 server (%s)", servers)
		}
		return ""
	case "other-follower":
		if n < 3 {
			return fmt.Sprintf("there is no other-follower: the cluster has %d servers (%s)", n, servers)
		}
		return ""
	}
	num, ok := strings.CutPrefix(ref, "node-")
	if i, err := strconv.Atoi(num); ok && err == nil && i < n {
		return ""
	}
	return fmt.Sprintf("%q does not exist: cluster has servers %s (or use %s)", ref, servers, strings.Join(nodeRoles, ", "))
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
