package runner

import (
	"cmp"
	"fmt"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// server is what a run knows of one node of its inventory: a server's engine state, its
// watcher's place in its agent's journal, a reboot's progress, and where its data and clock
// are. A client node uses only offset and lapsed. Every change to an engine's state is one of
// the transitions below, so a new fact about a server is one field and the transitions that
// move it.
type server struct {
	// Set before the watchers and lease renewers start; read without run.mu afterwards.
	offset   time.Duration // node clock - controller clock (0 on one clock)
	dataRoot string        // where its data volume is mounted ("": none)
	cfg      engine.Config // the config its engine was started on
	since    uint64        // transitions in its agent's journal before this run's first launch

	// Guarded by run.mu.
	status     engine.Status      // newest status seen
	seen       bool               // a transition set status
	down       bool               // killed by the timeline and not yet relaunched
	killed     bool               // the timeline killed its current launch (its exit is no fault)
	exit       *rundir.ExitStatus // how its engine last exited (nil: not since its launch)
	roleAtExit string             // its role when it last went down
	ledUntil   time.Time          // when it last stopped leading since its launch (zero: it has not)
	cursor     uint64             // the last transition its watcher handled
	lapsed     bool               // its lease lapsed: cleanup leaves its agent alone
	reboot     reboot             // a power cut that reboots the node (power.go)
}

// rebootPhase is where a node is in a power cut that reboots it.
type rebootPhase uint8

const (
	// powered: no reboot under way.
	powered rebootPhase = iota
	// away: its power was cut; there is no agent to ask, so its lease renewals and its watcher
	// wait.
	away
	// back: a new agent was claimed; the lease renewer, the watcher and the next relaunch each
	// pick that up once (resume), after which the node is powered again.
	back
)

// resumer is what picks up a node that came back from a reboot.
type resumer uint8

const (
	resumeLease   resumer = 1 << iota // the renewer takes the time the new claim was sent
	resumeWatch                       // the watcher follows the new agent's journal from its end
	resumeStart                       // the relaunch starts the engine afresh
	resumeAll     = resumeLease | resumeWatch | resumeStart
	resumeNothing = resumer(0)
)

// reboot is the progress of a power cut that reboots a node.
type reboot struct {
	phase     rebootPhase
	claimSent time.Time // back: when the claim on the new agent was sent
	journal   uint64    // back: the new agent's journal position when it was claimed
	pending   resumer   // back: what has yet to pick the reboot up
}

// onLaunch: the agent started the engine again. It has no exit, no leadership and no kill yet.
func (s *server) onLaunch() {
	s.status.Phase, s.status.Role, s.seen = engine.PhaseStarting, "", true
	s.exit, s.ledUntil, s.killed = nil, time.Time{}, false
}

// onExit: the engine went down, with exit (nil when nobody saw how: a power cut).
func (s *server) onExit(exit *rundir.ExitStatus) {
	if s.status.Role != "" {
		s.roleAtExit = s.status.Role
	}
	s.status.Phase, s.status.Role, s.seen = rundir.PhaseDown, "", true
	s.exit = exit
}

// onStatus: the engine reported its status.
func (s *server) onStatus(st engine.Status) { s.status, s.seen = st, true }

// onLeadershipLost: the engine stopped leading at t. A leader that fails to write its log steps
// down before it exits: its death is still the leader's.
func (s *server) onLeadershipLost(t time.Time) { s.ledUntil = t }

// kill: the timeline is about to end this launch. Counted before the signal goes out, so a
// watcher never sees the exit first and calls it a fault.
func (s *server) kill() { s.down, s.killed = true, true }

// relaunched: the timeline started its engine again.
func (s *server) relaunched() { s.down = false }

// cutPower: a kill whose node reboots; until it is back nothing on it answers.
func (s *server) cutPower() {
	s.kill()
	s.reboot = reboot{phase: away}
}

// cameBack: the node rebooted and its new agent was claimed (the claim sent at sent), with
// journal transitions already in its journal.
func (s *server) cameBack(sent time.Time, journal uint64) {
	s.reboot = reboot{phase: back, claimSent: sent, journal: journal, pending: resumeAll}
}

// resume takes what picks the reboot up: whether the node is still away, and the reboot as it
// was with first set when this is who's first call since the node came back.
func (s *server) resume(who resumer) (isAway, first bool, rb reboot) {
	rb = s.reboot
	switch rb.phase {
	case away:
		return true, false, rb
	case back:
		first = rb.pending&who != 0
		s.reboot.pending &^= who
		if s.reboot.pending == resumeNothing {
			s.reboot = reboot{}
		}
	}
	return false, first, rb
}

// leasePaused says whether its lease renewals are paused (the node is away: the lease went with
// the agent), and, once after it came back, when the claim on its new agent was sent.
func (s *server) leasePaused() (paused bool, reclaimed time.Time) {
	paused, first, rb := s.resume(resumeLease)
	if first {
		reclaimed = rb.claimSent
	}
	return paused, reclaimed
}

// rewatchFrom says whether its watcher must wait (the node is away) or, once after it came back,
// start over from the new agent's journal (ok, with the position to follow from).
func (s *server) rewatchFrom() (wait bool, since uint64, ok bool) {
	wait, ok, rb := s.resume(resumeWatch)
	if ok {
		since = rb.journal
	}
	return wait, since, ok
}

// startFresh says, once after the node came back, that its engine must be started afresh (the
// new agent knows no engine to relaunch).
func (s *server) startFresh() bool {
	_, first, _ := s.resume(resumeStart)
	return first
}

// unscheduledExit says how its engine ended when it is down without the timeline having killed
// it (nil otherwise).
func (s *server) unscheduledExit(name string) error {
	if s.status.Phase != rundir.PhaseDown || s.killed {
		return nil
	}
	role := s.roleAtExit
	if !s.ledUntil.IsZero() && role != engine.RoleLeader {
		role = fmt.Sprintf("%s, leader until %s", cmp.Or(role, "no role"), s.ledUntil.Format(clockFormat))
	}
	return unscheduledExit(name, role, s.exit)
}
