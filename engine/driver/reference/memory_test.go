package reference

import (
	"github.com/rig-dev/rig/internal/memtest"
	"os"
	"runtime"
	"testing"

	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/bookgen"
	"github.com/rig-dev/rig/engine/wire"
)

// TestBytesPerOrderMeasured is how BytesPerOrder was measured, and keeps it true: it builds the
// book a preload of 4M orders builds (the preload's own orders, through the engine's own book),
// and compares the process's peak resident growth (VmHWM, reset first through clear_refs) and
// the live heap growth per resting order with the constant. The constant must not be below the
// peak (a run it lets through could still not fit), nor more than twice the live heap (a
// figure so high it refuses books that fit; the book got smaller and the constant was not
// measured again).
func TestBytesPerOrderMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 4M-order book (~300 MB)")
	}
	const orders = 4 << 20
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// Writing 5 resets the peak resident set to the current one (proc(5), /proc/pid/clear_refs).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident set: %v", err)
	}
	rss := memtest.StatusBytes(t, "VmRSS")
	b := book.New()
	if err := bookgen.Orders(bookgen.Shape{Orders: orders}, func(o wire.Order) error {
		_, err := b.Submit(book.Order{ID: o.ID, Instrument: o.Instrument, Side: book.Side(o.Side), Price: o.Price, Qty: o.Qty, TIF: book.TIF(o.TIF)}, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	peak := memtest.StatusBytes(t, "VmHWM")
	runtime.GC()
	runtime.ReadMemStats(&after)
	resting := float64(b.Orders())
	if resting < orders*0.9 {
		t.Fatalf("%d of %d preload orders rest; the measure is per resting order", b.Orders(), orders)
	}
	peakPer := float64(peak-rss) / resting
	livePer := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / resting
	t.Logf("%d resting orders: peak resident %.1f B/order, live heap %.1f B/order; BytesPerOrder = %d", b.Orders(), peakPer, livePer, BytesPerOrder)
	if peakPer > BytesPerOrder {
		t.Errorf("peak resident %.1f B per resting order is above BytesPerOrder (%d): raise it", peakPer, BytesPerOrder)
	}
	if 2*livePer < BytesPerOrder {
		t.Errorf("live heap %.1f B per resting order is under half of BytesPerOrder (%d): measure it again", livePer, BytesPerOrder)
	}
	runtime.KeepAlive(b)
	if got := (Driver{}).BytesPerOrder(); got != BytesPerOrder {
		t.Errorf("Driver.BytesPerOrder() = %d, want the measured %d", got, BytesPerOrder)
	}
}
