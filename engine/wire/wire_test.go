package wire

import (
	"bufio"
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	reqs := []Request{
		{Type: TypeOrder, Corr: 7, Order: Order{ID: 1 << 40, Instrument: 3, Side: Sell, TIF: IOC, Price: -5, Qty: 10}},
		{Type: TypeOrder, Corr: 8, Order: Order{ID: 2, Market: true, Qty: 1}},
		{Type: TypeCancel, Corr: 9, Cancel: 42},
		{Type: TypeBatch, Corr: 10, Batch: []Order{{ID: 1, Price: 100, Qty: 1}, {ID: 2, Side: Sell, Price: 200, Qty: 2}}},
		{Type: TypePing, Corr: 11},
	}
	var stream []byte
	for i := range reqs {
		stream = AppendRequest(stream, &reqs[i])
	}
	br := bufio.NewReader(bytes.NewReader(stream))
	var buf []byte
	for i := range reqs {
		var err error
		buf, err = ReadFrame(br, buf)
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		if err := DecodeRequest(buf, &got); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if typ, corr, err := CheckRequest(buf); err != nil || typ != reqs[i].Type || corr != reqs[i].Corr {
			t.Fatalf("request %d: CheckRequest = %d, %d, %v; want %d, %d", i, typ, corr, err, reqs[i].Type, reqs[i].Corr)
		}
		if !reflect.DeepEqual(got, reqs[i]) {
			t.Fatalf("request %d: got %+v want %+v", i, got, reqs[i])
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	in := Response{Type: TypeOrder, Corr: 5, Status: StatusNotLeader, Filled: 3, Rested: -1, Index: 99, Text: "127.0.0.12:7001"}
	b := AppendResponse(nil, &in)
	var out Response
	if err := DecodeResponse(b[4:], &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("got %+v want %+v", out, in)
	}
}

func TestMalformed(t *testing.T) {
	var r Request
	for _, b := range [][]byte{nil, {TypeOrder, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {99, 0, 0, 0, 0, 0, 0, 0, 0}, {TypeBatch, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0}} {
		if err := DecodeRequest(b, &r); !errors.Is(err, ErrFrame) {
			t.Fatalf("%v: err %v, want ErrFrame", b, err)
		}
		if _, _, err := CheckRequest(b); !errors.Is(err, ErrFrame) {
			t.Fatalf("%v: CheckRequest err %v, want ErrFrame", b, err)
		}
	}
	br := bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0x7f}))
	if _, err := ReadFrame(br, nil); !errors.Is(err, ErrFrame) {
		t.Fatalf("huge frame: %v", err)
	}
}
