package server

import "testing"

// POST /gc runs a collection and says so: at least one cycle, a wall time, and a stop-the-world
// time no longer than the wall time.
func TestCollectGarbage(t *testing.T) {
	a := collectGarbage()
	if a.Collections < 1 || a.WallMs <= 0 || a.PauseMs < 0 || a.PauseMs > a.WallMs {
		t.Errorf("answer %+v: want a collection, with its stop-the-world inside its wall time", a)
	}
}
