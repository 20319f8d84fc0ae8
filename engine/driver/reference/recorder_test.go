package reference

import (
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/server"
)

// TestFlightRecorderSettings: engine.flight_recorder and its window reach the engine's config,
// the recorder is built from it, and /status reports false too, so asking for false is checked.
func TestFlightRecorderSettings(t *testing.T) {
	var cfg engine.Config
	if err := (Driver{}).Configure(&cfg, driver.Values{FlightRecorder: "true", FlightRecorderWindow: "1m30s"}); err != nil {
		t.Fatal(err)
	}
	if !cfg.FlightRecorder || cfg.FlightRecorderWindow != "1m30s" {
		t.Fatalf("config %+v", cfg)
	}
	fr, err := server.NewFlightRecorder(cfg)
	if err != nil || fr == nil {
		t.Fatalf("recorder %v, %v", fr, err)
	}
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	fr.Stop()
	s, _ := Table.Lookup(FlightRecorderWindow)
	if got, err := s.Reported(cfg.Reported()[FlightRecorderWindow]); err != nil || got != (90*time.Second).String() {
		t.Errorf("window reported as %q, %v", got, err)
	}

	var off engine.Config
	if err := (Driver{}).Configure(&off, driver.Values{FlightRecorder: "false"}); err != nil {
		t.Fatal(err)
	}
	if errs := driver.EffectErrors(Table, driver.Values{FlightRecorder: "false"}, off.Reported()); len(errs) > 0 {
		t.Errorf("flight_recorder: false not reported in effect: %v", errs)
	}
	if fr, err := server.NewFlightRecorder(off); fr != nil || err != nil {
		t.Errorf("a recorder for a config without one: %v, %v", fr, err)
	}
	if _, err := server.NewFlightRecorder(engine.Config{FlightRecorder: true, FlightRecorderWindow: "soon"}); err == nil {
		t.Error("a window that is no duration accepted")
	}
}

// TestRecordingValues: a run collecting recordings asks the reference engine for its flight
// recorder, unless the playbook said otherwise.
func TestRecordingValues(t *testing.T) {
	if got := driver.WithRecording(Driver{}, driver.Values{SyncLevel: "2"}); got[FlightRecorder] != "true" || got[SyncLevel] != "2" {
		t.Errorf("asked %v", got)
	}
	if got := driver.WithRecording(Driver{}, driver.Values{FlightRecorder: "false"}); got[FlightRecorder] != "false" {
		t.Errorf("the playbook's own flight_recorder overridden: %v", got)
	}
	var cfg engine.Config
	if err := (Driver{}).Configure(&cfg, driver.WithRecording(Driver{}, nil)); err != nil || !cfg.FlightRecorder {
		t.Errorf("config %+v, %v", cfg, err)
	}
}
