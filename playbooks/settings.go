package playbooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/untrusted"
)

// The engine section's own keys; every other key is a setting of the driver's table.
var engineKeys = []string{"driver", "command", "settings", "settings_file", "bytes_per_order", "recording", "admin_gc", "preload_rate", "burst_client", "book_capture"}

// Resolve finds the engine's driver and its settings table.
func (e Engine) Resolve() (driver.Driver, driver.Table, error) {
	d, err := e.drivers.Lookup(e.DriverName())
	if err != nil {
		return nil, nil, err
	}
	t, err := d.Settings(e.Declared)
	if err != nil {
		return nil, nil, err
	}
	return d, t, nil
}

// Resolved is the engine's settings resolved once, at plan time: the driver's name, its table and
// the values asked (Settings), for the manifest to keep beside the values in effect.
func (e Engine) Resolved() (driver.Resolved, error) {
	_, t, err := e.Resolve()
	if err != nil {
		return driver.Resolved{}, err
	}
	return driver.Resolved{Driver: e.DriverName(), Table: t, Asked: e.Settings()}, nil
}

// EngineDriver is the engine's driver, or nil when it does not resolve (a parsed playbook's
// always does).
func (e Engine) EngineDriver() driver.Driver {
	d, _, _ := e.Resolve()
	return d
}

// Table is the driver's settings table (nil when the driver does not resolve).
func (e Engine) Table() driver.Table {
	_, t, _ := e.Resolve()
	return t
}

// Settings are the settings this playbook asks for, by name, canonical (driver.Setting.Canon):
// every one it sets, every other one with a default in the table, and, with engine.recording
// on, the ones that turn the engine's own recorder on (driver.WithRecording) unless it sets them.
// Decoded from a manifest, without its driver, they are the values it asked (Values).
func (e Engine) Settings() driver.Values {
	out := driver.Values{}
	d, table, err := e.Resolve()
	if err != nil {
		maps.Copy(out, e.Values)
		return out
	}
	for _, s := range table {
		if s.Default != "" {
			if c, err := s.Canon(s.Default); err == nil {
				out[s.Name] = c
			}
		}
	}
	for k, v := range e.Values {
		out[k] = v
	}
	if e.Recorded() {
		out = driver.WithRecording(d, out)
	}
	return out
}

// BytesPerOrder is the resident memory one resting order costs each server, and who says so: the
// driver, which measured its engine (driver.MemoryEstimator), or the playbook
// (engine.bytes_per_order). 0 when neither knows: the book's memory is then not checked.
func (e Engine) BytesPerOrder() (int64, string) {
	if m, ok := e.EngineDriver().(driver.MemoryEstimator); ok {
		return m.BytesPerOrder(), "as measured for the " + e.DriverName() + " engine"
	}
	if e.OrderBytes > 0 {
		return e.OrderBytes, "as engine.bytes_per_order says"
	}
	return 0, ""
}

// OffersAdmin says whether the engine answers an optional admin call (engine.AdminGC), and who
// says so: its driver (driver.AdminOfferer) or the playbook (engine.admin_gc).
func (e Engine) OffersAdmin(path string) bool {
	if o, ok := e.EngineDriver().(driver.AdminOfferer); ok && o.OffersAdmin(path) {
		return true
	}
	return path == engine.AdminGC && e.AdminGC
}

// BurstClient is the command line (after engine.command.binary) that sends a burst through the
// engine's own client on a client node (engine.burst_client); nil when bursts go to the
// contract's UDP ingress, as the reference engine takes them.
func (e Engine) BurstClient() []string {
	if e.Command == nil || e.BurstArgs == "" {
		return nil
	}
	return append([]string{e.Command.Binary}, strings.Fields(e.BurstArgs)...)
}

// BookCapture is the command line (after engine.command.binary) that captures a preloaded book
// from a stopped server's data folder (engine.book_capture); nil when the engine cannot. Its
// contract (docs/engines.md, "Stored books captured by the engine"): with "version" appended it
// prints the engine's version; with "capture DATA OUT" appended it writes the book's files
// under OUT, each at its path relative to DATA, and prints those paths, one a line.
func (e Engine) BookCapture() []string {
	if e.Command == nil || e.BookCaptureArgs == "" {
		return nil
	}
	return append([]string{e.Command.Binary}, strings.Fields(e.BookCaptureArgs)...)
}

// StoresBooks reports whether a run's preloaded book can be stored for later runs: its driver
// writes one (driver.BookInstaller) or the engine captures its own (BookCapture).
func (e Engine) StoresBooks() bool {
	_, ok := e.EngineDriver().(driver.BookInstaller)
	return ok || e.BookCapture() != nil
}

// BookStoreName is the name a stored book of this engine has in the book store beside its key:
// "" for a book the driver writes; for a captured one, the folder of engine.command.binary
// (the engine's own folder), so two engines' books of the same preload never meet.
func (e Engine) BookStoreName() string {
	if e.BookCapture() == nil {
		return ""
	}
	return filepath.Base(filepath.Dir(e.Command.Binary))
}

// Int is an asked integer or bytes setting.
func (e Engine) Int(name string) (int64, bool) {
	v, ok := e.Settings()[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// declareHint tells a command-driven playbook where its settings come from.
func declareHint(e Engine) string {
	if _, ok := e.EngineDriver().(driver.Templater); ok {
		return " (a command-driven engine's settings are the ones engine.settings declares)"
	}
	return ""
}

// engineField is the field engine.NAME for a setting of the driver's table.
func engineField(s driver.Setting) field {
	return field{
		set: func(p *Playbook, raw string) error {
			c, err := s.Canon(raw)
			if err != nil {
				return err
			}
			if p.Engine.Values == nil {
				p.Engine.Values = driver.Values{}
			}
			p.Engine.Values[s.Name] = c
			return nil
		},
		get: func(p *Playbook) string { return s.Show(p.Engine.Settings()[s.Name]) },
	}
}

// engineSection reads the engine section: the driver and its declared settings first, whatever
// order the file has them in, so every setting key is checked against the table.
func (r *reader) engineSection(p *Playbook, n ast.Node) {
	const name = "engine"
	r.pos[name] = r.nodePos(n)
	var names []string
	if d, err := r.drivers.Lookup(driver.Default); err == nil {
		t, _ := d.Settings(nil)
		names = t.Names()
	}
	pairs, ok := r.mapping(n, name, "a mapping with "+strings.Join(append(names, engineKeys...), ", ")+" (the settings of engine.driver's table)")
	if !ok {
		return
	}
	byKey := map[string]*ast.MappingValueNode{}
	for _, kv := range pairs {
		if k, ok := r.keyText(kv); ok && slices.Contains(engineKeys, k) {
			byKey[k] = kv
			r.present[name+"."+k] = true
			r.pos[name+"."+k] = r.nodePos(kv.Value)
		}
	}
	if kv := byKey["driver"]; kv != nil {
		r.scalarField(p, "engine.driver", kv.Value)
	}
	if kv := byKey["settings"]; kv != nil {
		r.pos["engine.settings"] = r.nodePos(kv.Value)
		if kv2 := byKey["settings_file"]; kv2 != nil {
			r.probs.add(r.nodePos(kv2.Key), "engine.settings_file", "set beside engine.settings; declare the settings in one of them")
		}
		p.Engine.Declared = r.declaredSettings(kv.Value, "engine.settings")
	} else if kv := byKey["settings_file"]; kv != nil {
		if v, ok := r.scalar(kv.Value, "engine.settings_file"); ok {
			p.Engine.SettingsFile = v
			p.Engine.Declared = r.settingsFile(v, r.nodePos(kv.Value))
		}
	}
	if r.failed["engine.driver"] || r.failed["engine.settings"] {
		r.failed[name] = true
		return
	}
	_, table, err := p.Engine.Resolve()
	if err != nil {
		at := "engine.driver"
		if len(p.Engine.Declared) > 0 {
			at = "engine.settings"
		}
		r.probs.add(r.posOf(at), at, "%v", err)
		r.failed[name] = true
		return
	}
	if kv := byKey["command"]; kv != nil {
		r.engineCommand(p, kv.Value)
	}
	if kv := byKey["bytes_per_order"]; kv != nil {
		r.scalarField(p, "engine.bytes_per_order", kv.Value)
	}
	if kv := byKey["recording"]; kv != nil {
		r.scalarField(p, "engine.recording", kv.Value)
	}
	if kv := byKey["admin_gc"]; kv != nil {
		r.scalarField(p, "engine.admin_gc", kv.Value)
	}
	if kv := byKey["preload_rate"]; kv != nil {
		r.scalarField(p, "engine.preload_rate", kv.Value)
	}
	if kv := byKey["burst_client"]; kv != nil {
		r.scalarField(p, "engine.burst_client", kv.Value)
		if p.Engine.Command == nil {
			r.probs.add(r.nodePos(kv.Value), "engine.burst_client", "needs engine.command: its arguments go to engine.command.binary on a client node")
		}
	}
	if kv := byKey["book_capture"]; kv != nil {
		r.scalarField(p, "engine.book_capture", kv.Value)
		if p.Engine.Command == nil {
			r.probs.add(r.nodePos(kv.Value), "engine.book_capture", "needs engine.command: its arguments go to engine.command.binary on a server node")
		}
	}
	allowed := append(table.Names(), engineKeys...)
	for _, kv := range pairs {
		key, ok := r.keyText(kv)
		if !ok || slices.Contains(engineKeys, key) {
			continue
		}
		if key, ok = r.key(kv, name, allowed); !ok {
			continue
		}
		path := name + "." + key
		r.present[path] = true
		r.scalarField(p, path, kv.Value)
	}
}

var settingKeys = []string{"kind", "default", "render", "values", "min", "max", "help"}

// declaredSettings reads a mapping of setting name -> {kind, default, render, values, min, max,
// help}, checking each declaration where it stands.
func (r *reader) declaredSettings(n ast.Node, path string) driver.Table {
	want := "a mapping of setting name -> {kind: " + strings.Join(kindNames(), "|") + ", default, render, values}, e.g. {my.flush.interval: {kind: duration, render: nanos}}"
	pairs, ok := r.mapping(n, path, want)
	if !ok {
		r.failed[path] = true
		return nil
	}
	var t driver.Table
	for _, kv := range pairs {
		name, ok := r.keyText(kv)
		if !ok {
			r.failed[path] = true
			continue
		}
		spath := path + "." + name
		if strings.ContainsAny(name, " \t\n{}\"'") || slices.Contains(engineKeys, name) {
			r.probs.add(r.nodePos(kv.Key), spath, "%q is not a setting name; want the name the engine knows it by, e.g. aeron.publication.heartbeat.timeout (not %s)", name, strings.Join(engineKeys, ", "))
			r.failed[path] = true
			continue
		}
		fields, ok := r.mapping(kv.Value, spath, "a mapping with "+strings.Join(settingKeys, ", ")+", e.g. {kind: duration, render: nanos}")
		if !ok {
			r.failed[path] = true
			continue
		}
		s := driver.Setting{Name: name}
		for _, f := range fields {
			key, ok := r.key(f, spath, settingKeys)
			if !ok {
				r.failed[path] = true
				continue
			}
			fpath := spath + "." + key
			if key == "values" {
				seq, ok := r.deref(f.Value).(*ast.SequenceNode)
				if !ok {
					r.probs.add(r.nodePos(f.Value), fpath, "want a list of the values a one-of setting takes, e.g. [g1, zgc]")
					r.failed[path] = true
					continue
				}
				for i, v := range seq.Values {
					if sv, ok := r.scalar(v, fmt.Sprintf("%s[%d]", fpath, i)); ok {
						s.Values = append(s.Values, sv)
					}
				}
				continue
			}
			v, ok := r.scalar(f.Value, fpath)
			if !ok {
				r.failed[path] = true
				continue
			}
			switch key {
			case "kind":
				s.Kind = driver.Kind(v)
			case "default":
				s.Default = v
			case "render":
				s.Render = driver.Render(v)
			case "min":
				s.Min = v
			case "max":
				s.Max = v
			case "help":
				s.Help = v
			}
		}
		if s.Kind == "" {
			r.probs.add(r.nodePos(kv.Value), spath+".kind", "missing; want one of %s", strings.Join(kindNames(), ", "))
			r.failed[path] = true
			continue
		}
		if err := s.Check(); err != nil {
			r.probs.add(r.nodePos(kv.Value), spath, "%v", err)
			r.failed[path] = true
			continue
		}
		t = append(t, s)
	}
	return t
}

func kindNames() []string {
	out := make([]string, len(driver.Kinds))
	for i, k := range driver.Kinds {
		out[i] = string(k)
	}
	return out
}

// settingsFile reads engine.settings_file: a YAML file beside the playbook holding the same
// mapping engine.settings would. Its problems point into it.
func (r *reader) settingsFile(name string, at Pos) driver.Table {
	path := r.localPath(name)
	data, err := untrusted.ReadFile(path, "settings file") // regular file, 1 MiB at most
	if err != nil {
		r.probs.add(at, "engine.settings_file", "cannot read the settings file: %v (a path relative to the playbook's folder)", err)
		r.failed["engine.settings"] = true
		return nil
	}
	sub := &reader{file: path, probs: problems{file: path}, pos: map[string]Pos{}, failed: map[string]bool{}, anchors: map[string]ast.Node{}, present: map[string]bool{}}
	f, err := untrusted.ParseYAML(path, bytes.TrimPrefix(data, utf8BOM)) // depth, values, aliases bounded
	var t driver.Table
	switch {
	case err != nil:
		var le *untrusted.Error
		if errors.As(err, &le) {
			sub.probs.add(Pos{File: path, Line: le.Line, Column: le.Column}, "", "%s", le.Msg)
		} else {
			sub.probs.add(Pos{File: path, Line: 1, Column: 1}, "", "YAML syntax: %v", err)
		}
	case len(f.Docs) == 0 || f.Docs[0].Body == nil:
		sub.probs.add(Pos{File: path, Line: 1, Column: 1}, "", "the settings file is empty; want a mapping of setting name -> {kind, default, render}")
	default:
		t = sub.declaredSettings(f.Docs[0].Body, "engine.settings")
	}
	for _, pr := range sub.probs.list {
		r.probs.add(pr.Pos, pr.Path, "%s", pr.Msg)
	}
	if len(sub.probs.list) > 0 {
		r.failed["engine.settings"] = true
	}
	return t
}

// legacyEngine is the engine section of manifests written before drivers owned their settings:
// the reference engine's settings as fields beside driver, integers and durations in
// nanoseconds, zero meaning the engine's default except for sync_level, where 0 is no sync. The
// form is frozen, so it is declared here rather than taken from the reference driver, whose
// table may change.
var legacyEngine = driver.Table{
	{Name: driver.SyncLevel, Kind: driver.Integer},
	{Name: driver.SnapshotBlock, Kind: driver.Bytes},
	{Name: driver.EncodeThreads, Kind: driver.Integer},
	{Name: driver.HeartbeatTimeout, Kind: driver.Duration},
	{Name: driver.ElectionTimeout, Kind: driver.Duration},
	{Name: "udp_rcvbuf", Kind: driver.Bytes},
	{Name: "udp_nak_delay", Kind: driver.Duration},
	{Name: "udp_recv_nice", Kind: driver.Integer},
}

// engineJSON is Engine's JSON: the values under "values", typed by kind (a number for integer and
// bytes, true/false for booleans, text otherwise).
type engineJSON struct {
	Driver       string                     `json:"driver,omitempty"`
	Command      *EngineCommand             `json:"command,omitempty"`
	Declared     driver.Table               `json:"settings,omitempty"`
	SettingsFile string                     `json:"settings_file,omitempty"`
	OrderBytes   int64                      `json:"bytes_per_order,omitempty"`
	Recording    string                     `json:"recording,omitempty"`
	AdminGC      bool                       `json:"admin_gc,omitempty"`
	PreloadRate  float64                    `json:"preload_rate,omitempty"`
	Values       map[string]json.RawMessage `json:"values,omitempty"`
}

// MarshalJSON writes every asked setting (defaults included) under "values".
func (e Engine) MarshalJSON() ([]byte, error) {
	out := engineJSON{Driver: e.Driver, Command: e.Command, Declared: e.Declared, SettingsFile: e.SettingsFile, OrderBytes: e.OrderBytes, Recording: e.Recording, AdminGC: e.AdminGC,
		PreloadRate: e.PreloadRate}
	table := e.Table()
	for name, v := range e.Settings() {
		if out.Values == nil {
			out.Values = map[string]json.RawMessage{}
		}
		s, _ := table.Lookup(name)
		switch s.Kind {
		case driver.Integer, driver.Bytes, driver.Boolean:
			out.Values[name] = json.RawMessage(v)
		default:
			b, _ := json.Marshal(v)
			out.Values[name] = b
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads MarshalJSON's output, and the form manifests had before drivers owned
// their settings: the reference engine's settings beside driver, a duration in nanoseconds,
// zero meaning the engine's default.
func (e *Engine) UnmarshalJSON(b []byte) error {
	var in engineJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = Engine{Driver: in.Driver, Command: in.Command, Declared: in.Declared, SettingsFile: in.SettingsFile, OrderBytes: in.OrderBytes, Recording: in.Recording, AdminGC: in.AdminGC,
		PreloadRate: in.PreloadRate}
	raw := in.Values
	legacy := raw == nil
	if legacy {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(b, &all); err != nil {
			return err
		}
		for _, k := range engineKeys {
			delete(all, k)
		}
		raw = all
	}
	// Decoded without the driver that ran it, a setting is typed by the contract's table, and
	// the legacy form by the fields it was written from.
	table := driver.Contract
	if legacy {
		table = legacyEngine
	}
	for name, rv := range raw {
		var v any
		if err := json.Unmarshal(rv, &v); err != nil {
			return fmt.Errorf("engine value %s: %w", name, err)
		}
		s, known := table.Lookup(name)
		if legacy && name != driver.SyncLevel && (v == float64(0) || v == "" || v == nil) {
			continue
		}
		canon := strings.Trim(string(rv), `"`)
		if known {
			c, err := s.Reported(v)
			if err != nil {
				return fmt.Errorf("engine value %s: %w", name, err)
			}
			canon = c
		}
		if e.Values == nil {
			e.Values = driver.Values{}
		}
		e.Values[name] = canon
	}
	return nil
}
