package playbooks

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/untrusted"
)

// Defaults for what a playbook may leave out.
const (
	DefaultServers     = 3
	DefaultClients     = 1
	DefaultInstruments = 16
	DefaultWarmup      = 2 * time.Second
	DefaultRounds      = 1
)

// maxRuns bounds matrix x rounds: a run takes a minute or more, so more is a typo, not a plan.
const maxRuns = 1000

var topKeys = []string{"name", "description", "cluster", "engine", "tuning", "preload", "load", "disk",
	"placement", "warmup", "duration", "timeline", "allow_all_down", "matrix", "rounds", "snapshot_warm_from", "cause_sources"}

// sections are the mappings whose keys are plain fields (staticFields), by path.
var sections = map[string][]string{
	"cluster":   {"servers", "clients"},
	"preload":   {"orders", "instruments"},
	"load":      {"probe_rate", "spin"},
	"disk":      diskKeys,
	betweenPath: betweenKeys,
}

// MaxSize is the largest playbook accepted: real ones are a few KiB, and a YAML parser given
// tens of MB takes a minute and gigabytes before it could say anything useful.
const MaxSize = untrusted.MaxBytes

func tooBig(file string, size int64) error {
	return Problems{{Pos: Pos{File: file, Line: 1, Column: 1},
		Msg: fmt.Sprintf("the file is %d bytes; a playbook may be at most %d (1 MiB)", size, MaxSize)}}
}

// utf8BOM is the byte-order mark some editors put at the start of a UTF-8 file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Parse reads and validates a playbook. file names the source in every error position. On any
// problem it returns nil and a Problems listing all of them, in source order. A file over
// MaxSize is refused before parsing; a leading UTF-8 byte-order mark is skipped. engine.driver
// names one of drivers, the drivers the binary offers.
func Parse(file string, data []byte, drivers *driver.Registry) (*Playbook, error) {
	if len(data) > MaxSize {
		return nil, tooBig(file, int64(len(data)))
	}
	data = bytes.TrimPrefix(data, utf8BOM)
	r := &reader{file: file, drivers: drivers, probs: problems{file: file}, pos: map[string]Pos{}, failed: map[string]bool{}, anchors: map[string]ast.Node{}}
	p := r.read(data)
	if err := r.probs.err(); err != nil {
		return nil, err
	}
	return p, nil
}

type reader struct {
	file    string
	drivers *driver.Registry
	probs   problems
	pos     map[string]Pos // field path -> where its value stands
	present map[string]bool
	failed  map[string]bool // paths whose value could not be read; rules using them are skipped
	anchors map[string]ast.Node
}

func (r *reader) read(data []byte) *Playbook {
	f, err := untrusted.ParseYAML(r.file, data) // depth, values and aliases bounded first
	if err != nil {
		var ye yaml.Error
		var le *untrusted.Error
		if errors.As(err, &le) {
			r.probs.add(r.tokenPos(le.Line, le.Column), "", "%s", le.Msg)
			return nil
		}
		if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
			tp := ye.GetToken().Position
			r.probs.add(r.tokenPos(tp.Line, tp.Column), "", "YAML syntax: %s%s", ye.GetMessage(), syntaxHint(data, tp.Line))
		} else {
			r.probs.add(r.tokenPos(1, 1), "", "YAML syntax: %v", err)
		}
		return nil
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		r.probs.add(Pos{File: r.file, Line: 1, Column: 1}, "", "the file is empty; a playbook needs at least duration and load.probe_rate")
		return nil
	}
	if len(f.Docs) > 1 {
		r.probs.add(r.nodePos(f.Docs[1].Body), "", "a second YAML document; a file holds one playbook")
	}
	p := &Playbook{Source: r.file, Engine: Engine{drivers: r.drivers}}
	r.present = map[string]bool{}
	pairs, ok := r.mapping(f.Docs[0].Body, "", "a mapping of playbook keys ("+strings.Join(topKeys, ", ")+")")
	if !ok {
		return nil
	}
	var matrixNode ast.Node
	var matrixPos Pos
	for _, kv := range pairs {
		key, ok := r.key(kv, "", topKeys)
		if !ok {
			continue
		}
		r.present[key] = true
		switch key {
		case "engine":
			r.engineSection(p, kv.Value)
		case "cluster", "preload", "load", "disk":
			r.section(p, key, kv.Value)
		case "tuning":
			r.tuning(p, kv.Value)
		case "placement":
			r.placement(p, kv.Value)
		case "timeline":
			r.timeline(p, kv.Value)
		case "matrix":
			matrixNode, matrixPos = kv.Value, r.nodePos(kv.Key)
		default:
			r.scalarField(p, key, kv.Value)
		}
	}
	r.defaults(p)
	if matrixNode != nil {
		r.matrix(p, matrixNode, matrixPos)
	}
	p.pos = r.pos // before the rules: one reads whether a section was given
	r.checkCombinations(p)
	return p
}

// defaults fills what the file left out and reports what it may not leave out.
func (r *reader) defaults(p *Playbook) {
	top := Pos{File: r.file, Line: 1, Column: 1}
	if !r.present["name"] {
		base := strings.TrimSuffix(filepath.Base(r.file), filepath.Ext(r.file))
		if validName(base) {
			p.Name = base
		} else {
			r.probs.add(top, "name", "missing; want a name such as name: my-experiment")
			r.failed["name"] = true
		}
	}
	if !r.present["cluster.servers"] {
		p.Cluster.Servers = DefaultServers
	}
	if !r.present["cluster.clients"] {
		p.Cluster.Clients = DefaultClients
	}
	if !r.present["preload.instruments"] {
		p.Preload.Instruments = DefaultInstruments
	}
	if !r.present["warmup"] {
		p.Warmup = DefaultWarmup
	}
	if !r.present["rounds"] {
		p.Rounds = DefaultRounds
	}
	if !r.present["duration"] {
		r.probs.add(top, "duration", "missing; want the length of the run from load start, e.g. duration: 30s")
		r.failed["duration"] = true
	}
	if !r.present["load.probe_rate"] {
		pos := top
		if lp, ok := r.pos["load"]; ok {
			pos = lp
		}
		r.probs.add(pos, "load.probe_rate", "missing; want the probe stream's rate, e.g. load: {probe_rate: 1000/s}")
		r.failed["load.probe_rate"] = true
	}
}

// section reads one of cluster, engine, preload, load.
func (r *reader) section(p *Playbook, name string, n ast.Node) {
	r.pos[name] = r.nodePos(n)
	pairs, ok := r.mapping(n, name, "a mapping with "+strings.Join(sections[name], ", "))
	if !ok {
		return
	}
	for _, kv := range pairs {
		key, ok := r.key(kv, name, sections[name])
		if !ok {
			continue
		}
		path := name + "." + key
		r.present[path] = true
		r.pos[path] = r.nodePos(kv.Value)
		r.scalarField(p, path, kv.Value)
	}
}

// scalarField reads a scalar and stores it through the field's setter.
func (r *reader) scalarField(p *Playbook, path string, n ast.Node) {
	f, err := resolveField(p, path)
	if err != nil {
		r.probs.add(r.nodePos(n), path, "%v", err)
		r.failed[path] = true
		return
	}
	r.setScalar(p, path, f, n)
}

func (r *reader) setScalar(p *Playbook, path string, f field, n ast.Node) bool {
	raw, ok := r.scalar(n, path)
	if !ok {
		r.failed[path] = true
		return false
	}
	if err := f.set(p, raw); err != nil {
		r.probs.add(r.nodePos(n), path, "%v", err)
		r.failed[path] = true
		return false
	}
	return true
}

// tuning reads the kernel settings, keeping file order.
func (r *reader) tuning(p *Playbook, n ast.Node) {
	r.pos["tuning"] = r.nodePos(n)
	pairs, ok := r.mapping(n, "tuning", "a mapping of kernel settings ("+tuningKeyNames()+")")
	if !ok {
		return
	}
	for _, kv := range pairs {
		key, ok := r.key(kv, "tuning", tuningKeyList())
		if !ok {
			continue
		}
		path := "tuning." + key
		r.setScalar(p, path, tuningField(key), kv.Value)
	}
}

// timeline reads the list of actions.
func (r *reader) timeline(p *Playbook, n ast.Node) {
	r.pos["timeline"] = r.nodePos(n)
	n = r.deref(n)
	if _, null := n.(*ast.NullNode); null {
		return // an empty timeline: the run is the probe stream alone
	}
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		r.probs.add(r.nodePos(n), "timeline", "want a list of actions such as - {at: 5s, snapshot: {}}, got %s", describe(n))
		return
	}
	entryKeys := append([]string{"at"}, actions.Names()...)
	for i, en := range seq.Values {
		path := fmt.Sprintf("timeline[%d]", i)
		epos := r.nodePos(en)
		r.pos[path] = epos
		pairs, ok := r.mapping(en, path, "an action such as {at: 10s, kill: {node: follower}}")
		if !ok {
			// keep the index stable so later entries keep their names
			p.Timeline = append(p.Timeline, Action{Pos: epos})
			r.failed[path] = true
			continue
		}
		var atNode, bodyNode ast.Node
		var kinds []string
		for _, kv := range pairs {
			key, ok := r.key(kv, path, entryKeys)
			if !ok {
				continue
			}
			if key == "at" {
				atNode = kv.Value
				continue
			}
			kinds = append(kinds, key)
			bodyNode = kv.Value
			r.pos[path+"."+key] = r.nodePos(kv.Value)
		}
		a := Action{Pos: epos}
		switch len(kinds) {
		case 0:
			r.probs.add(epos, path, "no action; want exactly one of %s", strings.Join(actions.Names(), ", "))
			r.failed[path] = true
		case 1:
			a.Kind = kinds[0]
		default:
			r.probs.add(epos, path, "%s in one entry; want exactly one action per entry (give each its own entry, at the same offset if need be)",
				strings.Join(kinds, " and "))
			r.failed[path] = true
		}
		p.Timeline = append(p.Timeline, a)
		if atNode == nil {
			r.probs.add(epos, path+".at", "missing; want the action's offset from load start, e.g. at: 10s")
			r.failed[path+".at"] = true
		} else {
			r.scalarField(p, path+".at", atNode)
		}
		if a.Kind != "" {
			r.action(p, i, path, bodyNode)
		}
	}
}

// action reads the body of timeline entry i, whose kind is already set: the kind's own keys
// (actions.Spec), each through its field, then the kind's rules on which keys must be given.
func (r *reader) action(p *Playbook, i int, path string, n ast.Node) {
	a := &p.Timeline[i]
	spec, ok := actions.New(a.Kind)
	if !ok {
		return // the key check named the kinds
	}
	a.Spec = spec
	bpath := path + "." + a.Kind
	keys := actions.Keys(spec)
	want := "a mapping with " + strings.Join(keys, ", ")
	if len(keys) == 0 {
		want = "{} (a " + a.Kind + " takes no settings)"
	}
	pairs, ok := r.mapping(n, bpath, want)
	if !ok {
		r.failed[bpath] = true
		return
	}
	seen := map[string]bool{}
	for _, kv := range pairs {
		key, ok := r.key(kv, bpath, keys)
		if !ok {
			continue
		}
		seen[key] = true
		f, err := resolveField(p, bpath+"."+key)
		if err != nil {
			r.probs.add(r.nodePos(kv.Value), bpath+"."+key, "%v", err)
			continue
		}
		r.setScalar(p, bpath+"."+key, f, kv.Value)
	}
	if c, ok := spec.(actions.Completer); ok {
		bpos := r.nodePos(n)
		for _, pr := range c.Complete(seen) {
			kpath := bpath
			if pr.Key != "" {
				kpath += "." + pr.Key
			}
			r.probs.add(bpos, kpath, "%s", pr.Msg)
			r.failed[kpath] = true
		}
	}
}

// matrix reads the axes; every value is checked by the field's own setter on a copy.
func (r *reader) matrix(p *Playbook, n ast.Node, keyPos Pos) {
	r.pos["matrix"] = keyPos
	n = r.deref(n)
	if _, null := n.(*ast.NullNode); null {
		return
	}
	pairs, ok := r.mapping(n, "matrix", "a mapping of field path -> list of values, e.g. {preload.orders: [1M, 5M]}")
	if !ok {
		return
	}
	for _, kv := range pairs {
		kpos := r.nodePos(kv.Key)
		key, ok := r.keyText(kv)
		if !ok {
			continue
		}
		path := "matrix." + key
		r.pos[path] = kpos
		if notInMatrix[key] {
			r.probs.add(kpos, path, "%s cannot vary in a matrix; matrix axes are fields such as %s", key, strings.Join(fieldPaths(), ", "))
			continue
		}
		f, err := resolveField(p, key)
		if err != nil {
			r.probs.add(kpos, path, "%v", err)
			continue
		}
		vn := r.deref(kv.Value)
		seq, ok := vn.(*ast.SequenceNode)
		if !ok || len(seq.Values) == 0 {
			r.probs.add(r.nodePos(kv.Value), path, "want a non-empty list of values, e.g. [1M, 5M], got %s", describe(vn))
			continue
		}
		axis := Axis{Key: key}
		seen := map[string]int{}
		for j, v := range seq.Values {
			vpath := fmt.Sprintf("%s[%d]", path, j)
			raw, ok := r.scalar(v, vpath)
			if !ok {
				continue
			}
			c := p.Clone()
			if err := f.set(c, raw); err != nil {
				r.probs.add(r.nodePos(v), vpath, "%v", err)
				continue
			}
			canon := f.get(c)
			if k, dup := seen[canon]; dup {
				r.probs.add(r.nodePos(v), vpath, "%s repeats %s[%d] (%s); each value of an axis must differ", raw, path, k, canon)
				continue
			}
			seen[canon] = j
			r.pos[vpath] = r.nodePos(v)
			axis.Values = append(axis.Values, raw)
		}
		p.Matrix = append(p.Matrix, axis)
	}
	if runs := countRuns(p); runs > maxRuns*1000 {
		r.probs.add(keyPos, "matrix", "expands to more than %d runs (combinations x %d rounds); at most %d", maxRuns*1000, p.Rounds, maxRuns)
	} else if runs > maxRuns {
		r.probs.add(keyPos, "matrix", "expands to %d runs (combinations x %d rounds); at most %d", runs, p.Rounds, maxRuns)
	}
}

func countRuns(p *Playbook) int {
	n := max(p.Rounds, 1)
	for _, a := range p.Matrix {
		n *= len(a.Values)
		if n > maxRuns*1000 {
			break
		}
	}
	return n
}

// checkCombinations runs the whole-playbook rules on every matrix combination. A problem found
// in only some combinations names the first one it was found in.
func (r *reader) checkCombinations(p *Playbook) {
	type found struct {
		is    ruleBreach
		count int
		first map[string]string
	}
	if countRuns(p) > maxRuns {
		return // already reported; expanding it would only take time
	}
	var order []string
	seen := map[string]*found{}
	combos := combinations(p.Matrix)
	for _, combo := range combos {
		c, settings, err := p.apply(combo)
		if err != nil { // cannot happen: every value was checked above
			r.probs.add(r.pos["matrix"], "matrix", "%v", err)
			return
		}
		for _, is := range crossFieldRules(c) {
			if r.usesFailed(is) {
				continue
			}
			k := is.path + "\x00" + is.rule
			if f, ok := seen[k]; ok {
				f.count++
				continue
			}
			seen[k] = &found{is: is, count: 1, first: settings}
			order = append(order, k)
		}
	}
	for _, k := range order {
		f := seen[k]
		msg := f.is.msg
		if f.count < len(combos) {
			msg += " (in the run with " + formatSettings(p.Matrix, f.first) + ")"
		}
		r.probs.add(r.posOf(f.is.path), f.is.path, "%s", msg)
	}
}

// usesFailed says whether a rule read a value that could not be parsed (and so holds a default).
func (r *reader) usesFailed(is ruleBreach) bool {
	for _, d := range append([]string{is.path}, is.deps...) {
		for q := d; q != ""; {
			if r.failed[q] {
				return true
			}
			i := strings.LastIndexAny(q, ".[")
			if i <= 0 {
				break
			}
			q = q[:i]
		}
	}
	return false
}

// posOf finds where path (or its nearest ancestor) stands in the file.
func (r *reader) posOf(path string) Pos { return posIn(r.pos, r.file, path) }

// PosOf finds where a field path (or its nearest ancestor) stands in the playbook's source, for
// a rule checked after parsing (the memory a run's book needs on its target's hosts): e.g.
// "preload.orders", "matrix.preload.orders[1]".
func (p *Playbook) PosOf(path string) Pos { return posIn(p.pos, p.Source, path) }

func posIn(at map[string]Pos, file, path string) Pos {
	for p := path; p != ""; {
		if pos, ok := at[p]; ok {
			return pos
		}
		if i := strings.LastIndexAny(p, ".["); i > 0 {
			p = p[:i]
		} else {
			break
		}
	}
	return Pos{File: file, Line: 1, Column: 1}
}

// --- AST helpers ---

// mapping returns the pairs of a mapping node; null counts as an empty mapping.
func (r *reader) mapping(n ast.Node, path, want string) ([]*ast.MappingValueNode, bool) {
	n = r.deref(n)
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	case *ast.NullNode:
		return nil, true
	case nil:
		return nil, true
	}
	r.probs.add(r.nodePos(n), path, "want %s, got %s", want, describe(n))
	return nil, false
}

// key returns the key of kv if it is one of allowed, else reports it.
func (r *reader) key(kv *ast.MappingValueNode, parent string, allowed []string) (string, bool) {
	k, ok := r.keyText(kv)
	if !ok {
		return "", false
	}
	path := k
	if parent != "" {
		path = parent + "." + k
	}
	if contains(allowed, k) {
		r.pos[path] = r.nodePos(kv.Value)
		return k, true
	}
	where := "here"
	if parent != "" {
		where = "in " + parent
	}
	hint := ""
	if k == "interleave" && parent == "" {
		hint = "; rounds are always interleaved, so there is nothing to set"
	}
	if len(allowed) == 0 {
		r.probs.add(r.nodePos(kv.Key), path, "unknown key; nothing may be set %s%s", where, hint)
		return "", false
	}
	r.probs.add(r.nodePos(kv.Key), path, "unknown key%s; valid %s: %s%s", suggest(k, allowed), where, strings.Join(allowed, ", "), hint)
	return "", false
}

func (r *reader) keyText(kv *ast.MappingValueNode) (string, bool) {
	switch k := kv.Key.(type) {
	case *ast.MergeKeyNode:
		r.probs.add(r.nodePos(k), "", "merge keys (<<) are not supported; write the keys out")
		return "", false
	case *ast.StringNode:
		return k.Value, true
	case nil:
		return "", false
	}
	return kv.Key.GetToken().Value, true
}

// scalar returns the text of a single value, or reports what it got instead.
func (r *reader) scalar(n ast.Node, path string) (string, bool) {
	n = r.deref(n)
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return strings.TrimRight(v.Value.Value, "\n"), true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return v.GetToken().Value, true
	case *ast.NullNode, nil:
		r.probs.add(r.nodePos(n), path, "has no value")
		return "", false
	}
	r.probs.add(r.nodePos(n), path, "want a single value, got %s", describe(n))
	return "", false
}

// deref resolves anchors and aliases, so a playbook may reuse a value.
func (r *reader) deref(n ast.Node) ast.Node {
	for i := 0; i < 16; i++ {
		switch v := n.(type) {
		case *ast.AnchorNode:
			if v.Name != nil {
				r.anchors[v.Name.GetToken().Value] = v.Value
			}
			n = v.Value
		case *ast.AliasNode:
			name := ""
			if v.Value != nil {
				name = v.Value.GetToken().Value
			}
			target, ok := r.anchors[name]
			if !ok {
				r.probs.add(r.nodePos(v), "", "alias *%s refers to no anchor defined above it", name)
				return nil
			}
			n = target
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
	return n
}

// nodePos is where a node starts: a block mapping at its first key, anything else at its token.
func (r *reader) nodePos(n ast.Node) Pos {
	switch v := n.(type) {
	case nil:
		return Pos{File: r.file, Line: 1, Column: 1}
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 {
			return r.nodePos(v.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return r.nodePos(v.Key)
	case *ast.AnchorNode:
		if v.Start != nil {
			return r.tokenPos(v.Start.Position.Line, v.Start.Position.Column)
		}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{File: r.file}
	}
	return r.tokenPos(tk.Position.Line, tk.Position.Column)
}

func (r *reader) tokenPos(line, col int) Pos { return Pos{File: r.file, Line: line, Column: col} }

// syntaxHint explains the one syntax error playbooks invite: a key with [ ] (a matrix path into
// the timeline) inside a {flow} mapping, where brackets are YAML punctuation.
func syntaxHint(data []byte, line int) string {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	if l := lines[line-1]; strings.Contains(l, "{") && strings.Contains(l, "timeline[") {
		return `; inside { } a key with brackets must be quoted ("timeline[0].burst.messages": [...]), or write the mapping in block style`
	}
	return ""
}

func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return fmt.Sprintf("%q", v.Value)
	default:
		return fmt.Sprintf("%q", n.GetToken().Value)
	}
}
