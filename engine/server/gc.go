package server

import (
	"runtime"
	"time"

	"github.com/rig-dev/rig/engine"
)

// collectGarbage runs a full collection now (POST engine.AdminGC) and says what it cost.
func collectGarbage() engine.GCAnswer {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	runtime.GC()
	wall := time.Since(t0)
	runtime.ReadMemStats(&after)
	return engine.GCAnswer{
		WallMs:      float64(wall.Microseconds()) / 1e3,
		Collections: int(after.NumGC - before.NumGC),
		PauseMs:     float64(after.PauseTotalNs-before.PauseTotalNs) / 1e6,
	}
}
