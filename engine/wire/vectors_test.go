package wire

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// vector is one paragraph of testdata/vectors.txt (format in docs/wire.md).
type vector struct {
	name      string
	line      int
	count     int // a batch's count field, checked against its order lines
	req       *Request
	resp      *Response
	malformed string // "request", "response" or "frame"
	frame     []byte
}

func readVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	var cur *vector
	for i, raw := range strings.Split(string(b), "\n") {
		ln := strings.TrimSpace(raw)
		if ln == "" || strings.HasPrefix(ln, "#") {
			continue
		}
		key, rest, _ := strings.Cut(ln, " ")
		where := "testdata/vectors.txt:" + strconv.Itoa(i+1)
		if key == "vector" {
			vs = append(vs, vector{name: rest, line: i + 1})
			cur = &vs[len(vs)-1]
			continue
		}
		if cur == nil {
			t.Fatalf("%s: %q before the first vector line", where, key)
		}
		f := fields(rest)
		var err error
		switch key {
		case "request":
			cur.req = &Request{Type: uint8(f.u("type", 8)), Corr: f.u("corr", 64), Cancel: f.u("cancel", 64)}
			if cur.req.Type == TypeOrder {
				cur.req.Order = f.order()
			}
			if cur.req.Type == TypeBatch {
				cur.count = int(f.u("count", 32))
			}
		case "order":
			cur.req.Batch = append(cur.req.Batch, f.order())
		case "response":
			cur.resp = &Response{Type: uint8(f.u("type", 8)), Corr: f.u("corr", 64), Status: uint8(f.u("status", 8)),
				Filled: f.i("filled"), Rested: f.i("rested"), Index: f.u("index", 64), Text: f.s("text")}
		case "malformed":
			cur.malformed = rest
		case "hex":
			if cur.frame, err = hex.DecodeString(strings.ReplaceAll(rest, " ", "")); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		default:
			t.Fatalf("%s: unknown line %q", where, key)
		}
		if f.err != nil {
			t.Fatalf("%s: %v", where, f.err)
		}
	}
	return vs
}

// kv holds one line's key=value fields; the first bad value is kept in err.
type kv struct {
	m   map[string]string
	err error
}

var fieldRE = regexp.MustCompile(`(\w+)=("[^"]*"|\S+)`)

func fields(s string) *kv {
	f := &kv{m: map[string]string{}}
	for _, m := range fieldRE.FindAllStringSubmatch(s, -1) {
		f.m[m[1]] = m[2]
	}
	return f
}

func (f *kv) u(k string, bits int) uint64 {
	v, ok := f.m[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, bits)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n
}

func (f *kv) i(k string) int64 {
	n, err := strconv.ParseInt(f.m[k], 10, 64)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n
}

func (f *kv) s(k string) string {
	v, err := strconv.Unquote(f.m[k])
	if err != nil && f.err == nil {
		f.err = err
	}
	return v
}

func (f *kv) order() Order {
	return Order{ID: f.u("id", 64), Instrument: uint32(f.u("instrument", 32)), Side: uint8(f.u("side", 8)),
		TIF: uint8(f.u("tif", 8)), Market: f.u("market", 1) == 1, Price: f.i("price"), Qty: f.i("qty")}
}

// TestVectors: every vector's fields encode to its bytes, and its bytes decode to its fields;
// malformed ones are refused with ErrFrame.
func TestVectors(t *testing.T) {
	vs := readVectors(t)
	if len(vs) < 15 {
		t.Fatalf("%d vectors in testdata/vectors.txt, expected the full set", len(vs))
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			if v.frame == nil {
				t.Fatalf("line %d: no hex", v.line)
			}
			body, err := ReadFrame(bufio.NewReader(bytes.NewReader(v.frame)), nil)
			if v.malformed == "frame" {
				if !errors.Is(err, ErrFrame) {
					t.Fatalf("oversize frame read with err %v, want ErrFrame", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read frame: %v", err)
			}
			if len(body) != len(v.frame)-4 {
				t.Fatalf("length prefix says %d bytes, %d follow", len(body), len(v.frame)-4)
			}
			switch {
			case v.malformed == "request":
				var r Request
				if err := DecodeRequest(body, &r); !errors.Is(err, ErrFrame) {
					t.Fatalf("decoded with err %v, want ErrFrame", err)
				}
			case v.malformed == "response":
				var r Response
				if err := DecodeResponse(body, &r); !errors.Is(err, ErrFrame) {
					t.Fatalf("decoded with err %v, want ErrFrame", err)
				}
			case v.req != nil:
				if len(v.req.Batch) != v.count {
					t.Fatalf("line %d: count=%d but %d order lines", v.line, v.count, len(v.req.Batch))
				}
				if got := AppendRequest(nil, v.req); !bytes.Equal(got, v.frame) {
					t.Fatalf("encode:\n got  %x\n want %x", got, v.frame)
				}
				var got Request
				if err := DecodeRequest(body, &got); err != nil {
					t.Fatal(err)
				}
				if len(got.Batch) == 0 {
					got.Batch = nil // an empty batch decodes to no slice
				}
				if !reflect.DeepEqual(&got, v.req) {
					t.Fatalf("decode: got %+v want %+v", got, *v.req)
				}
			case v.resp != nil:
				if got := AppendResponse(nil, v.resp); !bytes.Equal(got, v.frame) {
					t.Fatalf("encode:\n got  %x\n want %x", got, v.frame)
				}
				var got Response
				if err := DecodeResponse(body, &got); err != nil {
					t.Fatal(err)
				}
				if got != *v.resp {
					t.Fatalf("decode: got %+v want %+v", got, *v.resp)
				}
			default:
				t.Fatalf("line %d: neither request, response nor malformed", v.line)
			}
		})
	}
}

// TestDocTables: the type and status tables of docs/wire.md name the codes the code uses.
func TestDocTables(t *testing.T) {
	b, err := os.ReadFile("../../docs/wire.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \| ([a-z-]+) \|`).FindAllStringSubmatch(string(b), -1) {
		doc[m[2]] = m[1]
	}
	want := map[string]uint8{
		"order": TypeOrder, "cancel": TypeCancel, "batch": TypeBatch, "ping": TypePing,
		"ok": StatusOK, "not-leader": StatusNotLeader, "rejected": StatusRejected, "error": StatusError,
	}
	for name, code := range want {
		if doc[name] != strconv.Itoa(int(code)) {
			t.Errorf("docs/wire.md gives %q code %q, the code uses %d", name, doc[name], code)
		}
	}
	if !strings.Contains(string(b), strconv.Itoa(MaxFrame)) && !strings.Contains(string(b), "16,777,216") {
		t.Errorf("docs/wire.md does not state the frame limit %d", MaxFrame)
	}
}
