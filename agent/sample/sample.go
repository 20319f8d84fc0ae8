// Package sample records OS counters at a fixed interval as NDJSON (one JSON object per line):
// per-disk IOPS, throughput, await and utilisation computed with iostat's formulas from
// /proc/diskstats; UDP receive errors from /proc/net/snmp; page faults and dirty/writeback pages
// from /proc/vmstat; the load average; CPU and RSS of chosen processes and of the agent itself.
package sample

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"

	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/rundir"
)

// Options choose what to sample.
type Options struct {
	Root     string        // filesystem root of /proc and /sys ("/" on a node)
	Interval time.Duration // default 1 s
	// Devices names the block devices to report (as in /proc/diskstats, partitions allowed);
	// empty means every whole disk in /sys/block except loop and ram devices.
	Devices []string
	PIDs    []int
	// PIDFiles are read again at every sample, so a relaunched process is followed.
	PIDFiles []string
	// Ethtool is the ethtool binary for the ENA receive drop counters (default "ethtool").
	Ethtool string
}

// snapshot is the raw counters at one instant.
type snapshot struct {
	at     time.Time
	disks  map[string]blockdevice.IOStats
	udpIn  uint64
	udpBuf uint64
	nics   map[string]uint64 // ENA receive drops per interface
	vm     map[string]uint64
	procs  map[int]procTimes
	agent  procTimes
	load   rundir.SampleLoad
	cpu    *procfs.CPUStat // /proc/stat's all-CPU line, seconds; nil when unreadable
}

type procTimes struct {
	comm  string
	start uint64 // start time in ticks: a reused pid is a different process
	ticks uint64
	rss   uint64
}

// Sampler computes samples from successive snapshots.
type Sampler struct {
	opts    Options
	fs      procfs.FS
	self    procfs.FS // the real /proc, for the agent's own figures
	bfs     blockdevice.FS
	devices map[string]bool
	ena     []string // ENA interfaces, read with ethtool -S
	cpus    int
	prev    *snapshot
	seq     int
}

// New checks that the files can be read and takes the first snapshot.
func New(opts Options) (*Sampler, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	s := &Sampler{opts: opts}
	var err error
	if s.fs, err = procfs.NewFS(filepath.Join(opts.Root, "proc")); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	if s.self, err = procfs.NewFS("/proc"); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	if s.bfs, err = blockdevice.NewFS(filepath.Join(opts.Root, "proc"), filepath.Join(opts.Root, "sys")); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	s.devices = map[string]bool{}
	if len(opts.Devices) > 0 {
		for _, d := range opts.Devices {
			s.devices[d] = true
		}
	} else {
		names, err := s.bfs.SysBlockDevices()
		if err != nil {
			return nil, fmt.Errorf("sample: list block devices: %w", err)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "loop") && !strings.HasPrefix(n, "ram") {
				s.devices[n] = true
			}
		}
	}
	if cpus, err := s.fs.CPUInfo(); err == nil {
		s.cpus = len(cpus)
	}
	if s.opts.Ethtool == "" {
		s.opts.Ethtool = "ethtool"
	}
	s.ena = enaIfaces(opts.Root)
	if s.prev, err = s.snap(); err != nil {
		return nil, err
	}
	if len(opts.Devices) > 0 {
		for _, d := range opts.Devices {
			if _, ok := s.prev.disks[d]; !ok {
				return nil, fmt.Errorf("sample: device %q is not in /proc/diskstats", d)
			}
		}
	}
	return s, nil
}

func (s *Sampler) pids() []int { return followed(s.opts.PIDs, s.opts.PIDFiles) }

// followed is pids and the pids read now from pidFiles (one that is missing or holds no pid is
// skipped: the process is not started yet, or is between runs).
func followed(pids []int, pidFiles []string) []int {
	pids = append([]int(nil), pids...)
	for _, f := range pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // not started yet, or between runs
		}
		if pid, ok := parsePID(b); ok {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parsePID is a pid file's process: one positive number, spaces around it allowed.
func parsePID(b []byte) (int, bool) {
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	return pid, err == nil && pid > 0
}

func (s *Sampler) snap() (*snapshot, error) {
	sn := &snapshot{at: time.Now(), disks: map[string]blockdevice.IOStats{}, procs: map[int]procTimes{}}
	stats, err := s.bfs.ProcDiskstats()
	if err != nil {
		return nil, fmt.Errorf("sample: diskstats: %w", err)
	}
	for _, d := range stats {
		if s.devices[d.DeviceName] {
			sn.disks[d.DeviceName] = d.IOStats
		}
	}
	self, err := s.fs.Self()
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	snmp, err := self.Snmp()
	if err != nil {
		return nil, fmt.Errorf("sample: net/snmp: %w", err)
	}
	if snmp.Udp.InErrors != nil {
		sn.udpIn = uint64(*snmp.Udp.InErrors)
	}
	if snmp.Udp.RcvbufErrors != nil {
		sn.udpBuf = uint64(*snmp.Udp.RcvbufErrors)
	}
	for _, iface := range s.ena {
		if v, ok := nicDrops(s.opts.Ethtool, iface); ok {
			if sn.nics == nil {
				sn.nics = map[string]uint64{}
			}
			sn.nics[iface] = v
		}
	}
	// procfs has no /proc/vmstat parser; the format is "name value" per line.
	if sn.vm, err = readVMStat(filepath.Join(s.opts.Root, "proc/vmstat")); err != nil {
		return nil, err
	}
	la, err := loadavg.Read(s.opts.Root)
	if err != nil {
		return nil, fmt.Errorf("sample: loadavg: %w", err)
	}
	sn.load = rundir.SampleLoad{Load1: la.Load1, Load5: la.Load5, Load15: la.Load15, Overloaded: s.cpus > 0 && la.Load1 > float64(s.cpus)}
	for _, pid := range s.pids() {
		if pt, ok := procSnap(s.fs, pid); ok {
			sn.procs[pid] = pt
		}
	}
	sn.agent, _ = procSnap(s.self, os.Getpid())
	if st, err := s.fs.Stat(); err == nil { // optional: a figure less, not a failed sample
		sn.cpu = &st.CPUTotal
	}
	return sn, nil
}

func procSnap(fs procfs.FS, pid int) (procTimes, bool) {
	p, err := fs.Proc(pid)
	if err != nil {
		return procTimes{}, false
	}
	st, err := p.Stat()
	if err != nil {
		return procTimes{}, false
	}
	return procTimes{comm: st.Comm, start: st.Starttime, ticks: uint64(st.UTime + st.STime), rss: uint64(st.ResidentMemory())}, true
}

var vmKeys = map[string]bool{"pgfault": true, "pgmajfault": true, "nr_dirty": true, "nr_writeback": true}

func readVMStat(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || !vmKeys[k] {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sample: %s: %s: %w", path, k, err)
		}
		out[k] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sample: %s: %w", path, err)
	}
	for k := range vmKeys {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("sample: %s has no %s", path, k)
		}
	}
	return out, nil
}

// userHZ is the unit of /proc/<pid>/stat times; Linux reports them in 1/100 s on every
// architecture the rig runs on.
const userHZ = 100

// Next takes a snapshot and returns the figures over the time since the previous one.
func (s *Sampler) Next() (rundir.Sample, error) {
	cur, err := s.snap()
	if err != nil {
		return rundir.Sample{}, err
	}
	prev := s.prev
	s.prev = cur
	s.seq++
	return compute(prev, cur, s.seq, s.cpus, s.pids()), nil
}

func sortedKeys(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// delta is b-a for counters that may wrap or reset (a device re-added): never negative.
func delta(a, b uint64) float64 {
	if b < a {
		return 0
	}
	return float64(b - a)
}

func compute(prev, cur *snapshot, seq, cpus int, pids []int) rundir.Sample {
	secs := cur.at.Sub(prev.at).Seconds()
	ms := secs * 1000
	out := rundir.Sample{Time: cur.at.UTC(), Seq: seq, Interval: secs, CPUs: cpus, Load: cur.load}
	names := make([]string, 0, len(cur.disks))
	for n := range cur.disks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a, ok := prev.disks[n]
		if !ok {
			continue
		}
		out.Disks = append(out.Disks, diskFigures(n, a, cur.disks[n], secs, ms))
	}
	out.UDP = rundir.SampleUDP{InErrors: cur.udpIn, RcvbufErrors: cur.udpBuf,
		InErrorsDelta: uint64(delta(prev.udpIn, cur.udpIn)), RcvbufErrorsDelta: uint64(delta(prev.udpBuf, cur.udpBuf))}
	for _, iface := range sortedKeys(cur.nics) {
		if a, ok := prev.nics[iface]; ok {
			out.NICs = append(out.NICs, rundir.SampleNIC{Iface: iface, RxDrops: cur.nics[iface], RxDropsDelta: uint64(delta(a, cur.nics[iface]))})
		}
	}
	out.VM = rundir.SampleVM{
		PgFaultPerS:    delta(prev.vm["pgfault"], cur.vm["pgfault"]) / secs,
		PgMajFaultPerS: delta(prev.vm["pgmajfault"], cur.vm["pgmajfault"]) / secs,
		NrDirty:        cur.vm["nr_dirty"],
		NrWriteback:    cur.vm["nr_writeback"],
	}
	for _, pid := range pids {
		out.Procs = append(out.Procs, procFigures(pid, prev.procs[pid], cur.procs, secs))
	}
	out.Agent = procFigures(os.Getpid(), prev.agent, map[int]procTimes{os.Getpid(): cur.agent}, secs)
	out.Host = hostFigures(prev.cpu, cur.cpu, secs)
	return out
}

// hostFigures is the machine's CPU over the interval in percent of one core.
func hostFigures(a, b *procfs.CPUStat, secs float64) *rundir.SampleHost {
	if a == nil || b == nil || secs <= 0 {
		return nil
	}
	busy := func(c *procfs.CPUStat) float64 {
		return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	}
	pct := func(x, y float64) float64 { return max(0, y-x) / secs * 100 }
	return &rundir.SampleHost{BusyPct: pct(busy(a), busy(b)), IOWaitPct: pct(a.Iowait, b.Iowait), StealPct: pct(a.Steal, b.Steal)}
}

func procFigures(pid int, a procTimes, now map[int]procTimes, secs float64) rundir.SampleProc {
	b, ok := now[pid]
	if !ok {
		return rundir.SampleProc{PID: pid, Comm: a.comm, Gone: true}
	}
	p := rundir.SampleProc{PID: pid, Comm: b.comm, RSSBytes: b.rss}
	if a.start == b.start { // same process as last time; otherwise its CPU is from an unknown start
		p.CPUPct = delta(a.ticks, b.ticks) / userHZ / secs * 100
	}
	return p
}

// diskFigures applies iostat's (sysstat 12) formulas to two /proc/diskstats readings.
func diskFigures(name string, a, b blockdevice.IOStats, secs, ms float64) rundir.SampleDisk {
	rd, wr, fl := delta(a.ReadIOs, b.ReadIOs), delta(a.WriteIOs, b.WriteIOs), delta(a.FlushRequestsCompleted, b.FlushRequestsCompleted)
	await := func(ticks, ios float64) float64 {
		if ios == 0 {
			return 0
		}
		return ticks / ios
	}
	util := delta(a.IOsTotalTicks, b.IOsTotalTicks) / ms * 100
	if util > 100 {
		util = 100
	}
	return rundir.SampleDisk{
		Name:       name,
		ReadsPerS:  rd / secs,
		WritesPerS: wr / secs,
		FlushPerS:  fl / secs,
		ReadMBPerS: delta(a.ReadSectors, b.ReadSectors) * 512 / (1 << 20) / secs,
		WriteMBPer: delta(a.WriteSectors, b.WriteSectors) * 512 / (1 << 20) / secs,
		ReadAwait:  await(delta(a.ReadTicks, b.ReadTicks), rd),
		WriteAwait: await(delta(a.WriteTicks, b.WriteTicks), wr),
		FlushAwait: await(delta(a.TimeSpentFlushing, b.TimeSpentFlushing), fl),
		QueueSize:  delta(a.WeightedIOTicks, b.WeightedIOTicks) / ms,
		Util:       util,
	}
}

// Run writes one NDJSON line per interval to w until ctx ends. The first line comes one
// interval after the start (rates need two readings).
func Run(ctx context.Context, opts Options, w io.Writer) error {
	s, err := New(opts)
	if err != nil {
		return err
	}
	return s.Run(ctx, w)
}

// Run is Run for an existing sampler (its first snapshot is the baseline).
func (s *Sampler) Run(ctx context.Context, w io.Writer) error {
	enc := json.NewEncoder(w)
	return every(ctx, s.opts.Interval, func() error {
		smp, err := s.Next()
		if err != nil {
			return err
		}
		if err := enc.Encode(smp); err != nil {
			return fmt.Errorf("sample: write: %w", err)
		}
		return nil
	})
}

// every calls step at each tick of interval until ctx ends (nil) or step fails (its error): the
// OS sampler's loop (the scheduler sampler's, at 20 ms, waits on a timerfd instead: rawsys.go).
func every(ctx context.Context, interval time.Duration, step func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := step(); err != nil {
			return err
		}
	}
}
