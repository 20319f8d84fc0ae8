package book

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// model is the simplest possible book: a flat list of resting orders, searched linearly.
type model struct {
	orders []mOrder
	seq    int
}

type mOrder struct {
	id    uint64
	inst  uint32
	side  Side
	price int64
	qty   int64
	seq   int
}

func (m *model) find(id uint64) int {
	for i, o := range m.orders {
		if o.id == id {
			return i
		}
	}
	return -1
}

func better(side Side, a, b int64) bool {
	if side == Buy {
		return a > b
	}
	return a < b
}

func (m *model) submit(o Order) (Result, []Fill, error) {
	if err := validate(&o); err != nil {
		return Result{}, nil, err
	}
	if m.find(o.ID) >= 0 {
		return Result{}, nil, ErrDuplicateID
	}
	rem := o.Qty
	var fills []Fill
	for rem > 0 {
		best := -1
		for i, r := range m.orders {
			if r.inst != o.Instrument || r.side == o.Side {
				continue
			}
			if best < 0 || better(r.side, r.price, m.orders[best].price) ||
				(r.price == m.orders[best].price && r.seq < m.orders[best].seq) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		mk := &m.orders[best]
		if !o.Market && ((o.Side == Buy && mk.price > o.Price) || (o.Side == Sell && mk.price < o.Price)) {
			break
		}
		q := min(rem, mk.qty)
		fills = append(fills, Fill{MakerID: mk.id, TakerID: o.ID, Price: mk.price, Qty: q})
		mk.qty -= q
		rem -= q
		if mk.qty == 0 {
			m.orders = slices.Delete(m.orders, best, best+1)
		}
	}
	res := Result{Filled: o.Qty - rem}
	if rem > 0 && !o.Market && o.TIF == GTC {
		m.seq++
		m.orders = append(m.orders, mOrder{o.ID, o.Instrument, o.Side, o.Price, rem, m.seq})
		res.Rested = rem
	}
	return res, fills, nil
}

func (m *model) cancel(id uint64) error {
	i := m.find(id)
	if i < 0 {
		return ErrUnknownOrder
	}
	m.orders = slices.Delete(m.orders, i, i+1)
	return nil
}

// walk is the model's snapshot order.
func (m *model) walk() []mOrder {
	w := slices.Clone(m.orders)
	slices.SortFunc(w, func(a, b mOrder) int {
		switch {
		case a.inst != b.inst:
			return cmp.Compare(a.inst, b.inst)
		case a.side != b.side:
			return int(a.side) - int(b.side)
		case a.price != b.price:
			if better(a.side, a.price, b.price) {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	for i := range w {
		w[i].seq = 0
	}
	return w
}

func (m *model) depth(inst uint32, side Side, n int) []Level {
	var out []Level
	for _, o := range m.walk() {
		if o.inst != inst || o.side != side {
			continue
		}
		if len(out) > 0 && out[len(out)-1].Price == o.price {
			out[len(out)-1].Qty += o.qty
			out[len(out)-1].Orders++
			continue
		}
		if len(out) == n {
			break
		}
		out = append(out, Level{Price: o.price, Qty: o.qty, Orders: 1})
	}
	return out
}

func walkBook(b *Book, max int) []mOrder {
	var out []mOrder
	c := b.Walk()
	for {
		run, ok := c.Next(max)
		if !ok {
			return out
		}
		n := 0
		for _, r := range run.Orders {
			if r.Qty != 0 {
				out = append(out, mOrder{r.ID, run.Instrument, run.Side, run.Price, r.Qty, 0})
				n++
			}
		}
		if n != run.Live {
			panic("run.Live wrong")
		}
	}
}

// TestDifferential drives the book and the model with the same random commands and compares
// every result, every fill, the depth and the full walk.
func TestDifferential(t *testing.T) {
	seeds := 40
	steps := 3000
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		b, m := New(), &model{}
		var live []uint64
		nextID := uint64(1)
		prices := []int{20, 2, 60}[seed%3] // shallow or deep queues
		cancels := []int{30, 45}[seed%2]   // growing or churning book
		for step := range steps {
			switch k := rng.IntN(100); {
			case k < cancels && len(live) > 0: // cancel (sometimes an unknown id)
				id := live[rng.IntN(len(live))]
				if rng.IntN(10) == 0 {
					id = nextID + 1000
				}
				e1, e2 := b.Cancel(id), m.cancel(id)
				if class(e1) != class(e2) {
					t.Fatalf("seed %d step %d cancel %d: book %v model %v", seed, step, id, e1, e2)
				}
			default:
				o := Order{ID: nextID, Instrument: uint32(rng.IntN(3)), Side: Side(rng.IntN(2)),
					Price: 100 + int64(rng.IntN(prices)), Qty: 1 + int64(rng.IntN(10))}
				if o.Side == Sell {
					o.Price += int64(prices) / 4 // mostly resting, sometimes crossing
				}
				switch rng.IntN(20) {
				case 0:
					o.Market = true
				case 1:
					o.TIF = IOC
				case 2:
					if len(live) > 0 {
						o.ID = live[rng.IntN(len(live))] // duplicate
					}
				case 3:
					o.Qty = 0
				}
				if o.ID == nextID {
					nextID++
				}
				var got fillLog
				r1, e1 := b.Submit(o, got.on)
				r2, want, e2 := m.submit(o)
				if class(e1) != class(e2) {
					t.Fatalf("seed %d step %d submit %+v: book %v model %v", seed, step, o, e1, e2)
				}
				if r1 != r2 || !reflect.DeepEqual([]Fill(got), want) && len(want)+len(got) > 0 {
					t.Fatalf("seed %d step %d submit %+v: book %+v %+v, model %+v %+v", seed, step, o, r1, got, r2, want)
				}
				if r1.Rested > 0 {
					live = append(live, o.ID)
				}
			}
			if step%97 == 0 || step == steps-1 {
				if got, want := walkBook(b, 1+rng.IntN(5)), m.walk(); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d: walk differs\nbook  %v\nmodel %v", seed, step, got, want)
				}
				for inst := range uint32(3) {
					for side := Buy; side <= Sell; side++ {
						if got, want := b.Depth(inst, side, 4), m.depth(inst, side, 4); !reflect.DeepEqual(got, want) {
							t.Fatalf("seed %d step %d depth %d/%s: %v want %v", seed, step, inst, side, got, want)
						}
					}
				}
				if b.Orders() != len(m.orders) {
					t.Fatalf("orders %d want %d", b.Orders(), len(m.orders))
				}
				checkRebuild(t, b)
			}
		}
	}
}

// checkRebuild rebuilds b from its walk with a Builder and checks the copy walks, hashes and
// matches the same.
func checkRebuild(t *testing.T, b *Book) {
	t.Helper()
	bl := NewBuilder(b.Orders(), b.Levels())
	for _, o := range walkBook(b, 1<<30) {
		if err := bl.Add(o.inst, o.side, o.price, o.id, o.qty); err != nil {
			t.Fatalf("rebuild: %v", err)
		}
	}
	c, err := bl.Finish()
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if !reflect.DeepEqual(walkBook(c, 1<<30), walkBook(b, 1<<30)) {
		t.Fatal("rebuilt book walks differently")
	}
	if c.StateHash() != b.StateHash() || c.Levels() != b.Levels() || c.Instruments() != b.Instruments() {
		t.Fatalf("rebuilt book: hash %x levels %d instruments %d, want %x %d %d",
			c.StateHash(), c.Levels(), c.Instruments(), b.StateHash(), b.Levels(), b.Instruments())
	}
	full := walkBook(b, 1<<30)
	for _, k := range []int{0, 1, len(full) / 3, max(0, len(full)-1), len(full), len(full) + 5} {
		cur := b.Walk()
		cur.Skip(k)
		var rest []mOrder
		for {
			run, ok := cur.Next(3)
			if !ok {
				break
			}
			for _, r := range run.Orders {
				if r.Qty != 0 {
					rest = append(rest, mOrder{r.ID, run.Instrument, run.Side, run.Price, r.Qty, 0})
				}
			}
		}
		if want := full[min(k, len(full)):]; !reflect.DeepEqual(rest, want) && len(rest)+len(want) > 0 {
			t.Fatalf("after Skip(%d): %v, want %v", k, rest, want)
		}
		if !cur.Done() {
			t.Fatal("cursor not done after the walk")
		}
	}
	for inst := range uint32(3) {
		for side := Buy; side <= Sell; side++ {
			if !reflect.DeepEqual(c.Depth(inst, side, 100), b.Depth(inst, side, 100)) {
				t.Fatalf("rebuilt depth differs")
			}
		}
	}
}

// TestRebuiltBookTrades checks that a rebuilt book (treap built in one pass) behaves like the
// original under further commands.
func TestRebuiltBookTrades(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := New()
	for i := range 5000 {
		side := Side(rng.IntN(2))
		p := 1000 - int64(rng.IntN(300))
		if side == Sell {
			p = 1001 + int64(rng.IntN(300))
		}
		mustSubmit(t, a, Order{ID: uint64(i + 1), Instrument: uint32(rng.IntN(4)), Side: side, Price: p, Qty: 1 + int64(rng.IntN(9))})
	}
	bl := NewBuilder(0, 0)
	for _, o := range walkBook(a, 1<<30) {
		if err := bl.Add(o.inst, o.side, o.price, o.id, o.qty); err != nil {
			t.Fatal(err)
		}
	}
	c, err := bl.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		var o Order
		if rng.IntN(3) == 0 {
			id := uint64(1 + rng.IntN(5000+i))
			if (a.Cancel(id) == nil) != (c.Cancel(id) == nil) {
				t.Fatalf("cancel %d differs", id)
			}
			continue
		}
		o = Order{ID: uint64(10000 + i), Instrument: uint32(rng.IntN(4)), Side: Side(rng.IntN(2)),
			Price: 850 + int64(rng.IntN(300)), Qty: 1 + int64(rng.IntN(20))}
		var f1, f2 fillLog
		r1, _ := a.Submit(o, f1.on)
		r2, _ := c.Submit(o, f2.on)
		if r1 != r2 || !reflect.DeepEqual(f1, f2) {
			t.Fatalf("step %d: %+v %v vs %+v %v", i, r1, f1, r2, f2)
		}
	}
	if a.StateHash() != c.StateHash() {
		t.Fatal("hashes diverged")
	}
}

func class(err error) error {
	for _, s := range []error{ErrBadOrder, ErrDuplicateID, ErrUnknownOrder} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}
