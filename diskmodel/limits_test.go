package diskmodel

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsValidate(t *testing.T) {
	if err := (Limits{Throughput: 125e6, IOPS: 3000, SyncLatency: 4 * time.Millisecond}).Validate(); err != nil {
		t.Fatal(err)
	}
	for l, want := range map[Limits]string{
		{Throughput: -1}:            "throughput -1 B/s is negative",
		{IOPS: 10, IOSize: 100}:     "io_size 100 is below 512 B",
		{Burst: time.Second}:        "burst needs a throughput or iops cap",
		{SyncLatency: -time.Second}: "must not be negative",
	} {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: err %v, want %q", l, err, want)
		}
	}
}

func TestCheckNamesBothFigures(t *testing.T) {
	asked := Limits{Throughput: 125e6, IOPS: 3000, SyncLatency: 4 * time.Millisecond}
	ok := Achieved{ThroughputBps: 120e6, IOPS: 2900, SyncLatency: 4100 * time.Microsecond}
	if err := Check(asked, ok, 0.8); err != nil {
		t.Fatalf("within the floor: %v", err)
	}
	slow := Achieved{ThroughputBps: 80e6, IOPS: 2900, SyncLatency: 9 * time.Millisecond}
	err := Check(asked, slow, 0.8)
	for _, want := range []string{"throughput 125.0 MB/s asked, 80.0 MB/s achieved (64 %)", "sync latency 4ms asked, 9ms achieved"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v; want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "iops") {
		t.Errorf("iops within the floor named: %v", err)
	}
	// Nothing asked: nothing to fall short of.
	if err := Check(Limits{}, Achieved{ThroughputBps: 1}, 0.8); err != nil {
		t.Fatal(err)
	}
}
