package playbooks

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/inventory"
)

// A field is one scalar setting of a playbook, addressed by its path (engine.sync_level,
// tuning.vm.dirty_ratio, timeline[1].burst.messages). The same setter reads the value from the
// file and from a matrix axis, so a matrix value is checked exactly as the field would be.
type field struct {
	set func(p *Playbook, raw string) error // parse raw, check it, store it
	get func(p *Playbook) string            // the value as a playbook would write it
}

// staticFields are every field a playbook's path names statically: the core ones below, the
// disk: block's and the placement's distance (one table for the file, the matrix and the error
// messages that list field paths).
var staticFields = joinFields(coreFields, diskFields, placementFields)

// joinFields is the fields of every table; one path in two tables panics (a programming error).
func joinFields(tables ...map[string]field) map[string]field {
	out := map[string]field{}
	for _, t := range tables {
		for path, f := range t {
			if _, dup := out[path]; dup {
				panic("playbooks: field " + path + " declared twice")
			}
			out[path] = f
		}
	}
	return out
}

// coreFields are the fields of the playbook's top level and of its cluster, engine, tuning,
// preload and load sections.
var coreFields = map[string]field{
	"name": {
		set: func(p *Playbook, s string) error {
			if !validName(s) {
				return fmt.Errorf("%q is not a name; want 1-64 of a-z A-Z 0-9 . _ - starting with a letter or digit (it becomes part of run ids)", s)
			}
			p.Name = s
			return nil
		},
		get: func(p *Playbook) string { return p.Name },
	},
	"description": {
		set: func(p *Playbook, s string) error { p.Description = s; return nil },
		get: func(p *Playbook) string { return p.Description },
	},
	"cluster.servers": intField(1, 99, "servers, 1..99", func(p *Playbook) *int { return &p.Cluster.Servers }),
	"cluster.clients": intField(1, 99, "clients, 1..99", func(p *Playbook) *int { return &p.Cluster.Clients }),
	"engine.driver": {
		set: func(p *Playbook, s string) error {
			if _, err := p.Engine.drivers.Lookup(s); err != nil {
				return err
			}
			p.Engine.Driver = s
			return nil
		},
		get: func(p *Playbook) string { return p.Engine.DriverName() },
	},
	"engine.bytes_per_order": {
		set: func(p *Playbook, s string) error {
			v, err := units.ParseSize(s)
			if err != nil {
				return err
			}
			if v < 1 || v > 1<<20 {
				return fmt.Errorf("%s is out of range; want 1..1MiB: the resident memory one resting order costs a server, e.g. 120 (bytes)", s)
			}
			p.Engine.OrderBytes = v
			return nil
		},
		get: func(p *Playbook) string { return units.FormatSize(p.Engine.OrderBytes) },
	},
	"engine.recording": {
		set: func(p *Playbook, s string) error {
			if s != RecordingOn && s != RecordingOff && s != RecordingWindows {
				return fmt.Errorf("%q: want on, windows or off (record where the engine's time went with its own recorder: JFR on a JVM engine, the Go flight recorder on a Go engine; windows: only around the timeline's windows)", s)
			}
			p.Engine.Recording = s
			return nil
		},
		get: func(p *Playbook) string { return p.Engine.RecordingMode() },
	},
	"engine.admin_gc": {
		set: func(p *Playbook, s string) error {
			v, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("%q is not true or false: whether the engine answers POST /gc (docs/engines.md)", s)
			}
			p.Engine.AdminGC = v
			return nil
		},
		get: func(p *Playbook) string { return strconv.FormatBool(p.Engine.AdminGC) },
	},
	"engine.burst_client": {
		set: func(p *Playbook, s string) error {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("empty; want the arguments with which engine.command.binary sends a burst through the engine's own client, e.g. \"-Xmx256m --burst\"")
			}
			p.Engine.BurstArgs = s
			return nil
		},
		get: func(p *Playbook) string { return p.Engine.BurstArgs },
	},
	"engine.book_capture": {
		set: func(p *Playbook, s string) error {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("empty; want the arguments with which engine.command.binary captures a stored book, e.g. \"--book\"")
			}
			p.Engine.BookCaptureArgs = s
			return nil
		},
		get: func(p *Playbook) string { return p.Engine.BookCaptureArgs },
	},
	"engine.preload_rate": {
		set: func(p *Playbook, s string) error {
			v, err := units.ParseRate(s)
			if err != nil {
				return err
			}
			if v <= 0 || v > 100e6 {
				return fmt.Errorf("%s is out of range; want more than 0 and at most 100M/s: the orders per second this engine preloads at, e.g. 250k/s", s)
			}
			p.Engine.PreloadRate = v
			return nil
		},
		get: func(p *Playbook) string { return units.FormatRate(p.Engine.PreloadRate) },
	},
	"preload.orders": {
		set: func(p *Playbook, s string) error {
			v, err := units.ParseCount(s)
			if err != nil {
				return err
			}
			p.Preload.Orders = v
			return nil
		},
		get: func(p *Playbook) string { return units.FormatCount(p.Preload.Orders) },
	},
	"preload.instruments": intField(1, 1_000_000, "instruments, 1..1000000", func(p *Playbook) *int { return &p.Preload.Instruments }),
	"load.probe_rate": {
		set: func(p *Playbook, s string) error {
			v, err := units.ParseRate(s)
			if err != nil {
				return err
			}
			if v <= 0 {
				return fmt.Errorf("%s is not a probe rate; want more than 0, e.g. 1000/s (every figure comes from the probes)", s)
			}
			if v > 10_000_000 {
				return fmt.Errorf("%s is more than one client can schedule; want at most 10M/s", s)
			}
			p.Load.ProbeRate = v
			return nil
		},
		get: func(p *Playbook) string { return units.FormatRate(p.Load.ProbeRate) },
	},
	"load.spin": durationField(0, 2*time.Millisecond, // loadgen.MaxSpin (runner_test.go checks they agree)
		"a duration from 0 to 2ms, e.g. 100us (0: sleep until each probe is due)",
		func(p *Playbook) *time.Duration { return &p.Load.Spin }),
	"warmup":   durationField(0, units.MaxDuration, "a duration of 0s or more, e.g. 2s", func(p *Playbook) *time.Duration { return &p.Warmup }),
	"duration": durationField(time.Second, units.MaxDuration, "a duration from 1s to 24h, e.g. 30s, 4m", func(p *Playbook) *time.Duration { return &p.Duration }),
	"rounds": {
		set: func(p *Playbook, s string) error {
			v, err := units.ParseInt(s)
			if err != nil || v < 1 || v > 1000 {
				return fmt.Errorf("%q is not a number of rounds; want a whole number 1..1000", s)
			}
			p.Rounds = int(v)
			return nil
		},
		get: func(p *Playbook) string { return strconv.Itoa(p.Rounds) },
	},
	"allow_all_down": {
		set: func(p *Playbook, s string) error {
			switch s {
			case "true", "false":
				p.AllowAllDown = s == "true"
				return nil
			}
			return fmt.Errorf("%q: want true (the timeline may have every server down at once) or false", s)
		},
		get: func(p *Playbook) string { return strconv.FormatBool(p.AllowAllDown) },
	},
	"cause_sources": {
		set: func(p *Playbook, s string) error {
			if s != CauseSourcesOn && s != CauseSourcesOff {
				return fmt.Errorf("%q: want on or off (off: no scheduler or pressure samples and no engine pause record, only to price them against on)", s)
			}
			p.CauseSources = s
			return nil
		},
		get: func(p *Playbook) string {
			if p.CauseSourcesOff() {
				return CauseSourcesOff
			}
			return CauseSourcesOn
		},
	},
	"snapshot_warm_from": intField(1, 1000, "the first warm snapshot of a run, 1-based, e.g. 2 (all but the first)",
		func(p *Playbook) *int { return &p.SnapshotWarmFrom }),
}

// notInMatrix are fields a matrix may not vary: they name or shape the plan itself, or say how
// its runs are read.
var notInMatrix = map[string]bool{"name": true, "description": true, "rounds": true, "snapshot_warm_from": true, "allow_all_down": true}

// nameRe is the one grammar of names that become paths (inventory.NameGrammar), at most
// MaxNameLen bytes here since a playbook's name is part of run ids.
var nameRe = regexp.MustCompile(`^(?:` + inventory.NameGrammar + `)$`)

// MaxNameLen bounds a playbook's name (and a placement's), within inventory.MaxNameLen.
const MaxNameLen = 64

func validName(s string) bool { return len(s) <= MaxNameLen && nameRe.MatchString(s) }

func intField(lo, hi int, help string, ptr func(*Playbook) *int) field {
	return field{
		set: func(p *Playbook, s string) error {
			v, err := units.ParseInt(s)
			if err != nil {
				return fmt.Errorf("%w; want %s", err, help)
			}
			if v < int64(lo) || v > int64(hi) {
				return fmt.Errorf("%d is out of range; want %s", v, help)
			}
			*ptr(p) = int(v)
			return nil
		},
		get: func(p *Playbook) string { return strconv.Itoa(*ptr(p)) },
	}
}

func durationField(lo, hi time.Duration, help string, ptr func(*Playbook) *time.Duration) field {
	return field{set: durationSetter(lo, hi, help, ptr), get: func(p *Playbook) string { return units.FormatDuration(*ptr(p)) }}
}

// quantityField is an int64 field written in one of internal/units' grammars (parse, format),
// in lo..hi or, when zeroOK, 0 (no limit).
func quantityField(parse func(string) (int64, error), format func(int64) string, lo, hi int64, zeroOK bool, help string, ptr func(*Playbook) *int64) field {
	return field{
		set: func(p *Playbook, s string) error {
			v, err := parse(s)
			if err != nil {
				return err
			}
			if (v != 0 || !zeroOK) && (v < lo || v > hi) {
				return fmt.Errorf("%s is out of range; want %s", s, help)
			}
			*ptr(p) = v
			return nil
		},
		get: func(p *Playbook) string { return format(*ptr(p)) },
	}
}

func durationSetter(lo, hi time.Duration, help string, ptr func(*Playbook) *time.Duration) func(*Playbook, string) error {
	return func(p *Playbook, s string) error {
		d, err := units.ParseDuration(s)
		if err != nil {
			return err
		}
		if d < lo || d > hi {
			return fmt.Errorf("%s is out of range; want %s", s, help)
		}
		*ptr(p) = d
		return nil
	}
}

var (
	timelinePathRe = regexp.MustCompile(`^timeline\[([0-9]+)\]\.(.+)$`)
)

// resolveField finds the field at path in p (p matters for timeline entries, which must exist).
func resolveField(p *Playbook, path string) (field, error) {
	if f, ok := staticFields[path]; ok {
		return f, nil
	}
	if name, ok := strings.CutPrefix(path, "engine."); ok {
		table := p.Engine.Table()
		if s, ok := table.Lookup(name); ok {
			return engineField(s), nil
		}
		return field{}, fmt.Errorf("%q is not a setting of the %s driver%s; its settings: %s%s", name, p.Engine.DriverName(),
			suggest(name, table.Names()), strings.Join(table.Names(), ", "), declareHint(p.Engine))
	}
	if key, ok := strings.CutPrefix(path, "tuning."); ok {
		if _, known := tuningKeys[key]; !known {
			return field{}, fmt.Errorf("unknown kernel setting %q%s; allowed: %s", key, suggest(key, tuningKeyList()), tuningKeyNames())
		}
		return tuningField(key), nil
	}
	if m := timelinePathRe.FindStringSubmatch(path); m != nil {
		i, _ := strconv.Atoi(m[1])
		if i >= len(p.Timeline) {
			return field{}, fmt.Errorf("there is no timeline[%d]: the timeline has %d entries (counted from 0)", i, len(p.Timeline))
		}
		return actionField(p.Timeline[i], i, m[2])
	}
	return field{}, fmt.Errorf("not a playbook field%s; a field path is one of %s, tuning.KEY or timeline[N].ACTION.FIELD",
		suggest(path, fieldPaths()), strings.Join(fieldPaths(), ", "))
}

// fieldPaths lists the static paths a matrix may vary.
func fieldPaths() []string {
	var out []string
	for k := range staticFields {
		if !notInMatrix[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func tuningField(key string) field {
	return field{
		set: func(p *Playbook, s string) error {
			v, err := normalizeTuning(key, s)
			if err != nil {
				return err
			}
			for i := range p.Tuning {
				if p.Tuning[i].Key == key {
					p.Tuning[i].Value = v
					return nil
				}
			}
			p.Tuning = append(p.Tuning, Setting{Key: key, Value: v})
			return nil
		},
		get: func(p *Playbook) string {
			for _, s := range p.Tuning {
				if s.Key == key {
					return s.Value
				}
			}
			return ""
		},
	}
}

// actionField addresses one leaf of timeline entry i; the entry's kind must match the path.
// The closures look the entry up again in the playbook they are given, which may be a copy.
func actionField(a Action, i int, rest string) (field, error) {
	at := func(p *Playbook) *Action { return &p.Timeline[i] }
	if rest == "at" {
		return field{
			set: durationSetter(0, units.MaxDuration, "an offset of 0s or more, e.g. 10s", func(p *Playbook) *time.Duration { return &at(p).At }),
			get: func(p *Playbook) string { return units.FormatDuration(at(p).At) },
		}, nil
	}
	kind, leaf, _ := strings.Cut(rest, ".")
	if kind != a.Kind {
		return field{}, fmt.Errorf("timeline[%d] is a %s, not a %s", i, a.Kind, kind)
	}
	if a.Spec == nil {
		return field{}, fmt.Errorf("timeline[%d] %s has no settings", i, kind)
	}
	af, ok := actions.FieldOf(a.Spec, leaf)
	if !ok {
		keys := actions.Keys(a.Spec)
		if len(keys) == 0 {
			return field{}, fmt.Errorf("a %s has no field %q; it takes no settings", kind, leaf)
		}
		return field{}, fmt.Errorf("a %s has no field %q; it has %s", kind, leaf, strings.Join(keys, ", "))
	}
	return field{
		set: func(p *Playbook, s string) error { return af.Set(at(p).Spec, s) },
		get: func(p *Playbook) string { return af.Get(at(p).Spec) },
	}, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// suggest returns ` (did you mean "x"?)` for the closest candidate within a small edit distance.
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	if len(word) <= 4 {
		bestD = 2
	}
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" && len(word) >= 4 {
		for _, c := range candidates { // a truncated name: engine.sync for engine.sync_level
			if strings.HasPrefix(c, word) {
				best = c
				break
			}
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
