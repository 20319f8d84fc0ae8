package loadspec

import (
	"fmt"
	"strconv"
	"time"

	"github.com/rig-dev/rig/internal/units"
)

// Defaults of the probe and burst streams that their flags show.
const (
	DefaultGrace    = 5 * time.Second // waiting for outstanding answers after the schedule
	DefaultInterval = time.Second     // HDR interval log interval
)

// Flag is a Config field that `rig loadgen preload|probe|burst` takes as a flag too (flags
// override the file). Each is declared here, beside the field it sets, so the command line
// cannot drift from the file.
type Flag struct {
	Name  string // without the dashes
	Type  string // what help shows it takes: count, int, duration, ...
	Def   string // the default help shows ("" : none)
	Usage string
	Bool  bool // a switch: --udp alone is --udp=true
	Set   func(c *Config, v string) error
}

func countFlag(name, usage string, field func(*Config) *Count) Flag {
	return Flag{Name: name, Type: "count", Usage: usage, Set: func(c *Config, v string) error {
		n, err := units.ParseCount(v)
		*field(c) = Count(n)
		return err
	}}
}

func sizeFlag(name, usage string, field func(*Config) *Count) Flag {
	return Flag{Name: name, Type: "size", Usage: usage, Set: func(c *Config, v string) error {
		n, err := units.ParseSize(v)
		*field(c) = Count(n)
		return err
	}}
}

func rateFlag(name, usage string, field func(*Config) *Rate) Flag {
	return Flag{Name: name, Type: "rate", Usage: usage, Set: func(c *Config, v string) error {
		r, err := units.ParseRate(v)
		*field(c) = Rate(r)
		return err
	}}
}

func durationFlag(name string, def time.Duration, usage string, field func(*Config) *Duration) Flag {
	f := Flag{Name: name, Type: "duration", Usage: usage, Set: func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		*field(c) = Duration(d)
		return err
	}}
	if def != 0 {
		f.Def = def.String()
	}
	return f
}

func intFlag[T int | int64 | uint64](name string, def T, usage string, field func(*Config) *T) Flag {
	var zero T
	typ := fmt.Sprintf("%T", zero)
	return Flag{Name: name, Type: typ, Def: fmt.Sprint(def), Usage: usage, Set: func(c *Config, v string) error {
		var n T
		var err error
		switch any(zero).(type) {
		case uint64:
			var u uint64
			u, err = strconv.ParseUint(v, 0, 64)
			n = T(u)
		default:
			var i int64
			i, err = strconv.ParseInt(v, 0, 64)
			n = T(i)
		}
		*field(c) = n
		return err
	}}
}

func stringFlag(name, usage string, field func(*Config) *string) Flag {
	return Flag{Name: name, Type: "string", Usage: usage, Set: func(c *Config, v string) error {
		*field(c) = v
		return nil
	}}
}

func boolFlag(name, usage string, field func(*Config) *bool) Flag {
	return Flag{Name: name, Type: "bool", Def: "false", Usage: usage, Bool: true, Set: func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		*field(c) = b
		return err
	}}
}

// PreloadFlags are `rig loadgen preload`'s.
var PreloadFlags = []Flag{
	countFlag("orders", "resting orders to build, e.g. 100k or 5M", func(c *Config) *Count { return &c.Preload.Orders }),
	intFlag("instruments", DefaultInstruments, "instruments to spread the orders over", func(c *Config) *int { return &c.Instruments }),
	intFlag("levels", DefaultLevels, "price levels per side and instrument", func(c *Config) *int { return &c.Preload.Levels }),
	intFlag("batch", DefaultBatch, "orders per batch (one raft entry)", func(c *Config) *int { return &c.Preload.Batch }),
	intFlag("in-flight", DefaultInFlight, "batches pipelined before waiting for an answer", func(c *Config) *int { return &c.Preload.InFlight }),
	intFlag[uint64]("seed", DefaultSeed, "seed of the book's levels and quantities", func(c *Config) *uint64 { return &c.Preload.Seed }),
	stringFlag("out", "directory to write preload.json into (optional)", func(c *Config) *string { return &c.Preload.Out }),
}

// ProbeFlags are `rig loadgen probe`'s.
var ProbeFlags = []Flag{
	rateFlag("rate", "probes per second, e.g. 1000/s", func(c *Config) *Rate { return &c.Probe.Rate }),
	durationFlag("duration", 0, "length of the schedule (0: until SIGINT/SIGTERM or POST /stop)", func(c *Config) *Duration { return &c.Probe.Duration }),
	durationFlag("grace", DefaultGrace, "how long to wait for outstanding answers after the schedule ends", func(c *Config) *Duration { return &c.Probe.Grace }),
	durationFlag("interval", DefaultInterval, "HDR interval log interval", func(c *Config) *Duration { return &c.Probe.Interval }),
	stringFlag("out", "directory for probes.bin, probes.hlog, stats.json", func(c *Config) *string { return &c.Probe.Out }),
	stringFlag("control", "serve the control API on this Unix socket (absolute path; its folder is made 0700)", func(c *Config) *string { return &c.Probe.Control }),
	stringFlag("pid-file", "write the probe run's pid here while it runs (absolute path), for the node's samplers", func(c *Config) *string { return &c.Probe.PIDFile }),
	intFlag("instruments", DefaultInstruments, "instruments the probes rotate over", func(c *Config) *int { return &c.Instruments }),
	intFlag[int64]("price", DefaultProbePrice, "limit price of the IOC buy probes (below every resting ask)", func(c *Config) *int64 { return &c.ProbePrice }),
}

// BurstFlags are `rig loadgen burst`'s.
var BurstFlags = []Flag{
	countFlag("messages", "messages per burst, e.g. 50k", func(c *Config) *Count { return &c.Burst.Messages }),
	durationFlag("every", 0, "time between burst starts", func(c *Config) *Duration { return &c.Burst.Every }),
	intFlag("count", 1, "number of bursts", func(c *Config) *int { return &c.Burst.Count }),
	durationFlag("grace", DefaultGrace, "how long to wait for outstanding answers after the last burst", func(c *Config) *Duration { return &c.Burst.Grace }),
	stringFlag("out", "directory for bursts.bin and bursts.json", func(c *Config) *string { return &c.Burst.Out }),
	boolFlag("udp", "send datagrams to the leader's UDP ingress (docs/wire.md) instead of orders over TCP", func(c *Config) *bool { return &c.Burst.UDP }),
	sizeFlag("size", "UDP datagram size, 72B..1400B (default 170B)", func(c *Config) *Count { return &c.Burst.Size }),
	intFlag("senders", 0, "UDP senders sending each burst at once (default 1)", func(c *Config) *int { return &c.Burst.Senders }),
}
