package loadgen

import (
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// PreloadOrders calls each with every order a Preload of book sends, in order, and describes
// the book they build; an engine's driver builds a stored book from them in its own format
// (engine/driver.BookInstaller).
func PreloadOrders(book loadspec.BookShape, each func(wire.Order) error) (rundir.Book, error) {
	if err := book.Normalize(); err != nil {
		return rundir.Book{}, err
	}
	gen := newBookGen(&book)
	for gen.k < book.Orders {
		if err := each(gen.next()); err != nil {
			return rundir.Book{}, err
		}
	}
	return book.Record(), nil
}
