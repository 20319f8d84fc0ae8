package runner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
)

// An engine that goes down on its own is a fault naming its role; one the timeline killed is not,
// and a new launch forgets the kill, the exit and the leadership of the one before.
func TestServerExitAndLaunch(t *testing.T) {
	var s server
	s.onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleFollower, Term: 3})
	if !s.seen || s.unscheduledExit("node-1") != nil {
		t.Fatalf("a ready server: seen %v, fault %v", s.seen, s.unscheduledExit("node-1"))
	}
	s.onExit(&rundir.ExitStatus{Code: 2, LogTail: "no space left on device"})
	err := s.unscheduledExit("node-1")
	if !errors.Is(err, ErrEngineExited) {
		t.Fatalf("an exit outside the timeline: %v; want ErrEngineExited", err)
	}
	for _, w := range []string{"node-1 (follower)", "exit code 2", "no space left on device"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v; want it to say %q", err, w)
		}
	}
	if s.status.Phase != rundir.PhaseDown || s.status.Role != "" || s.roleAtExit != engine.RoleFollower {
		t.Errorf("after the exit: %+v, role at exit %q", s.status, s.roleAtExit)
	}

	s.onLaunch()
	if s.status.Phase != engine.PhaseStarting || s.exit != nil || s.unscheduledExit("node-1") != nil {
		t.Errorf("after a launch: %+v, exit %v", s.status, s.exit)
	}

	// Killed by the timeline: down until relaunched, and its exit is no fault.
	s.onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleLeader})
	s.kill()
	s.onExit(&rundir.ExitStatus{Signal: "KILL"})
	if !s.down || s.unscheduledExit("node-1") != nil {
		t.Errorf("a kill: down %v, fault %v", s.down, s.unscheduledExit("node-1"))
	}
	s.relaunched()
	s.onLaunch()
	if s.down || s.killed {
		t.Errorf("after the relaunch: down %v killed %v", s.down, s.killed)
	}
	// Its next death outside the timeline is a fault again, with the role it had.
	s.onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleLeader})
	s.onExit(nil)
	if err := s.unscheduledExit("node-1"); err == nil || !strings.Contains(err.Error(), "(leader): no exit status") {
		t.Errorf("a leader's death after its relaunch: %v", err)
	}
}

// A leader that steps down before it dies (it failed to write its log) is named as the leader
// it was until then; a launch forgets that.
func TestServerLeaderUntil(t *testing.T) {
	var s server
	s.onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleLeader})
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	s.onLeadershipLost(at)
	s.onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleFollower})
	s.onExit(&rundir.ExitStatus{Code: 1})
	if err := s.unscheduledExit("node-0"); err == nil || !strings.Contains(err.Error(), "(follower, leader until "+at.Format(clockFormat)+")") {
		t.Errorf("%v; want the leadership it lost named", err)
	}
	s.onLaunch()
	s.onExit(&rundir.ExitStatus{Code: 1})
	if err := s.unscheduledExit("node-0"); err == nil || strings.Contains(err.Error(), "leader until") {
		t.Errorf("%v; a new launch has not led", err)
	}
}

// A power cut that reboots: while away, renewals and the watcher wait; once back, the lease
// renewer, the watcher and the relaunch each pick the reboot up exactly once, in any order.
func TestServerReboot(t *testing.T) {
	var s server
	if p, rc := s.leasePaused(); p || !rc.IsZero() {
		t.Fatalf("powered: paused %v reclaimed %v", p, rc)
	}
	if s.startFresh() {
		t.Fatal("powered: a relaunch would start afresh")
	}
	s.cutPower()
	if !s.down || !s.killed {
		t.Errorf("a power cut is a kill: down %v killed %v", s.down, s.killed)
	}
	if p, _ := s.leasePaused(); !p {
		t.Error("away: renewals not paused")
	}
	if wait, _, _ := s.rewatchFrom(); !wait {
		t.Error("away: the watcher does not wait")
	}
	if s.startFresh() {
		t.Error("away: a relaunch would start afresh")
	}
	sent := time.Now()
	s.cameBack(sent, 42)
	if !s.startFresh() || s.startFresh() {
		t.Error("back: want one fresh start")
	}
	if p, rc := s.leasePaused(); p || !rc.Equal(sent) {
		t.Errorf("back: paused %v reclaimed %v; want the claim at %v", p, rc, sent)
	}
	if _, rc := s.leasePaused(); !rc.IsZero() {
		t.Errorf("the claim was taken twice: %v", rc)
	}
	if s.reboot.phase != back {
		t.Errorf("phase %v before the watcher picked it up; want back", s.reboot.phase)
	}
	if wait, since, ok := s.rewatchFrom(); wait || !ok || since != 42 {
		t.Errorf("back: wait %v since %d ok %v; want the new journal from 42", wait, since, ok)
	}
	if _, _, ok := s.rewatchFrom(); ok {
		t.Error("the watcher started over twice")
	}
	if s.reboot != (reboot{}) {
		t.Errorf("every part picked the reboot up, yet it is %+v", s.reboot)
	}
}

// The run's view: a killed server is no follower and no leader, and the last one killed is not
// the other follower.
func TestRunResolveAfterKill(t *testing.T) {
	r := &run{changed: make(chan struct{}), nodes: map[string]*server{}}
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		r.servers = append(r.servers, inventoryServer(n))
		r.nodes[n] = &server{}
	}
	r.srv("node-0").onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleLeader, Term: 2})
	r.srv("node-1").onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleFollower, Term: 2})
	r.srv("node-2").onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleFollower, Term: 2})
	if got, _ := r.resolveNode("follower"); got != "node-2" {
		t.Errorf("follower: %s", got)
	}
	r.mu.Lock()
	r.killLocked("node-2", false)
	r.mu.Unlock()
	if got, _ := r.resolveNode("follower"); got != "node-1" {
		t.Errorf("follower after node-2 was killed: %s", got)
	}
	r.srv("node-2").relaunched()
	if got, _ := r.resolveNode("other-follower"); got != "node-1" {
		t.Errorf("other-follower after node-2's relaunch: %s; want the one not killed last", got)
	}
	r.mu.Lock()
	r.killLocked("node-0", true)
	r.mu.Unlock()
	if got := r.leader(); got != "" {
		t.Errorf("the killed leader still leads: %s", got)
	}
	// Two self-declared leaders: the higher term wins.
	r.srv("node-1").onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleLeader, Term: 3})
	r.srv("node-2").onStatus(engine.Status{Phase: engine.PhaseReady, Role: engine.RoleLeader, Term: 4})
	if got := r.leader(); got != "node-2" {
		t.Errorf("leader of two: %s; want node-2 (term 4)", got)
	}
}

func inventoryServer(name string) inventory.Node {
	return inventory.Node{Name: name, Role: inventory.RoleServer}
}
