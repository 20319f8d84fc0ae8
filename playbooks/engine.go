package playbooks

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/internal/untrusted"
)

// EngineCommand is engine.command: how the command driver starts an engine (engine/command).
type EngineCommand struct {
	command.Spec
	// ConfigTemplate is the template file as the playbook names it; Spec.Config holds its text.
	ConfigTemplate string `json:"config_template,omitempty"`
	// Carries lists every setting some template references, so a run passes exactly these and
	// checks each of them in effect.
	Carries []string `json:"carries,omitempty"`
}

var commandKeys = []string{"binary", "args", "env", "config_template", "config_file"}

// engineCommand reads engine.command.
func (r *reader) engineCommand(p *Playbook, n ast.Node) {
	const path = "engine.command"
	r.pos[path] = r.nodePos(n)
	pairs, ok := r.mapping(n, path, "a mapping with "+strings.Join(commandKeys, ", "))
	if !ok {
		r.failed[path] = true
		return
	}
	c := &EngineCommand{}
	p.Engine.Command = c
	tmplPos := map[string]Pos{} // template name (as engine/command names it) -> where it stands
	for _, kv := range pairs {
		key, ok := r.key(kv, path, commandKeys)
		if !ok {
			r.failed[path] = true
			continue
		}
		kpath := path + "." + key
		switch key {
		case "binary":
			if v, ok := r.scalar(kv.Value, kpath); ok {
				c.Binary = r.binaryPath(v)
			}
		case "config_file":
			if v, ok := r.scalar(kv.Value, kpath); ok {
				c.ConfigFile = v
			}
		case "config_template":
			v, ok := r.scalar(kv.Value, kpath)
			if !ok {
				break
			}
			c.ConfigTemplate = v
			// A regular file of at most 1 MiB: /dev/zero here once grew rig validate to 24 GB.
			b, err := untrusted.ReadFile(r.localPath(v), "config template")
			if err != nil {
				r.probs.add(r.nodePos(kv.Value), kpath, "cannot read the template: %v (a path relative to the playbook's folder)", err)
				r.failed[path] = true
				break
			}
			c.Config = string(b)
			tmplPos["config"] = Pos{File: r.localPath(v), Line: 1, Column: 1}
		case "args":
			seq, ok := r.deref(kv.Value).(*ast.SequenceNode)
			if !ok {
				r.probs.add(r.nodePos(kv.Value), kpath, "want a list of arguments, e.g. [--config, \"{{.ConfigFile}}\"], got %s", describe(r.deref(kv.Value)))
				r.failed[path] = true
				break
			}
			for i, v := range seq.Values {
				ipath := fmt.Sprintf("%s[%d]", kpath, i)
				s, ok := r.scalar(v, ipath)
				if !ok {
					r.failed[path] = true
					continue
				}
				tmplPos[fmt.Sprintf("args[%d]", len(c.Args))] = r.nodePos(v)
				r.pos[ipath] = r.nodePos(v) // PosOf names the argument a setting came from
				c.Args = append(c.Args, s)
			}
		case "env":
			epairs, ok := r.mapping(kv.Value, kpath, "a mapping of variable name -> value, e.g. {JAVA_OPTS: \"-Xmx2g\"}")
			if !ok {
				r.failed[path] = true
				break
			}
			for _, e := range epairs {
				k, ok := r.keyText(e)
				if !ok {
					continue
				}
				s, ok := r.scalar(e.Value, kpath+"."+k)
				if !ok {
					r.failed[path] = true
					continue
				}
				tmplPos["env "+k] = r.nodePos(e.Value)
				c.Env = append(c.Env, k+"="+s)
			}
		}
	}
	if c.Binary == "" {
		r.probs.add(r.pos[path], path+".binary", "missing; want the engine's executable: an absolute path on the node, a name in PATH, or a path relative to the playbook's folder")
		r.failed[path] = true
		return
	}
	// Parse every template now, so a typo is reported here with its place, not on the node.
	refs, err := command.Check(c.Spec)
	if err != nil {
		for _, e := range splitJoined(err) {
			where, pos, msg := r.templateProblem(e, tmplPos)
			r.probs.add(pos, path+where, "%s", msg)
		}
		r.failed[path] = true
		return
	}
	table := p.Engine.Table()
	names := table.Names()
	set := map[string]bool{}
	for where, refNames := range refs {
		for _, name := range refNames {
			if _, ok := table.Lookup(name); !ok {
				r.probs.add(tmplPosOr(tmplPos, where, r.pos[path]), path, "%s references .Settings.%s, which is not a setting of the %s driver%s; settings: %s%s",
					where, name, p.Engine.DriverName(), suggest(name, names), strings.Join(names, ", "), declareHint(p.Engine))
				r.failed[path] = true
				continue
			}
			set[name] = true
		}
	}
	for name := range set {
		c.Carries = append(c.Carries, name)
	}
	sort.Strings(c.Carries)
}

// localPath resolves a file named relative to the playbook against the playbook's folder.
func (r *reader) localPath(v string) string {
	if filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(filepath.Dir(r.file), v)
}

// binaryPath is localPath for a path with a slash in it, made absolute since the agent starts
// the engine in the node folder; a bare name is left for PATH on the node.
func (r *reader) binaryPath(v string) string {
	if !strings.Contains(v, "/") {
		return v
	}
	p := r.localPath(v)
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

var templateLineRe = regexp.MustCompile(`template: [^:]+:(\d+):(?:(\d+):)?`)

// templateProblem places one template error: a config template error at its line in the
// template file, an argument or variable at its value in the playbook.
func (r *reader) templateProblem(msg string, at map[string]Pos) (string, Pos, string) {
	for where, pos := range at {
		rest, ok := strings.CutPrefix(msg, where+": ")
		if !ok {
			continue
		}
		if where == "config" {
			if m := templateLineRe.FindStringSubmatch(msg); m != nil {
				pos.Line, _ = strconv.Atoi(m[1])
				pos.Column = 1
				if m[2] != "" {
					pos.Column, _ = strconv.Atoi(m[2])
				}
			}
			return ".config_template", pos, rest
		}
		if strings.HasPrefix(where, "args") {
			return "." + where, pos, rest
		}
		return ".env." + strings.TrimPrefix(where, "env "), pos, rest
	}
	return "", r.pos["engine.command"], msg
}

func tmplPosOr(at map[string]Pos, where string, def Pos) Pos {
	if p, ok := at[where]; ok {
		return p
	}
	return def
}

// splitJoined undoes errors.Join, one message per joined error.
func splitJoined(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// checkDriver holds the engine driver rules for one combination.
func checkDriver(p *Playbook, add func(path, rule string, deps []string, format string, args ...any)) {
	e := p.Engine
	drv, table, err := e.Resolve()
	if err != nil {
		add("engine.driver", "driver", nil, "%v", err)
		return
	}
	_, templated := drv.(driver.Templater)
	switch {
	case templated && e.Command == nil:
		add("engine.driver", "command-missing", nil, "is %s, but there is no engine.command saying how to start the engine (binary, args, env, config_template)", drv.Name())
		return
	case !templated && e.Command != nil:
		add("engine.command", "command-unused", []string{"engine.driver"}, "is set, but engine.driver %s does not start engines from templates; set engine.driver: command to use it", e.DriverName())
		return
	}
	if m, ok := drv.(driver.MemoryEstimator); ok && e.OrderBytes > 0 {
		add("engine.bytes_per_order", "bytes-per-order-measured", nil,
			"is set, but the %s engine measures its own (%d B per resting order); engine.bytes_per_order is for an engine whose driver does not, e.g. engine.driver: command",
			drv.Name(), m.BytesPerOrder())
	}
	if vc, ok := drv.(driver.ValueChecker); ok {
		for _, pr := range vc.CheckValues(e.Settings()) {
			deps := make([]string, len(pr.Deps))
			for i, d := range pr.Deps {
				deps[i] = "engine." + d
			}
			add("engine."+pr.Setting, pr.Rule, deps, "%s", pr.Msg)
		}
	}
	if rec, ok := drv.(driver.Recorder); ok {
		checkRecordingReach(p, rec, add)
	}
	if !templated {
		return
	}
	// A setting the command driver passes nowhere would silently do nothing.
	asked := e.Settings()
	for _, name := range table.Names() {
		if _, ok := asked[name]; ok && !contains(e.Command.Carries, name) {
			add("engine."+name, "not-carried", []string{"engine.command"},
				"is asked for, but no template of engine.command passes it to the engine; reference {{index .Settings %q}} in its args, env or config_template", name)
		}
	}
	for _, name := range e.Command.Carries {
		if _, ok := asked[name]; !ok {
			add("engine.command", "carries-unset", []string{"engine." + name},
				"a template references .Settings.%s, but the playbook leaves engine.%s at the engine's default; set it (or give it a default in engine.settings), or take it out of the template", name, name)
		}
	}
}

// checkRecordingReach refuses an engine recorder whose reach (how far back one take of it goes)
// is shorter than the longest stretch between two takes, after consecutive timeline actions or
// from the last one to the end: the start of that stretch would be lost.
func checkRecordingReach(p *Playbook, rec driver.Recorder, add func(path, rule string, deps []string, format string, args ...any)) {
	reach, setting := rec.RecordingReach(p.Engine.Settings())
	if reach <= 0 || len(p.Timeline) == 0 || p.Engine.RecordingMode() == RecordingWindows {
		return // windows: each take holds its window only, from a second before the action
	}
	gap, from, what := time.Duration(0), "", ""
	for i := range p.Timeline {
		end, endWhat := p.Duration, "the end of the run"
		if i+1 < len(p.Timeline) {
			end, endWhat = p.Timeline[i+1].At, fmt.Sprintf("timeline[%d] (%s)", i+1, units.FormatDuration(p.Timeline[i+1].At))
		}
		if d := end - p.Timeline[i].At; d > gap {
			gap, from, what = d, fmt.Sprintf("timeline[%d] (%s)", i, units.FormatDuration(p.Timeline[i].At)), endWhat
		}
	}
	if gap > reach {
		add("engine."+setting, "recording-reach", []string{"timeline"},
			"the recorder reaches %s back, but its recording is taken after %s and next at %s, %s later; set engine.%s to at least %s",
			units.FormatDuration(reach), from, what, units.FormatDuration(gap), setting, units.FormatDuration(gap.Round(time.Second)+5*time.Second))
	}
}

// DriverName is the engine driver, with the default spelled out.
func (e Engine) DriverName() string {
	if e.Driver == "" {
		return driver.Default
	}
	return e.Driver
}

// engine.recording's values.
const (
	RecordingOn  = "on"
	RecordingOff = "off"
	// RecordingWindows records only around the timeline's windows: the recorder starts a
	// second before each and is taken and stopped a second after it (recording.Windows), so
	// the stretches between windows, the preload included, run without it.
	RecordingWindows = "windows"
	// DefaultRecording is engine.recording when a playbook says nothing. Off: a recorder is on
	// by default only when its cost is within recording/cost's Goals, and
	// neither JFR's measured cost on the Aeron engine (docs/engines.md, "Inside a JVM engine",
	// examples/aeron-cluster/recording-cost.yaml) nor the Go flight recorder's on the reference
	// engine (docs/engines.md, "What an engine provides", item 8) has been shown within them.
	DefaultRecording = RecordingOff
)

// Recorded says the engine's own recorder is asked for (engine.recording: on or windows).
func (e Engine) Recorded() bool { return e.RecordingMode() != RecordingOff }

// RecordingMode is engine.recording, its default when not given.
func (e Engine) RecordingMode() string {
	if e.Recording == "" {
		return DefaultRecording
	}
	return e.Recording
}

// EstimateKey names the engine for the stage-time history (playbooks/estimate): runs of one
// engine are estimated from that engine's earlier runs, never from another's. The reference
// engine is its driver's name; a command-driven engine is its binary with the arguments that
// hold no template (a module, a jar, its JVM flags), so two services started by one script
// differ, while a matrix over settings keeps one key.
func (e Engine) EstimateKey() string {
	if e.Command == nil {
		return e.DriverName()
	}
	parts := []string{e.DriverName(), e.Command.Binary}
	for _, a := range e.Command.Args {
		if !strings.Contains(a, "{{") {
			parts = append(parts, a)
		}
	}
	return strings.Join(parts, " ")
}
