package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftbench "github.com/hashicorp/raft/bench"
)

const (
	benchBatch = 64  // entries per StoreLogs, raft's default MaxAppendEntries
	benchData  = 100 // bytes of command per entry
)

func benchLogs() []*raft.Log {
	data := bytes.Repeat([]byte{0xab}, benchData)
	logs := make([]*raft.Log, benchBatch)
	for i := range logs {
		logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
	}
	return logs
}

// BenchmarkStoreLogs: one StoreLogs of 64 × 100 B entries per op at each sync level, side by
// side (with -count N the levels interleave). syncs/op shows the group commit: 0 at level 0,
// 1 at levels 1 and 2 (plus a directory sync when a batch starts a new segment).
func BenchmarkStoreLogs(b *testing.B) {
	for _, level := range []SyncLevel{SyncNone, SyncData, SyncFull} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			l, err := OpenLog(b.TempDir(), Options{SyncLevel: level, SegmentSize: 8 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			logs := benchLogs()
			next := uint64(1)
			var syncs, syncNanos int64
			b.SetBytes(benchBatch * benchData)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, e := range logs {
					e.Index = next + uint64(j)
				}
				before := l.Stats()
				if err := l.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
				after := l.Stats()
				syncs += after.Syncs - before.Syncs
				syncNanos += after.SyncNanos - before.SyncNanos
				next += benchBatch
				if i%2048 == 2047 { // compact as raft would, off the clock, to bound disk use
					b.StopTimer()
					if err := l.DeleteRange(0, next-1-benchBatch); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
			b.ReportMetric(float64(syncNanos)/float64(b.N), "sync-ns/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/entry")
		})
	}
}

// BenchmarkBoltStoreLogs is the same batch on raft-boltdb, which only knows sync or no sync
// (bbolt syncs with fdatasync on Linux), for comparison with the levels above.
func BenchmarkBoltStoreLogs(b *testing.B) {
	for _, noSync := range []bool{true, false} {
		b.Run(fmt.Sprintf("nosync=%v", noSync), func(b *testing.B) {
			s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"), NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			logs := benchLogs()
			next := uint64(1)
			b.SetBytes(benchBatch * benchData)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, e := range logs {
					e.Index = next + uint64(j)
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
				next += benchBatch
			}
		})
	}
}

func BenchmarkGetLog(b *testing.B) {
	l, err := OpenLog(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	logs := benchLogs()
	for n := uint64(0); n < 100; n++ {
		for j, e := range logs {
			e.Index = n*benchBatch + uint64(j) + 1
		}
		if err := l.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
	var e raft.Log
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.GetLog(uint64(i%(100*benchBatch))+1, &e); err != nil {
			b.Fatal(err)
		}
	}
}

// raft ships generic LogStore/StableStore benchmarks in raft/bench. Its StoreLog starts at
// index 0 and its DeleteRange leaves gaps, neither of which a monotonic raft log accepts, so
// those two are not run here.
func BenchmarkRaftBench(b *testing.B) {
	logCases := map[string]func(*testing.B, raft.LogStore){
		"FirstIndex": raftbench.FirstIndex, "LastIndex": raftbench.LastIndex,
		"GetLog": raftbench.GetLog, "StoreLogs": raftbench.StoreLogs,
	}
	for name, fn := range logCases {
		b.Run(name, func(b *testing.B) {
			l, err := OpenLog(b.TempDir(), Options{SyncLevel: SyncData})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			fn(b, l)
		})
	}
	stableCases := map[string]func(*testing.B, raft.StableStore){
		"Set": raftbench.Set, "Get": raftbench.Get, "SetUint64": raftbench.SetUint64, "GetUint64": raftbench.GetUint64,
	}
	for name, fn := range stableCases {
		b.Run(name, func(b *testing.B) {
			s, err := OpenStable(b.TempDir(), Options{SyncLevel: SyncData})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fn(b, s)
		})
	}
}

// BenchmarkOpenLog: the recovery scan (read and CRC-check every record, build the offset
// table) that a restarted node pays before raft starts, per entry, for 100K × 100 B entries.
func BenchmarkOpenLog(b *testing.B) {
	const batches = 100_000 / benchBatch
	dir := b.TempDir()
	l, err := OpenLog(dir, Options{SegmentSize: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	logs := benchLogs()
	for n := uint64(0); n < batches; n++ {
		for j, e := range logs {
			e.Index = n*benchBatch + uint64(j) + 1
		}
		if err := l.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
	l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := OpenLog(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batches*benchBatch), "ns/entry")
}
