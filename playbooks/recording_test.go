package playbooks

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// engine.recording turns the engine's own recorder on or off, off by default; it survives the
// manifest's JSON, is a matrix axis, and anything but on or off is refused where it stands.
func TestEngineRecording(t *testing.T) {
	const cmd = "engine:\n  driver: command\n  command: {binary: /bin/true}\n  recording: %s\n"
	if m := mustParse(t, base).Engine.RecordingMode(); m != RecordingOff {
		t.Errorf("default: %q, want off", m)
	}
	p := mustParse(t, base+fmt.Sprintf(cmd, `"on"`))
	if m := p.Engine.RecordingMode(); m != RecordingOn {
		t.Errorf("recording: on gave %q", m)
	}
	b, err := json.Marshal(p.Engine)
	if err != nil {
		t.Fatal(err)
	}
	var back Engine
	if err := json.Unmarshal(b, &back); err != nil || back.RecordingMode() != RecordingOn {
		t.Errorf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
	plan, err := mustParse(t, base+fmt.Sprintf(cmd, `"off"`)+"matrix:\n  engine.recording: [\"off\", \"on\"]\n").Plan()
	if err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, r := range plan.Runs {
		modes = append(modes, r.Playbook.Engine.RecordingMode())
	}
	if fmt.Sprint(modes) != "[off on]" {
		t.Errorf("matrix engine.recording: runs have %v, want [off on]", modes)
	}
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "maybe")), "t.yaml:8:14", `engine.recording: "maybe": want on, windows or off`)
	if p := mustParse(t, base+fmt.Sprintf(cmd, "windows")); p.Engine.RecordingMode() != RecordingWindows || !p.Engine.Recorded() {
		t.Errorf("recording: windows gave %q, recorded %v", p.Engine.RecordingMode(), p.Engine.Recorded())
	}
}

// On the reference engine, engine.recording: on asks for its flight recorder (the driver's
// RecordingValues), so the recording the run takes exists, and the recorder's reach is checked
// against the timeline as if the playbook had set it; the playbook's own value still wins.
func TestRecordingAsksTheRecorder(t *testing.T) {
	p := mustParse(t, base+"engine: {recording: \"on\"}\n")
	if got := p.Engine.Settings()["flight_recorder"]; got != "true" {
		t.Errorf("recording: on asked flight_recorder=%q, want true", got)
	}
	if got := mustParse(t, base).Engine.Settings()["flight_recorder"]; got != "" {
		t.Errorf("recording off asked flight_recorder=%q, want nothing", got)
	}
	if got := mustParse(t, base+"engine: {recording: \"on\", flight_recorder: false}\n").Engine.Settings()["flight_recorder"]; got != "false" {
		t.Errorf("the playbook's flight_recorder: false became %q", got)
	}
	long := "name: t\nload: {probe_rate: 1/s}\nduration: 100s\nengine: {recording: \"on\"}\ntimeline:\n  - {at: 10s, snapshot: {}}\n"
	wantProblem(t, problemsOf(t, long), "t.yaml:4:9: engine.flight_recorder_window", "the recorder reaches 1m0s back")
	// Recording only around windows, a take holds its window alone: no reach to check; and the
	// recorder is asked for as with on.
	windows := strings.Replace(long, `recording: "on"`, "recording: windows", 1)
	if got := mustParse(t, windows).Engine.Settings()["flight_recorder"]; got != "true" {
		t.Errorf("recording: windows asked flight_recorder=%q, want true", got)
	}
}

// cause_sources is on by default, off turns the always-on sources off for a price, it is a
// matrix axis (on against off, interleaved by rounds), and anything else is refused where it
// stands.
func TestCauseSources(t *testing.T) {
	if p := mustParse(t, base); p.CauseSourcesOff() {
		t.Error("default: cause sources off, want on")
	}
	if p := mustParse(t, base+"cause_sources: off\n"); !p.CauseSourcesOff() {
		t.Error("cause_sources: off read as on")
	}
	plan, err := mustParse(t, base+"rounds: 2\nmatrix:\n  cause_sources: [on, off]\n").Plan()
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, r := range plan.Runs {
		got = append(got, r.Playbook.CauseSourcesOff())
	}
	if fmt.Sprint(got) != "[false true false true]" {
		t.Errorf("matrix cause_sources: runs off %v, want on and off interleaved", got)
	}
	wantProblem(t, problemsOf(t, base+"cause_sources: maybe\n"), "t.yaml:5:16", `cause_sources: "maybe": want on or off`)
}
