package loadspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rig-dev/rig/internal/units"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/rundir"
)

// Config is the load generator's configuration file (`rig loadgen preload|probe|burst --config
// FILE`), one file for every mode; each mode reads the top level and its own section. Flags
// given on the command line override it. Quantities may be written as numbers or as text:
//
//	{
//	  "servers": ["10.0.1.5:7001", "10.0.1.6:7001", "10.0.1.7:7001"],
//	  "instruments": 16,                 // preload spreads over them, probes rotate over them
//	  "probe_price": 1,                  // limit of the IOC buy probes; below every resting ask
//	  "start_timeout": "30s",            // how long to look for a leader before the first probe
//	  "conn": {"dial_timeout": "2s", "keepalive": "1s", "dead_after": "15s", "leader_timeout": "500ms"},
//	  "preload": {"orders": "5M", "levels": 100, "batch": 32768, "in_flight": 8, "seed": 1,
//	              "mid": 1000000, "gap": 100, "max_qty": 100, "first_id": 1, "out": "DIR"},
//	  "probe":   {"rate": "5000/s", "duration": "230s", "grace": "5s", "interval": "1s",
//	              "out": "DIR", "control": "127.0.0.1:7700"},
//	  "burst":   {"messages": 50000, "every": "1s", "count": 5, "out": "DIR",
//	              "udp": true, "size": 170, "senders": 2, "start": "2026-01-02T15:04:05.5Z"}
//	}
//
// (JSON has no comments; they are here for the reader.) Durations are Go durations ("230s",
// "1m30s") or integer nanoseconds; counts are integers or "100k" / "5M" / "1G"; rates are
// numbers or "5000/s". preload.out gets preload.json; probe.out gets probes.bin, probes.hlog,
// stats.json and bursts.bin; burst.out gets bursts.bin and bursts.json.
type Config struct {
	Servers      []string      `json:"servers"`
	Instruments  int           `json:"instruments,omitempty"`
	ProbePrice   int64         `json:"probe_price,omitempty"`
	StartTimeout Duration      `json:"start_timeout,omitempty"`
	Conn         ConnConfig    `json:"conn"`
	Preload      PreloadConfig `json:"preload"`
	Probe        ProbeConfig   `json:"probe"`
	Burst        BurstConfig   `json:"burst"`
}

// ConnConfig is loadgen.ConnOptions in the config file. LeaderTimeout is how long commands wait
// on a silent leader before the client asks the other servers: a run sets it to the engine's
// heartbeat timeout in effect (the longest of its servers'); omitted, the load generator's default.
type ConnConfig struct {
	DialTimeout   Duration `json:"dial_timeout,omitempty"`
	KeepAlive     Duration `json:"keepalive,omitempty"`
	DeadAfter     Duration `json:"dead_after,omitempty"`
	LeaderTimeout Duration `json:"leader_timeout,omitempty"`
}

// PreloadConfig is the preload section (see BookShape and loadgen.PreloadOptions for meanings
// and defaults).
type PreloadConfig struct {
	Orders   Count  `json:"orders"`
	Levels   int    `json:"levels,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	InFlight int    `json:"in_flight,omitempty"`
	Seed     uint64 `json:"seed,omitempty"`
	Mid      int64  `json:"mid,omitempty"`
	Gap      int64  `json:"gap,omitempty"`
	MaxQty   int64  `json:"max_qty,omitempty"`
	FirstID  uint64 `json:"first_id,omitempty"`
	Out      string `json:"out,omitempty"` // directory for preload.json (optional)
}

// ProbeConfig is the probe section (see loadgen.ProbeOptions).
type ProbeConfig struct {
	Rate     Rate     `json:"rate,omitempty"` // omitted by configs for other modes (0 is not a rate)
	Duration Duration `json:"duration"`
	Spin     Duration `json:"spin,omitempty"`
	Grace    Duration `json:"grace,omitempty"`
	Interval Duration `json:"interval,omitempty"`
	Out      string   `json:"out"`
	Control  string   `json:"control,omitempty"` // Unix socket path for the control API (its folder 0700)
	// PIDFile (an absolute path) holds the probe run's pid while it runs, so the node's samplers
	// follow its threads (a late probe is often the send thread's run-queue wait).
	PIDFile string `json:"pid_file,omitempty"`
}

// PIDFile is the probe run's pid file in the client node's agent folder: the runner names it in
// the load generator's config (ProbeConfig.PIDFile) and in the node's samples request.
const PIDFile = "loadgen.pid"

// BurstConfig is the burst section, for `rig loadgen burst` (see loadgen.BurstOptions).
type BurstConfig struct {
	Messages Count    `json:"messages"`
	Every    Duration `json:"every"`
	Count    int      `json:"count"`
	Grace    Duration `json:"grace,omitempty"`
	Out      string   `json:"out"`
	UDP      bool     `json:"udp,omitempty"`
	Size     Count    `json:"size,omitempty"` // UDP datagram bytes
	Senders  int      `json:"senders,omitempty"`
	// Start (RFC 3339, this node's clock) is when burst 0 is due, so load generators on several
	// nodes burst together; empty: at once.
	Start time.Time `json:"start,omitzero"`
	// FirstBurst numbers the bursts in the datagrams from here on (one numbering per run).
	FirstBurst uint32 `json:"first_burst,omitempty"`
}

// Duration is a time.Duration written as a Go duration string or integer nanoseconds.
type Duration time.Duration

// UnmarshalJSON accepts "30s" or 30000000000.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return &badValue{raw: string(b), msg: fmt.Sprintf("duration %q: want a Go duration like 30s or 1m30s", s)}
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return &badValue{raw: string(b), msg: fmt.Sprintf("duration %s: want a string like \"30s\" or integer nanoseconds", b)}
	}
	*d = Duration(n)
	return nil
}

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Count is an integer written as a number or with a k/M/G suffix ("100k", "1.5M").
type Count int64

// UnmarshalJSON accepts 100000 or "100k".
func (c *Count) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	n, err := units.ParseCount(s)
	if err != nil {
		return &badValue{raw: string(b), msg: err.Error()}
	}
	*c = Count(n)
	return nil
}

// Rate is a per-second rate written as a number (per second) or with its unit, "5000/s".
type Rate float64

// UnmarshalJSON accepts 5000 or "5000/s".
func (r *Rate) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '"' {
		var v float64
		if err := json.Unmarshal(b, &v); err != nil || !(v > 0) {
			return &badValue{raw: string(b), msg: "want a rate above 0 per second, e.g. 5000 or \"5000/s\""}
		}
		*r = Rate(v)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := units.ParseRate(s)
	if err != nil {
		return &badValue{raw: string(b), msg: err.Error()}
	}
	*r = Rate(v)
	return nil
}

// ErrConfig classifies a configuration file that cannot be used.
var ErrConfig = errors.New("bad load generator config")

// LoadConfig reads a config file. Unknown keys and malformed values are errors that name
// FILE:LINE:COLUMN.
func LoadConfig(path string) (Config, error) {
	b, err := untrusted.ReadFile(path, "load generator config")
	if err == nil {
		err = untrusted.Check(path, b)
	}
	if err != nil {
		return Config{}, fmt.Errorf("read load generator config: %w", err)
	}
	return ParseConfig(path, b)
}

// ParseConfig parses config text; name is used in error messages.
func ParseConfig(name string, b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&c)
	if err == nil && dec.More() {
		line, col := lineCol(b, dec.InputOffset())
		return Config{}, fmt.Errorf("%w: %s:%d:%d: text after the JSON object", ErrConfig, name, line, col)
	}
	if err == nil {
		return c, nil
	}
	// encoding/json reports most errors only after the whole value: find where they are.
	off := dec.InputOffset()
	msg := strings.TrimPrefix(err.Error(), "json: ")
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
		bv *badValue
	)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		msg = fmt.Sprintf("%s: %s where %s is wanted", te.Field, te.Value, te.Type)
		if s, ok := findSpot(b, func(s jsonSpot) bool { return !s.key && s.path == te.Field }); ok {
			off = s.off
		}
	case errors.As(err, &bv):
		if s, ok := findSpot(b, func(s jsonSpot) bool { return !s.key && s.raw == bv.raw }); ok {
			off, msg = s.off, s.path+": "+bv.msg
		}
	case strings.HasPrefix(msg, "unknown field "):
		field, _ := strconv.Unquote(strings.TrimPrefix(msg, "unknown field "))
		if s, ok := findSpot(b, func(s jsonSpot) bool { return s.key && s.name == field }); ok {
			off, msg = s.off, fmt.Sprintf("unknown key %q in %s", field, orTop(s.parent))
		}
	}
	line, col := lineCol(b, off)
	return Config{}, fmt.Errorf("%w: %s:%d:%d: %s", ErrConfig, name, line, col, msg)
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// badValue is a value a custom decoder refused; raw is its JSON text, to find it in the file.
type badValue struct{ raw, msg string }

func (e *badValue) Error() string { return e.msg }

// jsonSpot is one key or value of a JSON document: its dotted path and where it starts.
type jsonSpot struct {
	path, parent, name string
	key                bool
	off                int64
	raw                string
}

// findSpot walks the document's tokens and returns the first spot matching.
func findSpot(b []byte, match func(jsonSpot) bool) (jsonSpot, bool) {
	type frame struct {
		obj       bool
		path      string
		key       string
		expectKey bool
		idx       int
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	join := func(p, k string) string {
		if p == "" {
			return k
		}
		return p + "." + k
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return jsonSpot{}, false
		}
		end := dec.InputOffset()
		start := before
		for start < end && strings.IndexByte(" \t\r\n:,", b[start]) >= 0 {
			start++
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].expectKey = true
			}
			continue
		}
		if top != nil && top.obj && top.expectKey {
			k, _ := tok.(string)
			s := jsonSpot{path: join(top.path, k), parent: top.path, name: k, key: true, off: start, raw: string(b[start:end])}
			if match(s) {
				return s, true
			}
			top.key, top.expectKey = k, false
			continue
		}
		path, parent, name := "", "", ""
		if top != nil {
			parent = top.path
			if top.obj {
				name = top.key
			} else {
				name = strconv.Itoa(top.idx)
				top.idx++
			}
			path = join(parent, name)
		}
		d, isDelim := tok.(json.Delim)
		raw := string(b[start:end])
		if isDelim {
			raw = ""
		}
		s := jsonSpot{path: path, parent: parent, name: name, off: start, raw: raw}
		if match(s) {
			return s, true
		}
		if isDelim { // '{' or '['
			stack = append(stack, &frame{obj: d == '{', path: path, expectKey: d == '{'})
		} else if top != nil && top.obj {
			top.expectKey = true
		}
	}
}

// Check catches what no single section can: probes that would trade against the preloaded
// book (the probe price must be below the lowest ask the preload can rest).
func (c *Config) Check() error {
	b := c.Book()
	b.Orders = 1 // only the book's shape is checked here
	if err := b.Normalize(); err != nil {
		return fmt.Errorf("%w: preload: %v", ErrConfig, err)
	}
	price := c.ProbePrice
	if price == 0 {
		price = DefaultProbePrice
	}
	if ask := BookRecord(b).AskLow; price >= ask {
		return fmt.Errorf("%w: probe_price %d would trade against the preloaded asks from %d; probes must cross nothing", ErrConfig, price, ask)
	}
	return nil
}

// Book is the shape of the book the preload section builds.
func (c *Config) Book() BookShape {
	p := c.Preload
	return BookShape{Orders: int64(p.Orders), Instruments: c.Instruments, Levels: p.Levels, Seed: p.Seed,
		Mid: p.Mid, Gap: p.Gap, MaxQty: p.MaxQty, FirstID: p.FirstID}
}

// Series is the section's burst series.
func (b BurstConfig) Series() rundir.BurstSeries {
	return rundir.BurstSeries{Messages: int(b.Messages), Every: time.Duration(b.Every), Count: b.Count,
		UDP: b.UDP, Size: int(b.Size), Senders: b.Senders, FirstBurst: b.FirstBurst, Start: b.Start}
}

// BurstSection is the burst section that asks for series s, written to out.
func BurstSection(s rundir.BurstSeries, out string) BurstConfig {
	return BurstConfig{Messages: Count(s.Messages), Every: Duration(s.Every), Count: s.Count, Out: out,
		UDP: s.UDP, Size: Count(s.Size), Senders: s.Senders, Start: s.Start, FirstBurst: s.FirstBurst}
}

func lineCol(b []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(b)))
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
