package loadgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/rundir"
)

// PreloadOrders calls each with every order a Preload with opts sends (Servers are not used),
// in order, and describes the book they build; an engine's driver builds a stored book from
// them in its own format (engine/driver.BookInstaller).
func PreloadOrders(opts PreloadOptions, each func(wire.Order) error) (rundir.Book, error) {
	if err := opts.normalize(); err != nil {
		return rundir.Book{}, err
	}
	gen := newBookGen(&opts)
	for gen.k < opts.Orders {
		if err := each(gen.next()); err != nil {
			return rundir.Book{}, err
		}
	}
	return opts.book(), nil
}

// BookKey names the book a Preload with opts builds: two option sets with the same key build
// the same book (servers, batching and connection settings do not change it).
func BookKey(opts PreloadOptions) (string, error) {
	if err := opts.normalize(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "book v1 orders=%d instruments=%d levels=%d seed=%d mid=%d gap=%d max_qty=%d first_id=%d",
		opts.Orders, opts.Instruments, opts.Levels, opts.Seed, opts.Mid, opts.Gap, opts.MaxQty, opts.FirstID))
	return hex.EncodeToString(sum[:8]), nil
}
