// Package command is the command driver's side of the engine contract: an engine the rig does
// not build is started from a command line, an environment and a config file, each rendered
// per node from a text/template with the node's addresses, its peers and the playbook's engine
// settings. It also says which settings each template carries, so a run can check that the
// process really holds them (/proc/PID/cmdline and environ: carriage) before it checks that the
// engine reports them in effect (/status config: effect).
package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/rig-dev/rig/engine"
)

// Spec is what a playbook's engine.command asks for; Args, the values of Env and Config are
// templates over Data.
type Spec struct {
	Binary     string   `json:"binary"`                // path on the node, or a name looked up in PATH
	Args       []string `json:"args,omitempty"`        // templates, one per argument
	Env        []string `json:"env,omitempty"`         // KEY=template, in order
	Config     string   `json:"config,omitempty"`      // config file template (its text)
	ConfigFile string   `json:"config_file,omitempty"` // name of the rendered file in the node folder
}

// GCLogName is the GC log's file name in the node folder (%p: the JVM's pid); the report reads
// every gc*.log of a node (analysis/telemetry.go).
const GCLogName = "gc-%p.log"

// DefaultConfigFile names the rendered config file when a spec has a template but no name.
const DefaultConfigFile = "engine.conf"

// Data is what a template sees.
type Data struct {
	Node       string // e.g. node-0
	Dir        string // the node folder (the engine's working directory)
	DataDir    string // where the engine keeps its log and snapshots
	ConfigFile string // absolute path of the rendered config file
	// GCLog is where a JVM engine writes its GC log so the run collects and reads it:
	// -Xlog:gc*,safepoint:file={{.GCLog}}:time,uptime,level,tags (the JVM replaces %p with its
	// pid, so every launch keeps its own file; the time decorator lets the report count the
	// measured window and place each GC pause and safepoint).
	GCLog      string
	RaftAddr   string            // host:port for replication between nodes
	ClientAddr string            // host:port the load generator connects to
	AdminAddr  string            // loopback host:port of GET /status
	Peers      []engine.Peer     // every voter, this node included
	Settings   map[string]string // the playbook's engine settings by name, e.g. sync_level: "2", heartbeat_timeout: "500ms"
	// CauseSourcesOff: the run turned the always-on cause sources off (engine.Config's), so the
	// engine's own samplers for them stay off too.
	CauseSourcesOff bool
}

// Carry is one rendered argument or environment entry that holds a setting: the process must
// show it as given.
type Carry struct {
	Setting string `json:"setting"`
	Where   string `json:"where"` // args[N] or env KEY
	Want    string `json:"want"`  // the argument, or KEY=VALUE
}

// Rendered is a spec made concrete for one node.
type Rendered struct {
	Args   []string
	Env    []string
	Config []byte // nil when the spec has no config template
	Carry  []Carry
}

// Funcs are the functions templates may call beyond text/template's own.
var Funcs = template.FuncMap{
	// nanos, micros and millis turn a Go duration ("500ms") into an integer count, for engines
	// that take durations as plain numbers (Aeron's properties are nanoseconds).
	"nanos":  func(d string) (int64, error) { v, err := time.ParseDuration(d); return int64(v), err },
	"micros": func(d string) (int64, error) { v, err := time.ParseDuration(d); return v.Microseconds(), err },
	"millis": func(d string) (int64, error) { v, err := time.ParseDuration(d); return v.Milliseconds(), err },
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"host": func(hp string) (string, error) { h, _, err := net.SplitHostPort(hp); return h, err },
	"port": func(hp string) (string, error) { _, p, err := net.SplitHostPort(hp); return p, err },
	"join": strings.Join,
}

var envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check parses every template of s and returns, per template (args[N], env KEY, config), the
// settings it references. Errors say which template and where in it.
func Check(s Spec) (map[string][]string, error) {
	refs := map[string][]string{}
	var errs []error
	if strings.TrimSpace(s.Binary) == "" {
		errs = append(errs, errors.New("binary: empty; want the engine's executable (a path on the node, or a name in PATH)"))
	}
	add := func(where, text string) {
		r, err := References(where, text)
		if err != nil {
			errs = append(errs, err)
			return
		}
		refs[where] = r
	}
	for i, a := range s.Args {
		add(fmt.Sprintf("args[%d]", i), a)
	}
	for _, e := range s.Env {
		k, v, ok := strings.Cut(e, "=")
		if !ok || !envKeyRe.MatchString(k) {
			errs = append(errs, fmt.Errorf("env %q: want KEY=VALUE with KEY of letters, digits and _ (not starting with a digit)", e))
			continue
		}
		if k == engine.AdminTokenEnv {
			errs = append(errs, fmt.Errorf("env %s: set by the agent (the admin API's secret); a playbook may not set it", k))
			continue
		}
		if k == engine.ClusterSecretEnv {
			errs = append(errs, fmt.Errorf("env %s: set by the controller (the run's secret); a playbook may not set it", k))
			continue
		}
		add("env "+k, v)
	}
	if s.Config != "" {
		add("config", s.Config)
	}
	if s.ConfigFile != "" && (s.ConfigFile != filepath.Base(s.ConfigFile) || s.ConfigFile == "." || s.ConfigFile == "..") {
		errs = append(errs, fmt.Errorf("config_file %q: want a plain file name (it is written in the node folder)", s.ConfigFile))
	}
	return refs, errors.Join(errs...)
}

// References parses one template and lists the settings it names (.Settings.NAME,
// $.Settings.NAME or index .Settings "NAME"), sorted. A setting reached any other way (inside
// {{with .Settings}}) is not seen, so it would count as carried by nothing.
func References(where, text string) ([]string, error) {
	t, err := template.New(where).Funcs(Funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	seen := map[string]bool{}
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			walk(tt.Tree.Root, seen)
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

func walk(n parse.Node, seen map[string]bool) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				walk(c, seen)
			}
		}
	case *parse.ActionNode:
		walk(n.Pipe, seen)
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				walk(c, seen)
			}
		}
	case *parse.CommandNode:
		for i, a := range n.Args {
			// index .Settings "name"
			if id, ok := a.(*parse.IdentifierNode); ok && id.Ident == "index" && i == 0 && len(n.Args) >= 3 {
				if f, ok := n.Args[1].(*parse.FieldNode); ok && len(f.Ident) == 1 && f.Ident[0] == "Settings" {
					if s, ok := n.Args[2].(*parse.StringNode); ok {
						seen[s.Text] = true
					}
				}
			}
			walk(a, seen)
		}
	case *parse.FieldNode:
		settingIdents(n.Ident, seen)
	case *parse.VariableNode: // $.Settings.NAME
		settingIdents(n.Ident, seen)
	case *parse.ChainNode:
		walk(n.Node, seen)
	case *parse.IfNode:
		walk(n.Pipe, seen)
		walk(n.List, seen)
		walk(n.ElseList, seen)
	case *parse.RangeNode:
		walk(n.Pipe, seen)
		walk(n.List, seen)
		walk(n.ElseList, seen)
	case *parse.WithNode:
		walk(n.Pipe, seen)
		walk(n.List, seen)
		walk(n.ElseList, seen)
	case *parse.TemplateNode:
		walk(n.Pipe, seen)
	}
}

// settingIdents notes NAME in a chain of identifiers ... Settings NAME ...
func settingIdents(ident []string, seen map[string]bool) {
	for i := 0; i+1 < len(ident); i++ {
		if ident[i] == "Settings" {
			seen[ident[i+1]] = true
		}
	}
}

// Render makes s concrete for one node.
func (s Spec) Render(d Data) (*Rendered, error) {
	refs, err := Check(s)
	if err != nil {
		return nil, err
	}
	out := &Rendered{}
	exec := func(where, text string) (string, error) {
		t, err := template.New(where).Funcs(Funcs).Option("missingkey=error").Parse(text)
		if err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
		return b.String(), nil
	}
	var errs []error
	for i, a := range s.Args {
		where := fmt.Sprintf("args[%d]", i)
		v, err := exec(where, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.Args = append(out.Args, v)
		for _, name := range refs[where] {
			out.Carry = append(out.Carry, Carry{Setting: name, Where: where, Want: v})
		}
	}
	for _, e := range s.Env {
		k, tv, _ := strings.Cut(e, "=")
		where := "env " + k
		v, err := exec(where, tv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.Env = append(out.Env, k+"="+v)
		for _, name := range refs[where] {
			out.Carry = append(out.Carry, Carry{Setting: name, Where: where, Want: k + "=" + v})
		}
	}
	if s.Config != "" {
		v, err := exec("config", s.Config)
		if err != nil {
			errs = append(errs, err)
		}
		out.Config = []byte(v)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Sample is Data with made-up addresses, for checking templates before any node exists.
func Sample(settings map[string]string) Data {
	return Data{
		Node: "node-0", Dir: "/rig/node-0", DataDir: "/rig/node-0/data", ConfigFile: "/rig/node-0/" + DefaultConfigFile, GCLog: "/rig/node-0/" + GCLogName,
		RaftAddr: "127.0.0.11:7000", ClientAddr: "127.0.0.11:7001", AdminAddr: "127.0.0.1:7002",
		Peers: []engine.Peer{
			{Node: "node-0", RaftAddr: "127.0.0.11:7000", ClientAddr: "127.0.0.11:7001"},
			{Node: "node-1", RaftAddr: "127.0.0.12:7000", ClientAddr: "127.0.0.12:7001"},
		},
		Settings: settings,
	}
}

// CarryResult is one carriage check: whether the running process holds what was rendered.
type CarryResult struct {
	Carry
	OK   bool   `json:"ok"`
	Seen string `json:"seen,omitempty"` // when not OK: the process's argument or KEY=VALUE at that place, or "absent"
}

// CheckCarriage reads /proc/PID/cmdline and /proc/PID/environ and checks every carry against
// them: an argument must stand in the command line, an environment entry in the environment
// with the same value.
func CheckCarriage(pid int, carry []Carry) ([]CarryResult, error) {
	if len(carry) == 0 {
		return nil, nil
	}
	proc := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return nil, fmt.Errorf("read command line of pid %d: %w", pid, err)
	}
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return nil, fmt.Errorf("read environment of pid %d: %w", pid, err)
	}
	args := splitNUL(cmdline)
	env := map[string]string{}
	for _, e := range splitNUL(environ) {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v // the last one wins, as getenv sees it
	}
	out := make([]CarryResult, 0, len(carry))
	for _, c := range carry {
		r := CarryResult{Carry: c}
		if k, v, ok := strings.Cut(c.Want, "="); ok && strings.HasPrefix(c.Where, "env ") {
			got, present := env[k]
			r.OK = present && got == v
			if !r.OK {
				r.Seen = "absent"
				if present {
					r.Seen = k + "=" + got
				}
			}
		} else {
			for _, a := range args[min(1, len(args)):] {
				if a == c.Want {
					r.OK = true
					break
				}
			}
			if !r.OK {
				r.Seen = "absent from " + strconv.Quote(strings.Join(args, " "))
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func splitNUL(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}
