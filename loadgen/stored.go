package loadgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/rundir"
)

// StoredBookMeta is the log position a stored book is written at: index 1 of term 1, so a
// node that restores it numbers the entries after it from 2 (engine/replica lists the
// restored snapshot to raft).
var StoredBookMeta = snapshot.Meta{LogIndex: 1, Term: 1}

// WriteBookSnapshot writes the book a Preload with opts builds (Servers are not used) as a
// reference-engine snapshot at StoredBookMeta. The book is built here order by order with the
// engine's own book and the preload's own generator, so a node that restores the file holds the
// book, and the state hash, that the preload through the log would have given it. A run whose
// book is already stored installs the file in every server's snapshots folder instead of
// preloading.
func WriteBookSnapshot(w io.Writer, opts PreloadOptions, sopts snapshot.Options) (rundir.PreloadStats, error) {
	if err := opts.normalize(); err != nil {
		return rundir.PreloadStats{}, err
	}
	start := time.Now()
	b := book.New()
	gen := newBookGen(&opts)
	var st rundir.PreloadStats
	for gen.k < opts.Orders {
		o := gen.next()
		res, err := b.Submit(book.Order{ID: o.ID, Instrument: o.Instrument, Side: book.Side(o.Side), Price: o.Price, Qty: o.Qty, TIF: book.TIF(o.TIF)}, nil)
		if err != nil {
			return st, fmt.Errorf("build stored book, order %d: %w", o.ID, err)
		}
		st.Filled += res.Filled
	}
	if _, err := snapshot.Write(w, b, StoredBookMeta, sopts); err != nil {
		return st, fmt.Errorf("write stored book: %w", err)
	}
	st.Orders, st.Book, st.StateHash = int64(b.Orders()), opts.book(), fmt.Sprintf("%016x", b.StateHash())
	st.ElapsedNs = int64(time.Since(start))
	st.OrdersPerSec = float64(st.Orders) / time.Since(start).Seconds()
	return st, nil
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
