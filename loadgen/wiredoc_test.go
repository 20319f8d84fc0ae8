package loadgen

import (
	"bufio"
	"encoding/binary"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// docEngine is a one-node engine written from docs/wire.md alone (no engine/wire): it reads the
// documented frames and answers them as the page says. The load generator's preload and probe
// streams must run against it, using only the request types the page documents.
type docEngine struct {
	ln    net.Listener
	mu    sync.Mutex
	types map[byte]int
	index uint64
	bad   string
}

func startDocEngine(t *testing.T) *docEngine {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &docEngine{ln: ln, types: map[byte]int{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go e.serve(c)
		}
	}()
	return e
}

func (e *docEngine) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	var wmu sync.Mutex
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > 16<<20 || n < 9 {
			e.fail("frame length out of range")
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		typ, corr := body[0], binary.LittleEndian.Uint64(body[1:9])
		var rested int64
		switch {
		case typ == 1 && len(body) == 9+31: // order
		case typ == 3 && len(body) >= 13 && len(body) == 13+31*int(binary.LittleEndian.Uint32(body[9:13])): // batch
			for o := body[13:]; len(o) >= 31; o = o[31:] {
				rested += int64(binary.LittleEndian.Uint64(o[23:31]))
			}
		case typ == 4 && len(body) == 9: // ping
		default:
			e.fail("undocumented request")
			return
		}
		e.mu.Lock()
		e.types[typ]++
		idx := uint64(0)
		if typ != 4 {
			e.index++
			idx = e.index
		}
		e.mu.Unlock()
		// Response: type, corr, status 0 (ok), filled, rested, index, text_len 0.
		out := make([]byte, 4+36)
		binary.LittleEndian.PutUint32(out[0:], 36)
		out[4] = typ
		binary.LittleEndian.PutUint64(out[5:], corr)
		binary.LittleEndian.PutUint64(out[22:], uint64(rested))
		binary.LittleEndian.PutUint64(out[30:], idx)
		wmu.Lock()
		_, err := c.Write(out)
		wmu.Unlock()
		if err != nil {
			return
		}
	}
}

func (e *docEngine) fail(why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bad == "" {
		e.bad = why
	}
}

func TestStreamsUseOnlyDocumentedWire(t *testing.T) {
	e := startDocEngine(t)
	addr := []string{e.ln.Addr().String()}
	if _, err := Preload(t.Context(), PreloadOptions{BookShape: loadspec.BookShape{Orders: 5000, Instruments: 4}, Servers: addr, Batch: 1000}); err != nil {
		t.Fatalf("preload against the doc engine: %v", err)
	}
	st, err := Probe(t.Context(), ProbeOptions{Servers: addr, Rate: 500, Duration: 400 * time.Millisecond, Out: t.TempDir(),
		Instruments: 4, Conn: ConnOptions{KeepAlive: 50 * time.Millisecond}, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("probes against the doc engine: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bad != "" {
		t.Fatalf("the load generator sent something docs/wire.md does not describe: %s", e.bad)
	}
	if st.Answered != st.Scheduled || e.types[3] != 5 || e.types[1] < int(st.Scheduled) {
		t.Errorf("answered %d of %d probes; the engine saw %v (type: count)", st.Answered, st.Scheduled, e.types)
	}
	for typ := range e.types {
		if typ != 1 && typ != 3 && typ != 4 {
			t.Errorf("request type %d is not one the load generator's streams are documented to send", typ)
		}
	}
}
