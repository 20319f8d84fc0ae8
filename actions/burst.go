package actions

import (
	"context"
	"fmt"
	"image/color"
	"strconv"
	"time"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// Burst defaults and limits.
const (
	DefaultBurstCount = 1
	DefaultBurstSize  = loadspec.DefaultBurstSize // bytes: a typical market-data message
	// MaxSendersPerClient is the most burst senders one client node runs: one load generator's
	// (each is a socket and a 64 MiB retransmit ring).
	MaxSendersPerClient = loadspec.MaxSenders
)

// Burst sends Messages at wire speed, Count times, Every apart: UDP datagrams of Size bytes to
// the leader's UDP ingress, or messages through the engine's own burst client (Context.OwnClient), from Senders senders at once, each sending Messages. The runner
// spreads the senders over the client nodes (Env.Burst).
type Burst struct {
	Messages int           `json:"messages"`
	Every    time.Duration `json:"every"`
	Count    int           `json:"count"`
	Size     int           `json:"size"`              // bytes per datagram
	Senders  int           `json:"senders,omitempty"` // 0: one per client node
}

// ActBurst is the burst action's name in playbooks and events; its payload is the series as
// sent (rundir.BurstSeries, the load generator's shape too).
const ActBurst rundir.ActionName = "burst"

// BurstOf is e's payload when e is a burst, else nil.
func BurstOf(e rundir.Event) *rundir.BurstSeries { return payloadOf[rundir.BurstSeries](e, ActBurst) }

func (*Burst) Kind() string { return string(ActBurst) }
func (*Burst) Events() []EventKind {
	return []EventKind{{Name: ActBurst, Payload: func() any { return &rundir.BurstSeries{} }, Shapes: []Shape{ShapeBurst},
		Marker: color.RGBA{R: 0x80, G: 0x50, B: 0x20, A: 0xff}}}
}

func (*Burst) Fields() []Field {
	return []Field{
		intField("messages", units.ParseCount, 1, 100_000_000, "1..100M messages per burst, e.g. 50k",
			func(v int64) string { return units.FormatCount(v) }, func(b *Burst) *int { return &b.Messages }),
		durationField("every", time.Millisecond, units.MaxDuration, "e.g. 1s",
			func(b *Burst) *time.Duration { return &b.Every }),
		intField("count", units.ParseCount, 1, 1_000_000, "1..1M bursts", itoa, func(b *Burst) *int { return &b.Count }),
		intField("size", units.ParseSize, 88, 1400, "88..1400 bytes per datagram, e.g. 170", itoa, func(b *Burst) *int { return &b.Size }),
		{Key: "senders",
			Set: func(s Spec, raw string) error {
				v, err := units.ParseInt(raw)
				if err != nil || v < 1 || v > 64 {
					return fmt.Errorf("%q is out of range; want 1..64 senders, spread over the client nodes", raw)
				}
				s.(*Burst).Senders = int(v)
				return nil
			},
			Get: func(s Spec) string { return strconv.Itoa(s.(*Burst).Senders) }},
	}
}

func (b *Burst) Complete(seen map[string]bool) []Problem {
	var out []Problem
	if !seen["messages"] {
		out = append(out, problem("messages", "missing", nil, "missing; want the messages per burst, e.g. messages: 50k"))
	}
	if b.Count > 1 && !seen["every"] {
		out = append(out, problem("every", "missing", nil, "missing; count is %d, so want the time between bursts, e.g. every: 1s", b.Count))
	}
	return out
}

func (b *Burst) Check(c Context) []Problem {
	var out []Problem
	if b.Count < 1 {
		return nil // its own field said so
	}
	if max := MaxSendersPerClient * c.Clients; b.Senders > max {
		out = append(out, problem("senders", "senders-per-client", []string{"cluster.clients"},
			"%d senders over %d client node(s) is more than %d: at most %d per client node (each is a socket and a 64 MiB retransmit ring); want fewer senders or more clients",
			b.Senders, c.Clients, max, MaxSendersPerClient))
	}
	if last := c.At + time.Duration(b.Count-1)*b.Every; b.Count > 1 && c.At < c.End && last >= c.End {
		out = append(out, problem("count", "burst-after-end", []string{"duration", "@at", "@every"},
			"the last of %d bursts starts at %s (at %s + %d x %s), at or after the end of the run (duration %s); want fewer bursts or a longer run",
			b.Count, units.FormatDuration(last), units.FormatDuration(c.At), b.Count-1, units.FormatDuration(b.Every), units.FormatDuration(c.End)))
	}
	return out
}

func (b *Burst) Describe(v Varied) string {
	senders := "one sender per client node"
	if b.Senders > 0 || v.Varies("senders") {
		senders = v.Value("senders", strconv.Itoa(b.Senders)) + " sender(s)"
	}
	what := "UDP datagrams at wire speed"
	if v.Context().OwnClient {
		what = "messages at wire speed into the cluster's ingress through the engine's burst client"
	}
	s := fmt.Sprintf("burst of %s x %s B %s from each of %s",
		v.Value("messages", units.FormatCount(int64(b.Messages))), v.Value("size", strconv.Itoa(b.Size)), what, senders)
	if b.Count > 1 || v.Varies("count") {
		s += fmt.Sprintf(", %s times, every %s", v.Value("count", strconv.Itoa(b.Count)), v.Value("every", units.FormatDuration(b.Every)))
	}
	return s
}

func (b *Burst) String() string {
	s := fmt.Sprintf("burst of %d x %d B", b.Messages, b.Size)
	if b.Senders > 0 {
		s += fmt.Sprintf(" from each of %d senders", b.Senders)
	}
	if b.Count > 1 {
		s += fmt.Sprintf(", %d times every %s", b.Count, b.Every)
	}
	return s
}

// Sends implements BurstSender.
func (b *Burst) Sends() rundir.BurstSeries {
	return rundir.BurstSeries{Messages: b.Messages, Every: b.Every, Count: b.Count, Size: b.Size, Senders: b.Senders}
}

// Datagrams implements Datagrammer: bursts are UDP datagrams.
func (*Burst) Datagrams() string { return "burst" }

// AddWrites counts the bursts' orders: every datagram is an order through the log.
func (b *Burst) AddWrites(w *driver.Workload, clients int) {
	senders := b.Senders
	if senders == 0 {
		senders = clients
	}
	w.BurstOrders += int64(b.Count) * int64(b.Messages) * int64(senders)
}

func (b *Burst) Run(ctx context.Context, env Env) error {
	bu, err := Need[Burster](env, "burst")
	if err != nil {
		return err
	}
	return bu.Burst(ctx, b.Sends(), func(series rundir.BurstSeries) error {
		return record(env, time.Time{}, "", ActBurst, "", series)
	})
}
