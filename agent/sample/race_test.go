//go:build race

package sample

// raceOn: the race detector instruments every call, which allocates; allocation counts mean
// nothing under it.
const raceOn = true
