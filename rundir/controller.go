package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
)

// ControllerFile is the controller's heartbeat in the run folder: rewritten by the runner every
// time it renews the agents' leases, so a run whose controller died (SIGKILL, power, a cut
// network) can be told from one that is still going.
const ControllerFile = "controller.json"

// StatusAbandoned is what the analysis calls a run whose manifest still says running but whose
// controller is gone. The manifest itself is left as the controller last wrote it.
const StatusAbandoned = "abandoned"

// ControllerBeat is controller.json.
type ControllerBeat struct {
	PID   int           `json:"pid"`
	Host  string        `json:"host"`
	Heard time.Time     `json:"heard"` // last beat
	Every time.Duration `json:"every_ns"`
}

// WriteControllerBeat records that the controller is alive now.
func WriteControllerBeat(dir string, every time.Duration) error {
	host, _ := os.Hostname()
	b, _ := json.Marshal(ControllerBeat{PID: os.Getpid(), Host: host, Heard: time.Now().UTC(), Every: every})
	return atomicfile.WriteFile(filepath.Join(dir, ControllerFile), b, 0o644)
}

// Abandoned reports, for a run whose manifest says running, whether its controller is gone: its
// process no longer exists (same host) or it missed three beats. It returns when the controller
// was last heard from.
func Abandoned(dir string, now time.Time) (bool, time.Time, error) {
	b, err := Folder{dir}.ReadFile(ControllerFile, ControllerFile, MaxJSONBytes)
	if errors.Is(err, os.ErrNotExist) {
		return false, time.Time{}, nil // a run from before heartbeats: nothing to go by
	}
	if err != nil {
		return false, time.Time{}, err
	}
	var beat ControllerBeat
	if err := json.Unmarshal(b, &beat); err != nil {
		return false, time.Time{}, fmt.Errorf("%s: %w", ControllerFile, err)
	}
	host, _ := os.Hostname()
	if host == beat.Host && beat.PID > 0 && syscall.Kill(beat.PID, 0) == syscall.ESRCH {
		return true, beat.Heard, nil
	}
	return beat.Every > 0 && now.Sub(beat.Heard) > 3*beat.Every, beat.Heard, nil
}
