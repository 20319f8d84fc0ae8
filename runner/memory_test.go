package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target/targettest"
)

func memPlaybook(t *testing.T, extra string) *playbooks.Playbook {
	t.Helper()
	pb, err := playbooks.Parse("mem.yaml", []byte("duration: 5s\nwarmup: 1s\nload: {probe_rate: 100/s}\n"+extra), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// The book's memory is bytes per resting order × orders × the servers on each host, against
// each host's memory; the refusal names every part, and how many orders would fit.
func TestCheckMemory(t *testing.T) {
	pb := memPlaybook(t, "cluster: {servers: 3}\npreload: {orders: 300M}\n")
	one := []MemoryHost{{Servers: []string{"node-0", "node-1", "node-2"}, AvailableBytes: 24 << 30, Source: "MemAvailable of test"}}
	checked, err := CheckMemory(pb, one)
	if !checked || !errors.Is(err, ErrMemory) {
		t.Fatalf("300M orders × 3 servers in 24 GiB: checked %v, err %v; want ErrMemory", checked, err)
	}
	// 300M × 80 B × 3 = 72e9 B = 67.1 GiB; 24 GiB / 240 B = 107,374,182 orders.
	for _, want := range []string{"node-0, node-1, node-2 (one host): the book needs about 67.1 GiB resident",
		"(3 servers × 300,000,000 orders × 80 B/order, as measured for the reference engine)",
		"the host has 24.0 GiB (MemAvailable of test); at most 107,374,182 orders fit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if reference.BytesPerOrder != 80 {
		t.Fatalf("the figures above are worked for 80 B/order, the constant is %d", reference.BytesPerOrder)
	}
	// One server per host (the AWS stack): 300M × 80 B = 22.4 GiB fits a 32 GiB instance each.
	var apart []MemoryHost
	for _, n := range one[0].Servers {
		apart = append(apart, MemoryHost{Servers: []string{n}, AvailableBytes: 32 << 30, Source: "c7i.4xlarge"})
	}
	if _, err := CheckMemory(pb, apart); err != nil {
		t.Errorf("one server per 32 GiB host: %v", err)
	}
	// The most that fits fits; one more order does not.
	pb.Preload.Orders = 107_374_182
	if _, err := CheckMemory(pb, one); err != nil {
		t.Errorf("%d orders: %v", pb.Preload.Orders, err)
	}
	pb.Preload.Orders++
	if _, err := CheckMemory(pb, one); !errors.Is(err, ErrMemory) {
		t.Errorf("%d orders: %v; want ErrMemory", pb.Preload.Orders, err)
	}
	// 99,999,999,999 orders: the product does not wrap.
	pb.Preload.Orders = 99_999_999_999
	if _, err := CheckMemory(pb, apart); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "7.3 TiB") {
		t.Errorf("99,999,999,999 orders: %v; want ErrMemory naming 7.3 TiB", err)
	}
}

// A command-driven engine is checked with what its playbook declares, and not at all without it.
func TestCheckMemoryDeclared(t *testing.T) {
	const cmd = "engine: {driver: command, command: {binary: /bin/true}%s}\npreload: {orders: 1M}\n"
	host := []MemoryHost{{Servers: []string{"node-0"}, AvailableBytes: 100 << 20, Source: "test"}}
	if checked, err := CheckMemory(memPlaybook(t, strings.Replace(cmd, "%s", "", 1)), host); checked || err != nil {
		t.Errorf("no engine.bytes_per_order: checked %v, err %v; want not checked", checked, err)
	}
	checked, err := CheckMemory(memPlaybook(t, strings.Replace(cmd, "%s", ", bytes_per_order: 200", 1)), host)
	if !checked || !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "1,000,000 orders × 200 B/order, as engine.bytes_per_order says") {
		t.Errorf("1M × 200 B in 100 MiB: checked %v, err %v; want ErrMemory naming engine.bytes_per_order", checked, err)
	}
}

// Before any engine starts, the servers' facts decide: every server on one host (the fake
// cluster's facts name one), its MemAvailable against the whole cluster's books.
func TestMemoryRefusedBeforeEngines(t *testing.T) {
	c := targettest.NewCluster()
	c.MemAvailable = 100 << 10 // 1,000 orders × 80 B × 3 servers = 234.4 KiB do not fit
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "2s", ""))
	if !errors.Is(res.err, ErrMemory) {
		t.Fatalf("err %v; want ErrMemory", res.err)
	}
	for _, want := range []string{"node-0, node-1, node-2 (one host)", "1,000 orders × 80 B/order", "the host has 100.0 KiB (MemAvailable of fake-host)"} {
		if !strings.Contains(res.err.Error(), want) || !strings.Contains(res.man.Error, want) {
			t.Errorf("error %q lacks %q", res.err, want)
		}
	}
	if c.Called("node-0 POST /engine/start") {
		t.Errorf("an engine was started although the run was refused: %v", c.Calls())
	}
	c2 := targettest.NewCluster()
	c2.MemAvailable = 1 << 30
	if res := runFake(t, context.Background(), &targettest.Target{Cluster: c2}, plan(t, "2s", "")); res.err != nil {
		t.Errorf("a book that fits: %v", res.err)
	}
}

// A run that records holds each Go engine's flight recorder beside its book: 3 × 128 MiB do not
// fit in 300 MiB with a small book, which fits without recording.
func TestCheckMemoryCountsTheFlightRecorder(t *testing.T) {
	host := []MemoryHost{{Servers: []string{"node-0", "node-1", "node-2"}, AvailableBytes: 300 << 20, Source: "test"}}
	pb := memPlaybook(t, "cluster: {servers: 3}\npreload: {orders: 1k}\nengine: {recording: \"on\"}\n")
	if _, err := CheckMemory(pb, host); !errors.Is(err, ErrMemory) ||
		!strings.Contains(err.Error(), "the engines' flight recorders 384.0 MiB more (3 servers × 128.0 MiB each, engine.recording: on)") {
		t.Errorf("recording on, 300 MiB: %v; want ErrMemory naming the flight recorders", err)
	}
	pb.Engine.Recording = playbooks.RecordingOff
	if _, err := CheckMemory(pb, host); err != nil {
		t.Errorf("recording off, 300 MiB: %v", err)
	}
}
