package sample

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/looptest"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/rundir"

	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"
)

// iostat's formulas on hand-made counters.
func TestDiskFigures(t *testing.T) {
	a := blockdevice.IOStats{ReadIOs: 100, ReadSectors: 8000, ReadTicks: 50, WriteIOs: 1000, WriteSectors: 100000,
		WriteTicks: 2000, IOsTotalTicks: 1000, WeightedIOTicks: 3000, FlushRequestsCompleted: 10, TimeSpentFlushing: 20}
	b := blockdevice.IOStats{ReadIOs: 300, ReadSectors: 8000 + 2*2048, ReadTicks: 450, WriteIOs: 5000, WriteSectors: 100000 + 40*2048,
		WriteTicks: 10000, IOsTotalTicks: 2500, WeightedIOTicks: 9000, FlushRequestsCompleted: 210, TimeSpentFlushing: 620}
	d := diskFigures("vdx", a, b, 2, 2000)
	want := rundir.SampleDisk{Name: "vdx", ReadsPerS: 100, WritesPerS: 2000, FlushPerS: 100, ReadMBPerS: 1, WriteMBPer: 20,
		ReadAwait: 2, WriteAwait: 2, FlushAwait: 3, QueueSize: 3, Util: 75}
	if d != want {
		t.Fatalf("got  %+v\nwant %+v", d, want)
	}
	// A counter that went backwards (device re-added) yields zero, not a huge rate.
	if d := diskFigures("vdx", b, a, 2, 2000); d.WritesPerS != 0 || d.Util != 0 {
		t.Fatalf("backwards counters: %+v", d)
	}
}

// deviceOf names the block device holding path, as /proc/diskstats does.
func deviceOf(t *testing.T, path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	maj, min := unix.Major(st.Dev), unix.Minor(st.Dev)
	stats, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(stats), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == fmt.Sprint(maj) && f[1] == fmt.Sprint(min) {
			return f[2]
		}
	}
	t.Skipf("%s is on device %d:%d, which has no /proc/diskstats line (tmpfs or overlay?)", path, maj, min)
	return ""
}

// writeLoad keeps the disk busy with 256 KiB writes, each followed by fdatasync, until stop.
// The comparison runs on a loop device of its own when it can: on a disk shared with other
// tests running in parallel, iostat and the sampler read their counters a few milliseconds
// apart, and foreign bursts in that gap dominate the difference.
func writeLoad(t *testing.T, path string) (stop func()) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{0xa5}, 256<<10)
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var off int64
		for !done.Load() {
			f.WriteAt(buf, off)
			unix.Fdatasync(int(f.Fd()))
			off = (off + int64(len(buf))) % (64 << 20)
		}
	}()
	return func() { done.Store(true); wg.Wait(); f.Close() }
}

type iostatJSON struct {
	Sysstat struct {
		Hosts []struct {
			Statistics []struct {
				Disk []map[string]any `json:"disk"`
			} `json:"statistics"`
		} `json:"hosts"`
	} `json:"sysstat"`
}

// Our figures and iostat -dx over the same interval, under a steady write load, agree within 5 %.
// The two windows start a few ms apart (two processes), which steady load makes immaterial.
func TestAgreesWithIostat(t *testing.T) {
	tools.Require(t, "iostat")
	dir := t.TempDir()
	var dev, target string
	if loop := looptest.Device(t, 96<<20); loop != "" {
		dev, target = filepath.Base(loop), loop
	} else {
		dev, target = deviceOf(t, dir), filepath.Join(dir, "load.bin")
	}
	stop := writeLoad(t, target)
	defer stop()
	time.Sleep(500 * time.Millisecond) // past the first writes' allocation

	const secs = 3
	var out bytes.Buffer
	cmd := exec.Command("iostat", "-d", "-x", "-y", "-o", "JSON", fmt.Sprint(secs), "1", dev)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Devices: []string{dev}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(secs * time.Second)
	smp, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("iostat: %v\n%s", err, out.String())
	}
	stop()

	var js iostatJSON
	if err := json.Unmarshal(out.Bytes(), &js); err != nil {
		t.Fatalf("iostat JSON: %v\n%s", err, out.String())
	}
	var io map[string]any
	for _, h := range js.Sysstat.Hosts {
		for _, st := range h.Statistics {
			for _, d := range st.Disk {
				if d["disk_device"] == dev {
					io = d
				}
			}
		}
	}
	if io == nil || len(smp.Disks) != 1 {
		t.Fatalf("device %s: iostat %s, ours %+v", dev, out.String(), smp.Disks)
	}
	ours := smp.Disks[0]
	num := func(k string) float64 { v, _ := io[k].(float64); return v }
	pairs := []struct {
		name       string
		ours, them float64
		floor      float64 // absolute slack for small figures (iostat prints 2 decimals)
	}{
		{"w/s", ours.WritesPerS, num("w/s"), 1},
		{"wkB/s", ours.WriteMBPer * 1024, num("wkB/s"), 50},
		{"w_await", ours.WriteAwait, num("w_await"), 0.05},
		{"f/s", ours.FlushPerS, num("f/s"), 1},
		{"aqu-sz", ours.QueueSize, num("aqu-sz"), 0.02},
		{"%util", ours.Util, num("util"), 0.5},
		{"r/s", ours.ReadsPerS, num("r/s"), 1},
	}
	if num("w/s") < 20 {
		t.Fatalf("write load too light to compare: iostat w/s %.1f", num("w/s"))
	}
	for _, p := range pairs {
		diff := math.Abs(p.ours - p.them)
		rel := diff / math.Max(math.Abs(p.them), 1e-9)
		t.Logf("%-8s rig %10.2f  iostat %10.2f  diff %5.2f%%", p.name, p.ours, p.them, rel*100)
		if diff > p.floor && rel > 0.05 {
			t.Errorf("%s: rig %.2f vs iostat %.2f differ by %.1f%% (> 5%%)", p.name, p.ours, p.them, rel*100)
		}
	}
}

// A process is followed by pid: its CPU share, RSS, and its exit. The agent reports itself.
func TestProcs(t *testing.T) {
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer busy.Process.Kill()
	idle := exec.Command("sleep", "30")
	if err := idle.Start(); err != nil {
		t.Fatal(err)
	}
	defer idle.Process.Kill()
	pidFile := filepath.Join(t.TempDir(), "engine.pid")
	os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", idle.Process.Pid)), 0o644)

	s, err := New(Options{PIDs: []int{busy.Process.Pid}, PIDFiles: []string{pidFile, filepath.Join(t.TempDir(), "absent.pid")}})
	if err != nil {
		t.Fatal(err)
	}
	// Burn some CPU in this process too, so the agent's share is visibly non-zero.
	end := time.Now().Add(700 * time.Millisecond)
	for x := 0; time.Now().Before(end); x++ {
	}
	smp, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(smp.Procs) != 2 {
		t.Fatalf("procs %+v", smp.Procs)
	}
	b, i := smp.Procs[0], smp.Procs[1]
	if b.PID != busy.Process.Pid || b.Comm != "sh" || b.CPUPct <= 5 || b.RSSBytes == 0 {
		t.Fatalf("busy process: %+v", b)
	}
	if i.PID != idle.Process.Pid || i.Comm != "sleep" || i.CPUPct > 1 {
		t.Fatalf("idle process: %+v", i)
	}
	if smp.Agent.PID != os.Getpid() || smp.Agent.CPUPct <= 5 || smp.Agent.RSSBytes == 0 {
		t.Fatalf("agent: %+v", smp.Agent)
	}
	// The host's busy CPU includes both burners: at least what they used, at most every core.
	if h := smp.Host; h == nil || h.BusyPct < (b.CPUPct+smp.Agent.CPUPct)*0.8 || h.BusyPct > float64(smp.CPUs)*100*1.05 {
		t.Fatalf("host CPU %+v against busy %.1f + agent %.1f on %d CPUs", smp.Host, b.CPUPct, smp.Agent.CPUPct, smp.CPUs)
	}
	busy.Process.Kill()
	busy.Wait()
	smp, _ = s.Next()
	if !smp.Procs[0].Gone {
		t.Fatalf("a killed process must be reported gone: %+v", smp.Procs[0])
	}
}

// Datagrams sent at a socket with a tiny receive buffer that nobody reads are dropped and
// counted in RcvbufErrors: the micro-burst experiment's signal.
func TestUDPRcvbufErrors(t *testing.T) {
	rc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, _ := rc.SyscallConn()
	raw.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1) })
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	msg := make([]byte, 1000)
	const sent = 500
	for i := 0; i < sent; i++ {
		tx.Write(msg)
	}
	smp, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	// The socket holds a few datagrams at most; the rest were dropped for want of buffer.
	if smp.UDP.RcvbufErrorsDelta < sent/2 || smp.UDP.InErrorsDelta < smp.UDP.RcvbufErrorsDelta || smp.UDP.RcvbufErrors < smp.UDP.RcvbufErrorsDelta {
		t.Fatalf("udp %+v after %d datagrams into a full buffer", smp.UDP, sent)
	}
}

// Touching fresh memory shows up as page faults; unsynced writes as dirty pages.
func TestVMStat(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	f, _ := os.Create(filepath.Join(t.TempDir(), "dirty"))
	f.Write(bytes.Repeat([]byte{1}, 8<<20))
	defer f.Close()
	time.Sleep(50 * time.Millisecond)
	smp, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	pages := float64(len(mem) / 4096)
	if smp.VM.PgFaultPerS*smp.Interval < pages {
		t.Fatalf("pgfault %.0f/s over %.3fs, want at least %.0f faults", smp.VM.PgFaultPerS, smp.Interval, pages)
	}
	if smp.VM.NrDirty+smp.VM.NrWriteback == 0 {
		t.Fatalf("8 MiB unsynced, yet no dirty or writeback pages: %+v", smp.VM)
	}
	if smp.Load.Load1 <= 0 && smp.Load.Load5 <= 0 {
		t.Fatalf("load %+v", smp.Load)
	}
}

func TestRunNDJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel()
	var buf bytes.Buffer
	if err := Run(ctx, Options{Interval: 100 * time.Millisecond}, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 || len(lines) > 4 {
		t.Fatalf("%d lines in 350ms at 100ms", len(lines))
	}
	got, err := rundir.ReadSamples(strings.NewReader(buf.String() + `{"time":"2026-`)) // a torn last line
	if err != nil || len(got) != len(lines) || got[0].Seq != 1 || got[1].Seq != 2 || got[0].Interval < 0.05 {
		t.Fatalf("ReadAll: %d samples, %v", len(got), err)
	}
	if _, err := rundir.ReadSamples(strings.NewReader("garbage\n" + lines[0] + "\n")); err == nil {
		t.Fatal("a bad line before good ones must be an error")
	}
	if _, err := rundir.ReadSamples(strings.NewReader("")); !errors.Is(err, rundir.ErrNoSamples) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := New(Options{Devices: []string{"nosuchdisk"}}); err == nil || !strings.Contains(err.Error(), "nosuchdisk") {
		t.Fatalf("unknown device: %v", err)
	}
}

// The cost of one sample (all files read and the figures computed): the agent's own overhead
// per interval. Compare with the interval: at 1 s, 1 ms of CPU is 0.1 % of one core.
func BenchmarkNext(b *testing.B) {
	s, err := New(Options{PIDs: []int{os.Getpid()}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
