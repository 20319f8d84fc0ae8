package loadspec

import (
	"github.com/rig-dev/rig/engine/bookgen"
	"github.com/rig-dev/rig/rundir"
)

// ErrBadOptions classifies invalid load generator options (the message names the field).
var ErrBadOptions = bookgen.ErrBadOptions

// Book defaults (engine/bookgen owns the shape: the drivers build stored books from it).
const (
	DefaultInstruments = bookgen.DefaultInstruments
	DefaultLevels      = bookgen.DefaultLevels
	DefaultSeed        = bookgen.DefaultSeed
	DefaultMid         = bookgen.DefaultMid
	DefaultGap         = bookgen.DefaultGap
	DefaultMaxQty      = bookgen.DefaultMaxQty
	MaxPreloadID       = bookgen.MaxPreloadID
)

// BookShape is the resting book a preload builds (bookgen.Shape).
type BookShape = bookgen.Shape

// Default sets *v to d when it is 0 and refuses a negative value, naming the field.
func Default(v *int, d int, name string) error { return bookgen.Default(v, d, name) }

// BookRecord describes a normalized shape's book as the run folder records it.
func BookRecord(b BookShape) rundir.Book {
	bidLow, bidHigh, askLow, askHigh := b.Prices()
	return rundir.Book{
		Instruments: b.Instruments, Levels: b.Levels, Seed: b.Seed,
		BidLow: bidLow, BidHigh: bidHigh, AskLow: askLow, AskHigh: askHigh,
		FirstID: b.FirstID, LastID: b.FirstID + uint64(b.Orders) - 1,
	}
}
