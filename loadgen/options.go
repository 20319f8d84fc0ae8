package loadgen

import (
	"time"

	"github.com/rig-dev/rig/loadgen/loadspec"
)

// PreloadOptionsFrom maps a config to Preload's options (Logger and Progress are the caller's).
func PreloadOptionsFrom(c loadspec.Config) PreloadOptions {
	return PreloadOptions{BookShape: c.Book(), Servers: c.Servers, Batch: c.Preload.Batch, InFlight: c.Preload.InFlight, Conn: connFrom(c)}
}

// ProbeOptionsFrom maps a config to Probe's options (Logger is the caller's).
func ProbeOptionsFrom(c loadspec.Config) ProbeOptions {
	p := c.Probe
	return ProbeOptions{
		Servers: c.Servers, Rate: float64(p.Rate), Duration: time.Duration(p.Duration),
		Grace: time.Duration(p.Grace), Out: p.Out, Instruments: c.Instruments, Price: c.ProbePrice,
		Interval: time.Duration(p.Interval), StartTimeout: time.Duration(c.StartTimeout), Conn: connFrom(c),
		Spin: time.Duration(p.Spin),
	}
}

// BurstOptionsFrom maps a config to Burst's options (Logger is the caller's).
func BurstOptionsFrom(c loadspec.Config) BurstOptions {
	return BurstOptions{
		Servers: c.Servers, Series: c.Burst.Series(), Grace: time.Duration(c.Burst.Grace), Out: c.Burst.Out,
		Instruments: c.Instruments, Price: c.ProbePrice, StartTimeout: time.Duration(c.StartTimeout), Conn: connFrom(c),
	}
}

func connFrom(c loadspec.Config) ConnOptions {
	return ConnOptions{
		DialTimeout:   time.Duration(c.Conn.DialTimeout),
		KeepAlive:     time.Duration(c.Conn.KeepAlive),
		DeadAfter:     time.Duration(c.Conn.DeadAfter),
		LeaderTimeout: time.Duration(c.Conn.LeaderTimeout),
	}
}
