package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine/book"
)

func TestParseCounts(t *testing.T) {
	got, err := ParseCounts("100k, 1m,5M,250_000,2", 1<<40)
	if err != nil || !reflect.DeepEqual(got, []int{100_000, 1_000_000, 5_000_000, 250_000, 2}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "1m,", "x", "0", "-5", "1.5", "10q", "2g"} {
		if _, err := ParseCounts(bad, 1_000_000_000); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if v, _ := ParseCounts("1.5m", 1<<40); v[0] != 1_500_000 {
		t.Errorf("1.5m = %v", v)
	}
}

func TestRunSmall(t *testing.T) {
	rep, err := Run(context.Background(), Options{Orders: []int{3000, 50_000}, Threads: []int{1, 2}, Restores: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 || rep.CPUs < 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Takes != MinTakes || !r.Identical || r.TakeNsPerOrder <= 0 || r.RestoreNsPerOrder <= 0 ||
			r.HeapBytesPerOrder <= 0 || r.WireBytesPerOrder < 32 || r.WireBytesPerOrder > 40 {
			t.Fatalf("result %+v", r)
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"load_avg", "cpus", "results"} {
		if _, ok := back[k]; !ok {
			t.Fatalf("JSON lacks %q: %s", k, js.String())
		}
	}
	row := back["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"orders", "threads", "take_ns_per_order", "restore_ns_per_order", "heap_bytes_per_order",
		"wire_bytes_per_order", "allocs_per_take", "takes"} {
		if _, ok := row[k]; !ok {
			t.Fatalf("result lacks %q", k)
		}
	}
	var tab strings.Builder
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tab.String(), "50K") || !strings.Contains(tab.String(), "Restore ns/order") {
		t.Fatalf("table:\n%s", tab.String())
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, o := range []Options{{Takes: 3}, {Orders: []int{0}}, {Threads: []int{0}}, {BlockSize: -1}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Orders: []int{1000}}); err == nil {
		t.Error("cancelled context ignored")
	}
}

func TestPreloadRests(t *testing.T) {
	b := book.New()
	if err := Preload(b, 10_000, 3, 50, 1); err != nil {
		t.Fatal(err)
	}
	if b.Orders() != 10_000 || b.Instruments() != 3 {
		t.Fatalf("orders %d instruments %d", b.Orders(), b.Instruments())
	}
}
