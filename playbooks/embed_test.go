package playbooks

import (
	"errors"
	"github.com/rig-dev/rig/actions"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEmbeddedPlaybooks(t *testing.T) {
	names := List()
	if want := []string{"cause-sources-cost", "follower-restart", "leader-failover", "micro-burst", "quickstart", "snapshot-disk", "snapshot-pause", "step-down", "step-down-zones"}; !slices.Equal(names, want) {
		t.Fatalf("List() = %v, want %v", names, want)
	}
	for _, name := range names {
		p, err := Open(name, testDrivers)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Name != name || p.Source != "embedded:"+name {
			t.Errorf("%s: name %q source %q", name, p.Name, p.Source)
		}
		if _, err := p.Plan(); err != nil {
			t.Errorf("%s: plan: %v", name, err)
		}
		// The copy on disk (the source) is the one embedded.
		disk, err := Open(name+".yaml", testDrivers)
		if err != nil || disk.Source != name+".yaml" || disk.Name != name {
			t.Errorf("%s from disk: %+v, %v", name, disk, err)
		}
	}
}

// The quickstart is the README's first command: three servers, 100K orders, 1,000 probes/s, and
// fits well inside a minute locally.
func TestQuickstartShape(t *testing.T) {
	p, err := Open("quickstart", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cluster != (Cluster{3, 1}) || p.Preload.Orders != 100_000 || p.Load.ProbeRate != 1000 || len(p.Matrix) != 0 || p.Rounds != 1 {
		t.Errorf("quickstart: %+v", p)
	}
	var kinds []string
	for _, a := range p.Timeline {
		kinds = append(kinds, a.Kind)
	}
	if !slices.Equal(kinds, []string{"snapshot", "kill", "wait_for", "snapshot"}) {
		t.Errorf("timeline kinds %v", kinds)
	}
	if k, kl := p.Timeline[1], p.Timeline[1].Spec.(*actions.Kill); k.At != 10*time.Second || kl.Node != "follower" || kl.Signal != "KILL" || kl.RelaunchAfter != 5*time.Second {
		t.Errorf("kill: at %v %+v", k.At, kl)
	}
	if p.Timeline[0].At != 5*time.Second || p.Duration > 35*time.Second || p.ExpectedDuration() > 40*time.Second {
		t.Errorf("snapshot at %v, duration %v, expected %v", p.Timeline[0].At, p.Duration, p.ExpectedDuration())
	}
}

// The follower-restart playbook's schedule: a snapshot, three kill/relaunch cycles a minute apart,
// a closing snapshot.
func TestFollowerRestartSchedule(t *testing.T) {
	p, err := Open("follower-restart", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range p.Timeline {
		s := a.Kind + "@" + a.At.String()
		if k, ok := a.Spec.(*actions.Kill); ok {
			s += ":" + k.Node + "+" + k.RelaunchAfter.String()
		}
		got = append(got, s)
	}
	want := []string{"snapshot@10s", "kill@25s:follower+15s", "kill@1m25s:other-follower+15s", "kill@2m25s:follower+15s", "snapshot@3m35s"}
	if !slices.Equal(got, want) {
		t.Errorf("timeline %v, want %v", got, want)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(good, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Open(good, testDrivers); err != nil || p.Source != good {
		t.Fatalf("Open(%s, testDrivers) = %+v, %v", good, p, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("duration: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(bad, testDrivers)
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("Open(bad, testDrivers) = %v; want Problems", err)
	}
	wantProblem(t, probs, bad+":1:11: duration", `"5" has no unit`)

	t.Chdir(dir) // away from the source folder: only the embedded copies are left
	if p, err := Open("playbooks/quickstart.yaml", testDrivers); err != nil || p.Source != "embedded:quickstart" {
		t.Errorf("Open(playbooks/quickstart.yaml, testDrivers) from elsewhere = %+v, %v; want the embedded copy", p, err)
	}
	for _, name := range []string{"quickstrat", "nowhere/quickstart.yaml", "playbooks/nope.yaml", "missing.yaml"} {
		if _, err := Open(name, testDrivers); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open(%q, testDrivers) err = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := Open("quickstrat", testDrivers); err == nil || !strings.Contains(err.Error(), `did you mean "quickstart"?`) {
		t.Errorf("no suggestion for a misspelt name: %v", err)
	}
}
