package analysis

import (
	"fmt"

	"github.com/rig-dev/rig/engine"
)

// StepDownRow is one graceful leader hand-off (step_down action) and what clients saw of it.
type StepDownRow struct {
	AtS  float64 `json:"at_s"`
	From string  `json:"from"`         // the leader asked to step down
	To   string  `json:"to,omitempty"` // the next node to report itself leader; "" if none did
	// NewLeaderMs is from the action to the new leader's role change (as its agent saw it).
	NewLeaderMs *float64 `json:"new_leader_ms"`
	// ClientGapMs is the worst probe latency in [action − 1 s, new leader + 1 s]: the service gap
	// as clients measured it, from intended send times. A lost probe counts as waiting until the
	// end of load (a lower bound, flagged).
	ClientGapMs     *float64 `json:"client_gap_ms"`
	GapLowerBound   bool     `json:"gap_lower_bound,omitempty"`
	WindowFromS     float64  `json:"window_from_s"`
	WindowToS       float64  `json:"window_to_s"`
	WindowProbes    int      `json:"window_probes"`
	WindowLost      int      `json:"window_lost"`
	NormalP50Us     *float64 `json:"normal_p50_us,omitempty"`
	OverlapSnapshot bool     `json:"overlaps_snapshot,omitempty"`
	// UnplannedLeaderChange: another leader change than the one asked for happened in the
	// window, so the gap may include an election.
	UnplannedLeaderChange bool `json:"unplanned_leader_change,omitempty"`
	// HandOffTimes are the hand-off's figures as the step-down guide defines them (handoff.go);
	// the lanes are in the summary's hand-offs.
	HandOffTimes
}

// stepDownRows builds one row per action that hands leadership on when asked (its kind declares
// it a step-down: actions.ShapeStepDown).
func (d *runData) stepDownRows(s *Summary) []string {
	var warn []string
	acts := d.actions(stepsDown)
	for i, a := range acts {
		at := a.T.UnixNano()
		row := StepDownRow{AtS: d.off(at), From: a.Node} // NormalP50Us once normal latency is known (analyze.go)
		limit := d.loadEnd
		if i+1 < len(acts) {
			limit = acts[i+1].T.UnixNano()
		}
		end := limit
		for _, e := range d.events {
			t := e.T.UnixNano()
			if e.Role != nil && e.Role.To == engine.RoleLeader && t >= at && t < limit {
				row.To, row.NewLeaderMs = e.Node, valPtr(nsToMs(t-at))
				end = min(t+int64(1e9), limit)
				break
			}
		}
		if row.To == "" {
			warn = append(warn, fmt.Sprintf("step-down #%d at %s: no node reported itself leader afterwards", i+1, fmtS(row.AtS)))
		}
		w := span{at - int64(1e9), end}
		row.WindowFromS, row.WindowToS = d.off(w.from), d.off(w.to)
		var snap SnapshotRow
		d.pause(&snap, w)
		row.ClientGapMs, row.GapLowerBound = snap.ClientPauseMs, snap.PauseLowerBound
		row.WindowProbes, row.WindowLost = snap.WindowProbes, snap.WindowLost
		for _, sw := range d.snapWins {
			if sw.from <= w.to && w.from <= sw.to {
				row.OverlapSnapshot = true
			}
		}
		s.StepDowns = append(s.StepDowns, row)
	}
	return warn
}
