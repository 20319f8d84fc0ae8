package playbooks

import (
	"encoding/json"
	"fmt"
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
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "maybe")), "t.yaml:8:14", `engine.recording: "maybe": want on or off`)
}
