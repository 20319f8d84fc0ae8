package analysis

import (
	"fmt"
	"math"
	"strings"

	"github.com/rig-dev/rig/rundir"
)

// ClientConn is the load generator's side of the run's faults, from its stats (the manifest's
// loadgen: conn.timeline, conn.holds, send_lag): how often it dialled and resent, and how many
// probes it held for want of a leader, in total and in each fault's window. The load generator
// counts per second and does not know the faults' times, so a window takes the seconds that
// begin in it.
type ClientConn struct {
	Dials        int64 `json:"dials"`
	DialFailures int64 `json:"dial_failures"`
	Reconnects   int64 `json:"reconnects"`
	Resent       int64 `json:"resent"`
	Scheduled    int64 `json:"scheduled"`
	Held         int64 `json:"held"` // probes due while the sender held them: the outages as the client saw them
	Late         int64 `json:"late"`
	// LateConnected are the probes sent late outside every hold; LateConnectedPct their share of
	// the probes due outside every hold.
	LateConnected    int64   `json:"late_connected"`
	LateConnectedPct float64 `json:"late_connected_pct"`
	// LateOutsideFaults are the probes sent late outside every hold that were due outside every
	// fault window (Summary.NormalLeftOut but its snapshots), and LateOutsideFaultsPct their share
	// of the post-warm-up probes due there; absent when the load generator did not count its late
	// messages per second (older folders).
	LateOutsideFaults    *int64        `json:"late_outside_faults,omitempty"`
	LateOutsideFaultsPct *float64      `json:"late_outside_faults_pct,omitempty"`
	Faults               []ClientFault `json:"faults"`
}

// ClientFault is one fault's window, from its action to the next fault's or the end of load.
type ClientFault struct {
	AtS          float64 `json:"at_s"`
	ToS          float64 `json:"to_s"`
	Action       string  `json:"action"`
	Node         string  `json:"node,omitempty"`
	Dials        int64   `json:"dials"`
	DialFailures int64   `json:"dial_failures"`
	Reconnects   int64   `json:"reconnects"`
	Resent       int64   `json:"resent"`
	Held         int64   `json:"held"`           // probes of the holds that began in the window
	LongestHoldS float64 `json:"longest_hold_s"` // the longest of those holds
	// LateConnected are the probes due in the window sent late outside every hold.
	LateConnected int64 `json:"late_connected"`
}

// clientConn is nil for a run whose manifest holds no load generator stats, or stats from a
// load generator that kept no timeline (it dials at least once, so a timeline is never empty).
func (d *runData) clientConn(s *Summary) *ClientConn {
	st := d.man.Loadgen
	if st == nil || len(st.Conn.Timeline) == 0 {
		return nil
	}
	c := &ClientConn{Scheduled: st.Scheduled, Held: st.SendLag.Held, Late: st.SendLag.Late, LateConnected: st.SendLag.LateConnected,
		Faults: []ClientFault{}}
	for _, t := range st.Conn.Timeline {
		c.Dials += t.Dials
		c.DialFailures += t.DialFailures
		c.Reconnects += t.Reconnects
		c.Resent += t.Resent
	}
	if out := st.Scheduled - st.SendLag.Held; out > 0 {
		c.LateConnectedPct = math.Round(1e4*float64(st.SendLag.LateConnected)/float64(out)) / 100
	}
	var faults []rundir.Event
	for _, e := range d.events {
		if e.Action != nil && d.kinds().Disturbs(e.Action) {
			faults = append(faults, e)
		}
	}
	for i, e := range faults {
		from, to := e.T.UnixNano(), d.loadEnd
		if i+1 < len(faults) {
			to = faults[i+1].T.UnixNano()
		}
		f := ClientFault{AtS: d.off(from), ToS: d.off(to), Action: string(e.Action.Name), Node: e.Node}
		// The second the action falls in counts: its dials may follow it within that second.
		lo := from - from%int64(1e9)
		for _, t := range st.Conn.Timeline {
			if at := t.At.UnixNano(); at >= lo && at < to {
				f.Dials += t.Dials
				f.DialFailures += t.DialFailures
				f.Reconnects += t.Reconnects
				f.Resent += t.Resent
				f.LateConnected += t.LateConnected
			}
		}
		for _, h := range st.Conn.Holds {
			if at := h.From.UnixNano(); at >= from && at < to {
				f.Held += h.Messages
				f.LongestHoldS = max(f.LongestHoldS, math.Round(h.To.Sub(h.From).Seconds()*1e3)/1e3)
			}
		}
		c.Faults = append(c.Faults, f)
	}
	c.LateOutsideFaults, c.LateOutsideFaultsPct = d.lateOutsideFaults(st.Conn.Timeline, s.NormalLeftOut)
	return c
}

// writeClientConn is the report's section on the load generator through the faults (nothing
// without its stats, or without a reconnect, a hold or a fault).
func writeClientConn(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	c := s.ClientConn
	if c == nil || (len(c.Faults) == 0 && c.Dials <= 1 && c.Held == 0) {
		return
	}
	pf("## Load generator through faults\n\n")
	pf("Over the run: %d dials (%d failed), %d reconnects, %d resends; %d of %d probes held for want of a leader; "+
		"%d late (> 1 ms) outside every hold: %.2f %% of the probes due outside them.\n\n",
		c.Dials, c.DialFailures, c.Reconnects, c.Resent, c.Held, c.Scheduled, c.LateConnected, c.LateConnectedPct)
	if c.LateOutsideFaults != nil {
		pf("Outside every fault window (Probes overall lists them): %d probes sent late outside a hold, %.2f %% of the post-warm-up probes due there.\n\n",
			*c.LateOutsideFaults, *c.LateOutsideFaultsPct)
	}
	if len(c.Faults) > 0 {
		writeClientFaults(b, c.Faults)
		pf("A fault's window runs from its action to the next fault's or the end of load; the load generator counts per " +
			"second (loadgen/stats.json conn.timeline), so the window takes the seconds that begin in it, and the second of " +
			"the action. Held: probes due while no connection could take them, sent once a leader did, their latency counted " +
			"from their intended send time.\n\n")
	}
}

func fmtSecs(s float64) string {
	if s == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f s", s)
}
