package loadgen

import (
	"testing"
	"time"

	"github.com/rig-dev/rig/loadgen/loadspec"
)

// A config file's sections map to the options of each mode.
func TestOptionsFromConfig(t *testing.T) {
	text := `{
  "servers": ["10.0.1.5:7001", "10.0.1.6:7001"],
  "instruments": 8,
  "probe_price": 2,
  "conn": {"dial_timeout": "1s", "keepalive": 500000000, "dead_after": "20s", "leader_timeout": "300ms"},
  "preload": {"orders": "5M", "levels": 50, "batch": 2000, "in_flight": 8, "seed": 7},
  "probe": {"rate": "5k/s", "duration": "3m50s", "grace": "7s", "out": "/tmp/x", "control": "/tmp/x/ctl/loadgen.sock"},
  "burst": {"messages": "50k", "every": "1s", "count": 5, "out": "/tmp/b"}
}`
	c, err := loadspec.ParseConfig("lg.json", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p := ProbeOptionsFrom(c)
	if p.Rate != 5000 || p.Duration != 230*time.Second || p.Grace != 7*time.Second || p.Out != "/tmp/x" || p.Instruments != 8 || p.Price != 2 ||
		p.Conn.KeepAlive != 500*time.Millisecond || p.Conn.DeadAfter != 20*time.Second || p.Conn.LeaderTimeout != 300*time.Millisecond || len(p.Servers) != 2 || c.Probe.Control != "/tmp/x/ctl/loadgen.sock" {
		t.Errorf("probe options %+v", p)
	}
	pl := PreloadOptionsFrom(c)
	if pl.Orders != 5_000_000 || pl.Levels != 50 || pl.Batch != 2000 || pl.InFlight != 8 || pl.Seed != 7 || pl.Instruments != 8 || pl.Conn.DialTimeout != time.Second {
		t.Errorf("preload options %+v", pl)
	}
	b := BurstOptionsFrom(c)
	if b.Series.Messages != 50_000 || b.Series.Every != time.Second || b.Series.Count != 5 || b.Out != "/tmp/b" {
		t.Errorf("burst options %+v", b)
	}
}
