package actions

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/units"
)

// Node references an action may name: a role, resolved when the action runs, or node-N.
var (
	NodeRoles = []string{"leader", "follower", "other-follower"}
	nodeNRe   = regexp.MustCompile(`^node-(0|[1-9][0-9]*)$`)
	// Signals a kill may send.
	Signals = []string{"KILL", "TERM"}
)

// IsNodeN reports whether ref names one server (node-N) rather than a role.
func IsNodeN(ref string) bool { return nodeNRe.MatchString(ref) }

// CheckNodeForm checks a node reference's form; whether node-N exists depends on the cluster
// (NodeExists).
func CheckNodeForm(s string) error {
	if slices.Contains(NodeRoles, s) || IsNodeN(s) {
		return nil
	}
	return fmt.Errorf("%q is not a node; want %s or node-N (a server, counted from node-0)", s, strings.Join(NodeRoles, ", "))
}

// NodeExists returns why ref names no server of a cluster of n, or "".
func NodeExists(ref string, n int) string {
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
	return fmt.Sprintf("%q does not exist: cluster has servers %s (or use %s)", ref, servers, strings.Join(NodeRoles, ", "))
}

// CheckSignal checks a kill's signal.
func CheckSignal(s string) error {
	if !slices.Contains(Signals, s) {
		return fmt.Errorf("%q is not a signal a kill may send; want %s", s, strings.Join(Signals, " or "))
	}
	return nil
}

// CheckPhase checks a phase to wait for (engine.Phases).
func CheckPhase(p string) error {
	if !slices.Contains(engine.Phases, p) {
		return fmt.Errorf("%q is not an engine phase; want one of %s", p, strings.Join(engine.Phases, ", "))
	}
	return nil
}

// The field builders below take the kind's struct type T, whose pointer P is its Spec.

// durationField is a duration from lo to hi; the range is written from them, so a refusal names
// both ends, and help follows it ("e.g. 3s: how long the hog spins").
func durationField[T any, P interface {
	*T
	Spec
}](key string, lo, hi time.Duration, help string, ptr func(P) *time.Duration) Field {
	return Field{Key: key,
		Set: func(s Spec, raw string) error {
			d, err := units.ParseDuration(raw)
			if err != nil {
				return err
			}
			if d < lo || d > hi {
				return fmt.Errorf("%s is out of range; want a duration from %s to %s, %s", raw, shortDuration(lo), shortDuration(hi), help)
			}
			*ptr(s.(P)) = d
			return nil
		},
		Get: func(s Spec) string { return units.FormatDuration(*ptr(s.(P))) }}
}

// shortDuration writes a range's end as a playbook would: 24h, 1ms, 0.
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	out := units.FormatDuration(d)
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return strings.ReplaceAll(out, "µs", "us")
}

// intField parses with parse (a count, a size, a plain integer) and range-checks.
func intField[T any, P interface {
	*T
	Spec
}](key string, parse func(string) (int64, error), lo, hi int64, help string, get func(int64) string, ptr func(P) *int) Field {
	return Field{Key: key,
		Set: func(s Spec, raw string) error {
			v, err := parse(raw)
			if err != nil {
				return err
			}
			if v < lo || v > hi {
				return fmt.Errorf("%s is out of range; want %s", raw, help)
			}
			*ptr(s.(P)) = int(v)
			return nil
		},
		Get: func(s Spec) string { return get(int64(*ptr(s.(P)))) }}
}

func textField[T any, P interface {
	*T
	Spec
}](key string, check func(string) error, ptr func(P) *string) Field {
	return Field{Key: key,
		Set: func(s Spec, raw string) error {
			if err := check(raw); err != nil {
				return err
			}
			*ptr(s.(P)) = raw
			return nil
		},
		Get: func(s Spec) string { return *ptr(s.(P)) }}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func orAll(node string) string {
	if node == "" {
		return "all servers"
	}
	return node
}

// nodeProblem is a node reference (key's value) that names no server of the cluster, or nil.
func nodeProblem(key, ref string, c Context) *Problem {
	if msg := NodeExists(ref, c.Servers); ref != "" && msg != "" {
		p := problem(key, "node", []string{"cluster.servers"}, "%s", msg)
		return &p
	}
	return nil
}

// lateProblem is an action's follow-up (what, e.g. "the relaunch") d after it, at or after the
// run's end, or nil; want says what would be valid.
func lateProblem(key, rule, what, want string, d time.Duration, c Context) *Problem {
	if d <= 0 || c.At >= c.End || c.At+d < c.End {
		return nil
	}
	p := problem(key, rule, []string{"duration", "@at"}, "%s at %s (at %s + %s) is at or after the end of the run (duration %s); want %s",
		what, units.FormatDuration(c.At+d), units.FormatDuration(c.At), units.FormatDuration(d), units.FormatDuration(c.End), want)
	return &p
}

// problems keeps the non-nil ones.
func problems(ps ...*Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}
