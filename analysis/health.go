package analysis

import (
	"fmt"
	"strings"

	"github.com/rig-dev/rig/rundir"
)

// Limits past which a run's figures describe something else than the playbook asked for, so the
// run ends failed: a run that could not do what it said is not a measurement (docs/architecture.md,
// "Measurement rules").
const (
	// overrunLimit: the load ran more than 10 % past the playbook's duration (the load
	// generator could not keep its schedule, or the timeline held it back).
	overrunLimit = 1.10
	// lostLimit: more than half the post-warm-up probes were never answered.
	lostLimit = 0.5
)

// healthFailures lists why a run's figures cannot stand for the playbook: a load that overran
// its duration by more than 10 %, or most probes lost.
func healthFailures(s *Summary) []string {
	var why []string
	if p := s.Settings.PlannedDurationS; p != nil && *p > 0 && s.Settings.LoadS > *p*overrunLimit {
		why = append(why, fmt.Sprintf("the load ran %.1f s of a %.0f s duration (%.0f %% over; more than %.0f %% fails the run)",
			s.Settings.LoadS, *p, (s.Settings.LoadS / *p - 1)*100, (overrunLimit-1)*100))
	}
	if sent := s.Probes.N + s.Probes.Lost; sent > 0 && float64(s.Probes.Lost) > lostLimit*float64(sent) {
		why = append(why, fmt.Sprintf("%d of %d post-warm-up probes were lost (more than half fails the run)", s.Probes.Lost, sent))
	}
	return why
}

// applyHealth fails an ok run that breaks a limit, with the reason in StatusReason and in the
// warnings; a run already failed keeps its status and gets the reasons as warnings.
func applyHealth(s *Summary) []string {
	why := healthFailures(s)
	if len(why) == 0 {
		return nil
	}
	if s.Status == rundir.StatusOK {
		s.Status = rundir.StatusFailed
		s.StatusReason = strings.Join(why, "; ")
	}
	out := make([]string, len(why))
	for i, w := range why {
		out[i] = "run failed: " + w
	}
	return out
}
