// Package runq reports each run-queue wait of chosen threads, placed exactly: a BPF program on
// the scheduler's sched_switch tracepoint sees a tracked thread get a CPU and reports the wait
// the kernel is about to add to its schedstat run_delay (from when sched_info queued it to the
// run queue's clock now) — the waits run_delay only sums.
//
// The program runs on every context switch of every CPU, so it checks that the thread switched
// to is tracked first and returns; the rest runs only for tracked threads. One array map holds a
// slot per TID (the TID tracked there): the check is an array lookup the verifier inlines, with
// no map helper call. The program is built here as instructions (no compiled object), as a
// BTF-enabled raw tracepoint that reads task_struct and the run queue at the offsets the
// kernel's BTF gives.
//
// Where BPF, BTF or the privilege is missing Open returns an error matching ErrUnsupported;
// callers fall back to sampling schedstat.
package runq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// ErrUnsupported is where this kernel, or this process's privilege, cannot run the tracer.
var ErrUnsupported = errors.New("run-queue tracing is unsupported here")

// ErrSlotTaken is Track's refusal of a thread whose slot another tracked thread holds (only
// where pid_max is over maxSlots): that thread's waits stay sampled only.
var ErrSlotTaken = errors.New("its slot holds another tracked thread")

// Wait is one run-queue wait of a tracked thread: runnable from StartNs (CLOCK_MONOTONIC, as
// bpf_ktime_get_ns) for DurNs until it got a CPU.
type Wait struct {
	TID            int32
	StartNs, DurNs int64
}

// Options tune a Tracer.
type Options struct {
	// MinWait: waits shorter are not reported (default DefaultMinWait); only the kernel sees
	// them.
	MinWait time.Duration
	// RingBytes is the ring buffer's size, a power of two of pages (default 1 MiB: 32 Ki
	// waits between two Drains).
	RingBytes int

	// slots, a power of two, replaces the slot count pid_max gives (tests provoke
	// collisions with it).
	slots int
}

// DefaultMinWait is the shortest wait reported by default: low enough that what is not placed,
// which a sampler can only spread over its interval, stays small beside 100 ms samples, and
// high enough that a busy node's records stay some thousands a second (docs/results.md).
const DefaultMinWait = 100 * time.Microsecond

const (
	defaultRingBytes = 1 << 20
	// pidLimit is the kernel's PID_MAX_LIMIT on 64-bit.
	pidLimit = 1 << 22
	// maxSlots bounds the slots map (16 bytes a slot: 1 MiB): a larger pid_max shares
	// each slot among the TIDs equal modulo maxSlots.
	maxSlots = 1 << 16
)

// slotCount is how many slots a pid_max needs: every TID its own where pid_max allows.
func slotCount(pidMax int) int {
	n := 1
	for n < pidMax && n < maxSlots {
		n <<= 1
	}
	return n
}

// Shared is the program and its maps, loaded once on a kernel for several tracers, each with a
// ring buffer of its own (Files, Attach): where several agents run on one kernel (the local
// target's) the program then runs once a switch, not once per agent. Open is a Shared of one,
// owned by its Tracer.
type Shared struct {
	minWait time.Duration
	mu      sync.Mutex
	slots   *ebpf.Map   // a slot per TID index (slot: the TID, its tracer, its run_delay)
	rings   *ebpf.Map   // the tracers' ring buffers, by tracer
	lost    *ebpf.Map   // waits a full ring lost, by tracer
	inner   []*ebpf.Map // rings' members
	prog    *ebpf.Program
	link    link.Link
}

// OpenShared loads the program and attaches it, with a ring buffer for each of n tracers.
func OpenShared(opts Options, n int) (*Shared, error) {
	if opts.MinWait <= 0 {
		opts.MinWait = DefaultMinWait
	}
	if opts.RingBytes <= 0 {
		opts.RingBytes = defaultRingBytes
	}
	if page := os.Getpagesize(); opts.RingBytes%page != 0 || opts.RingBytes&(opts.RingBytes-1) != 0 {
		return nil, fmt.Errorf("Options.RingBytes %d: want a power of two, at least the page size %d", opts.RingBytes, page)
	}
	if n < 1 {
		return nil, fmt.Errorf("a shared tracer for %d tracers: want at least one", n)
	}
	pidMax, err := readPidMax()
	if err != nil {
		return nil, err
	}
	// The kernel's BTF is read once for the layout and the program's attach target: loaded on
	// its own the program would read all of it again (tens of ms of CPU a read).
	kernel := btf.NewCache()
	layout, err := readLayout(kernel)
	if err != nil {
		return nil, err
	}
	// Kernels from 5.11 charge BPF memory to the cgroup; older ones to RLIMIT_MEMLOCK,
	// which RemoveMemlock raises only where it is still what counts.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, classify("raising RLIMIT_MEMLOCK for BPF maps", err)
	}
	nSlots := slotCount(pidMax)
	if opts.slots > 0 {
		if opts.slots&(opts.slots-1) != 0 {
			return nil, fmt.Errorf("Options.slots %d: want a power of two", opts.slots)
		}
		nSlots = opts.slots
	}
	s := &Shared{minWait: opts.MinWait}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	ring := &ebpf.MapSpec{Name: "runq_events", Type: ebpf.RingBuf, MaxEntries: uint32(opts.RingBytes)}
	for _, m := range []struct {
		to   **ebpf.Map
		spec *ebpf.MapSpec
	}{
		{&s.slots, &ebpf.MapSpec{Name: "runq_slots", Type: ebpf.Array, KeySize: 4, ValueSize: slotSize, MaxEntries: uint32(nSlots)}},
		{&s.rings, &ebpf.MapSpec{Name: "runq_rings", Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: uint32(n), InnerMap: ring}},
		{&s.lost, &ebpf.MapSpec{Name: "runq_lost", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: uint32(n)}},
	} {
		if *m.to, err = ebpf.NewMap(m.spec); err != nil {
			return nil, classify("creating BPF map "+m.spec.Name, err)
		}
	}
	for i := range n {
		r, err := ebpf.NewMap(ring)
		if err != nil {
			return nil, classify("creating BPF ring buffer", err)
		}
		s.inner = append(s.inner, r)
		if err := s.rings.Put(uint32(i), r); err != nil {
			return nil, classify("adding a ring buffer to the tracer's rings", err)
		}
	}
	spec := progSpec("runq_switch", "sched_switch", switchProg(progMaps{s.slots, s.rings, s.lost}, uint32(nSlots-1), layout, opts.MinWait.Nanoseconds()))
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{spec.Name: spec}},
		ebpf.CollectionOptions{Cache: kernel})
	if err != nil {
		return nil, classify("loading the BPF program", err)
	}
	s.prog = coll.DetachProgram(spec.Name)
	coll.Close()
	if s.link, err = link.AttachTracing(link.TracingOptions{Program: s.prog, AttachType: ebpf.AttachTraceRawTp}); err != nil {
		return nil, classify("attaching the BPF program to sched_switch", err)
	}
	ok = true
	return s, nil
}

// Files are tracer i's maps, for a process that Attaches them: the slots, its ring buffer and
// the lost counts, in that order, each a duplicate the caller closes.
func (s *Shared) Files(i int) ([]*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		return nil, fmt.Errorf("run-queue tracer's files: %w", os.ErrClosed)
	}
	if i < 0 || i >= len(s.inner) {
		return nil, fmt.Errorf("run-queue tracer %d: want 0..%d", i, len(s.inner)-1)
	}
	var out []*os.File
	for _, m := range []*ebpf.Map{s.slots, s.inner[i], s.lost} {
		fd, err := unix.FcntlInt(uintptr(m.FD()), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, fmt.Errorf("duplicating a run-queue map: %w", err)
		}
		out = append(out, os.NewFile(uintptr(fd), "runq-map"))
	}
	return out, nil
}

// MinWait is the shortest wait the program reports.
func (s *Shared) MinWait() time.Duration { return s.minWait }

// Stats is the program's own cost so far.
func (s *Shared) Stats() (ProgStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog == nil {
		return ProgStats{}, fmt.Errorf("reading BPF statistics: %w", os.ErrClosed)
	}
	st, err := s.prog.Stats()
	if err != nil {
		return ProgStats{}, fmt.Errorf("reading BPF statistics of the sched_switch program: %w", err)
	}
	return ProgStats{Tracepoint: "sched_switch", RunCount: st.RunCount, RunTime: st.Runtime}, nil
}

// Close detaches the program and frees what only it holds: maps a tracer attached stay until
// that tracer closes them.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.link != nil {
		errs = append(errs, s.link.Close())
		s.link = nil
	}
	if s.prog != nil {
		errs = append(errs, s.prog.Close())
		s.prog = nil
	}
	errs = append(errs, closeMaps(append([]*ebpf.Map{s.slots, s.rings, s.lost}, s.inner...)))
	s.slots, s.rings, s.lost, s.inner = nil, nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing the run-queue program: %w", err)
	}
	return nil
}

// Handle is a tracer's part of a Shared in another process: file descriptors of the maps Files
// gave (slots, ring buffer, lost counts), its index and the program's threshold.
type Handle struct {
	Slots, Ring, Lost int
	Index             int
	MinWait           time.Duration
}

// Tracer follows the run-queue waits of the threads it tracks. Its methods may be called from
// several goroutines.
type Tracer struct {
	minWait time.Duration
	mu      sync.Mutex // the tracked set and the maps
	drainMu sync.Mutex // the reader and its record, so f may call the other methods
	pidMax  int
	mask    uint32 // slot index = TID & mask
	index   uint32 // this tracer's ring and lost count
	tracked map[int]bool
	slots   *ebpf.Map
	ring    *ebpf.Map
	lost    *ebpf.Map
	reader  *ringbuf.Reader
	rec     ringbuf.Record
	shared  *Shared // Open's own, closed with the tracer
}

// MinWait is the shortest wait reported.
func (t *Tracer) MinWait() time.Duration { return t.minWait }

// Open loads the program and attaches it for this tracer alone; nothing is tracked until Track.
func Open(opts Options) (*Tracer, error) {
	s, err := OpenShared(opts, 1)
	if err != nil {
		return nil, err
	}
	t, err := newTracer(s.slots, s.inner[0], s.lost, 0, s.minWait)
	if err != nil {
		s.Close()
		return nil, err
	}
	t.shared = s
	return t, nil
}

// Attach is a tracer over another process's Shared (its Files, as h says): the file
// descriptors are duplicated, so h's stay open for another Attach.
func Attach(h Handle) (*Tracer, error) {
	var ms []*ebpf.Map
	for _, fd := range []int{h.Slots, h.Ring, h.Lost} {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		var m *ebpf.Map
		if err == nil {
			m, err = ebpf.NewMapFromFD(dup) // owns dup from here, closed on its error too
		}
		if err != nil {
			closeMaps(ms)
			return nil, fmt.Errorf("attaching the run-queue tracer's map (fd %d): %w", fd, err)
		}
		ms = append(ms, m)
	}
	t, err := newTracer(ms[0], ms[1], ms[2], h.Index, h.MinWait)
	if err != nil {
		closeMaps(ms)
		return nil, err
	}
	return t, nil
}

func closeMaps(ms []*ebpf.Map) error {
	var errs []error
	for _, m := range ms {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// newTracer reads ring and tracks into slots as index; the caller keeps the maps' ownership
// until it succeeds (then Close closes them, or Open's Shared does).
func newTracer(slots, ring, lost *ebpf.Map, index int, minWait time.Duration) (*Tracer, error) {
	if slots.Type() != ebpf.Array || slots.ValueSize() != slotSize || ring.Type() != ebpf.RingBuf || lost.Type() != ebpf.Array ||
		index < 0 || uint32(index) >= lost.MaxEntries() {
		return nil, fmt.Errorf("run-queue tracer %d: maps %v/%d, %v, %v of %d are not a slots array, a ring buffer and lost counts",
			index, slots.Type(), slots.ValueSize(), ring.Type(), lost.Type(), lost.MaxEntries())
	}
	pidMax, err := readPidMax()
	if err != nil {
		return nil, err
	}
	reader, err := ringbuf.NewReader(ring)
	if err != nil {
		return nil, classify("reading the BPF ring buffer", err)
	}
	// A deadline already past: ReadInto returns what is there and never blocks.
	reader.SetDeadline(time.Unix(1, 0))
	return &Tracer{minWait: minWait, pidMax: pidMax, mask: slots.MaxEntries() - 1, index: uint32(index), tracked: map[int]bool{},
		slots: slots, ring: ring, lost: lost, reader: reader}, nil
}

// classify wraps err with what was being done, and with ErrUnsupported where it says that
// BPF, BTF or the privilege is missing rather than that the program is wrong.
func classify(what string, err error) error {
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES),
		errors.Is(err, unix.ENOSYS), errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ENOTSUP):
		return fmt.Errorf("%s: %w: %w", what, ErrUnsupported, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// readLayout is where the program reads the kernel's state, from the kernel's BTF, once the BTF
// says the tracepoint passes what the program reads: task_struct's pid and
// sched_info.last_queued (CONFIG_SCHED_INFO, which per-thread schedstat needs too), and the
// per-CPU run queue's clock.
func readLayout(kernel *btf.Cache) (kernelLayout, error) {
	var k kernelLayout
	spec, err := kernel.Kernel()
	if err != nil {
		return k, classify("loading the kernel's BTF", err)
	}
	var fn *btf.Typedef
	if err := spec.TypeByName("btf_trace_sched_switch", &fn); err != nil {
		return k, classify("finding the sched_switch tracepoint in the kernel's BTF", err)
	}
	if err := checkArgs("sched_switch", fn, []string{"bool preempt", "task_struct *prev", "task_struct *next", "unsigned int prev_state"}); err != nil {
		return k, err
	}
	var task, cfs, rq *btf.Struct
	for _, s := range []struct {
		name string
		to   **btf.Struct
	}{{"task_struct", &task}, {"cfs_rq", &cfs}, {"rq", &rq}} {
		if err := spec.TypeByName(s.name, s.to); err != nil {
			return k, fmt.Errorf("%w: finding struct %s in the kernel's BTF: %w", ErrUnsupported, s.name, err)
		}
	}
	// cfs_rq.rq is there only in a kernel with CONFIG_FAIR_GROUP_SCHED (cgroups' cpu
	// controller, which systemd's distributions build in).
	fields := []struct {
		s    *btf.Struct
		path []string
		size int
		to   *int16
	}{
		{task, []string{"pid"}, 4, &k.pidOff},
		{task, []string{"sched_info", "run_delay"}, 8, &k.runDelayOff},
		{task, []string{"sched_info", "last_queued"}, 8, &k.lastQueuedOff},
		{task, []string{"se", "cfs_rq"}, 8, &k.cfsRqOff},
		{cfs, []string{"rq"}, 8, &k.rqOff},
		{rq, []string{"clock"}, 8, &k.clockOff},
	}
	for _, f := range fields {
		off, err := fieldOffset(f.s, f.path, f.size)
		if err != nil {
			return k, err
		}
		if *f.to, err = loadOffset(f.s.Name+"."+strings.Join(f.path, "."), off); err != nil {
			return k, err
		}
	}
	return k, nil
}

// fieldOffset is the byte offset of the member reached by names from s (each but the last a struct
// member), a whole field of size bytes.
func fieldOffset(s *btf.Struct, names []string, size int) (uint32, error) {
	var off uint32
	for i, name := range names {
		m, err := member(s, name)
		if err != nil {
			return 0, err
		}
		off += m.Offset.Bytes()
		if i == len(names)-1 {
			if got, err := btf.Sizeof(m.Type); err != nil || got != size {
				return 0, fmt.Errorf("%s.%s in the kernel's BTF is %d bytes (%v), want %d", s.Name, name, got, err, size)
			}
			break
		}
		next, ok := btf.UnderlyingType(m.Type).(*btf.Struct)
		if !ok {
			return 0, fmt.Errorf("%s.%s in the kernel's BTF is %v, want a struct", s.Name, name, m.Type)
		}
		s = next
	}
	return off, nil
}

// member is s's member name, a whole field.
func member(s *btf.Struct, name string) (btf.Member, error) {
	for _, m := range s.Members {
		if m.Name != name {
			continue
		}
		if m.Offset%8 != 0 || m.BitfieldSize != 0 {
			return m, fmt.Errorf("%s.%s in the kernel's BTF is a bit field", s.Name, name)
		}
		return m, nil
	}
	return btf.Member{}, fmt.Errorf("%w: %s in the kernel's BTF has no member %s", ErrUnsupported, s.Name, name)
}

// checkArgs holds the tracepoint's raw arguments, as its btf_trace_ typedef gives them
// (a pointer to a function of the tracepoint's data, then its arguments), to those the
// programs read, by kind and size: sched_switch has passed prev_state since Linux 5.18.
func checkArgs(tracepoint string, fn *btf.Typedef, want []string) error {
	ptr, _ := fn.Type.(*btf.Pointer)
	var proto *btf.FuncProto
	if ptr != nil {
		proto, _ = ptr.Target.(*btf.FuncProto)
	}
	var got []btf.FuncParam
	if proto != nil && len(proto.Params) > 0 {
		got = proto.Params[1:]
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		if strings.Contains(want[i], "task_struct *") {
			p, isPtr := btf.UnderlyingType(got[i].Type).(*btf.Pointer)
			var s *btf.Struct
			if isPtr {
				s, _ = btf.UnderlyingType(p.Target).(*btf.Struct)
			}
			ok = s != nil && s.Name == "task_struct"
			continue
		}
		_, isInt := btf.UnderlyingType(got[i].Type).(*btf.Int)
		ok = isInt
	}
	if !ok {
		return fmt.Errorf("%w: the %s tracepoint's arguments in the kernel's BTF are %v, want (%s) (Linux 5.18 or later)",
			ErrUnsupported, tracepoint, got, strings.Join(want, ", "))
	}
	return nil
}

// readPidMax is the largest TID plus one, which sizes the slots map.
func readPidMax() (int, error) {
	const path = "/proc/sys/kernel/pid_max"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, classify("reading "+path, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive integer", path, strings.TrimSpace(string(b)))
	}
	return min(n, pidLimit), nil
}

// Track follows these threads (TIDs as the initial PID namespace numbers them) from now on.
// A wait under way is reported as it ends, when schedstat's run_delay counts it too. Untrack a
// thread that has exited: its TID may be given to another.
//
// Where pid_max is over 65536, TIDs equal modulo 65536 share a slot, and a thread whose slot
// another tracked thread holds (this tracer's or, with a Shared, another's) is not tracked:
// Track tracks the others and returns an error matching ErrSlotTaken for it, and its waits stay
// sampled only. Two processes tracking into one slot at the same instant may both see it free;
// the later one then gets the waits, and the other's Drain skips none of its own.
func (t *Tracer) Track(tids ...int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots == nil {
		return fmt.Errorf("tracking threads: %w", os.ErrClosed)
	}
	var taken []error
	for _, tid := range tids {
		if tid <= 0 || tid >= t.pidMax {
			return errors.Join(append(taken, fmt.Errorf("tracking TID %d: want 1..%d (pid_max)", tid, t.pidMax-1))...)
		}
		i := uint32(tid) & t.mask
		var got slot
		if err := t.slots.Lookup(i, &got); err != nil {
			return errors.Join(append(taken, fmt.Errorf("tracking TID %d: %w", tid, err))...)
		}
		switch mine := (slot{TID: uint32(tid), Tracer: t.index}); {
		case got.TID == mine.TID && got.Tracer == mine.Tracer:
			// Already in this tracer's slot (another Attach of the same index put it there).
		case got.TID != 0:
			taken = append(taken, fmt.Errorf("tracking TID %d: %w (TID %d, slot %d of %d)", tid, ErrSlotTaken, got.TID, i, t.mask+1))
			continue
		default:
			if err := t.slots.Put(i, mine); err != nil {
				return errors.Join(append(taken, fmt.Errorf("tracking TID %d: %w", tid, err))...)
			}
		}
		t.tracked[tid] = true
	}
	return errors.Join(taken...)
}

// Untrack stops following these threads; waits already reported stay for Drain.
func (t *Tracer) Untrack(tids ...int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots == nil {
		return fmt.Errorf("untracking threads: %w", os.ErrClosed)
	}
	return t.untrack(tids)
}

func (t *Tracer) untrack(tids []int) error {
	for _, tid := range tids {
		if !t.tracked[tid] {
			continue
		}
		i := uint32(tid) & t.mask
		var got slot
		if err := t.slots.Lookup(i, &got); err != nil {
			return fmt.Errorf("untracking TID %d: %w", tid, err)
		}
		if got.TID == uint32(tid) && got.Tracer == t.index {
			if err := t.slots.Put(i, slot{}); err != nil {
				return fmt.Errorf("untracking TID %d: %w", tid, err)
			}
		}
		delete(t.tracked, tid)
	}
	return nil
}

// Drain calls f with every wait reported since the last call, and returns without waiting
// for more. It allocates nothing once its record buffer has grown to a record's size.
func (t *Tracer) Drain(f func(Wait)) error {
	t.drainMu.Lock()
	defer t.drainMu.Unlock()
	if t.reader == nil {
		return fmt.Errorf("draining run-queue waits: %w", os.ErrClosed)
	}
	if t.reader.AvailableBytes() == 0 {
		return nil
	}
	for {
		err := t.reader.ReadInto(&t.rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("draining run-queue waits: %w", err)
		}
		b := t.rec.RawSample
		if len(b) < recordSize {
			return fmt.Errorf("draining run-queue waits: a record of %d bytes, want %d", len(b), recordSize)
		}
		f(Wait{
			TID:     int32(binary.NativeEndian.Uint32(b[0:])),
			StartNs: int64(binary.NativeEndian.Uint64(b[8:])),
			DurNs:   int64(binary.NativeEndian.Uint64(b[16:])),
		})
	}
}

// Lost is how many of this tracer's waits the program could not report because its ring buffer
// was full (Drain was called too seldom for RingBytes).
func (t *Tracer) Lost() (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lost == nil {
		return 0, fmt.Errorf("reading lost waits: %w", os.ErrClosed)
	}
	var n uint64
	if err := t.lost.Lookup(t.index, &n); err != nil {
		return 0, fmt.Errorf("reading lost waits: %w", err)
	}
	return n, nil
}

// ProgStats is one program's own cost so far: how often it ran and for how long, counted
// only while statistics are enabled (EnableStats).
type ProgStats struct {
	Tracepoint string
	RunCount   uint64
	RunTime    time.Duration
}

// Stats is the program's cost so far where this tracer loaded it (Open); a tracer attached to
// another process's program has none (its owner's Shared.Stats counts it).
func (t *Tracer) Stats() ([]ProgStats, error) {
	if t.shared == nil {
		return nil, nil
	}
	st, err := t.shared.Stats()
	if err != nil {
		return nil, err
	}
	return []ProgStats{st}, nil
}

// EnableStats makes the kernel count every BPF program's runs and run time until the
// returned Closer is closed (BPF_ENABLE_STATS: the kernel.bpf_stats_enabled setting returns
// to what it was). Counting costs two clock reads per run, so enable it only to measure.
func EnableStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, classify("enabling BPF run-time statistics", err)
	}
	return c, nil
}

// Close untracks this tracer's threads, so a shared program stops reporting them, and frees its
// maps; with Open's own program it detaches it too. Nothing is pinned, so nothing stays.
func (t *Tracer) Close() error {
	t.drainMu.Lock()
	defer t.drainMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots == nil {
		return nil
	}
	var errs []error
	if t.shared == nil {
		errs = append(errs, t.untrack(slices.Collect(maps.Keys(t.tracked))))
	}
	errs = append(errs, t.reader.Close())
	t.reader = nil
	if t.shared != nil {
		errs = append(errs, t.shared.Close()) // its maps are the tracer's
	} else {
		errs = append(errs, closeMaps([]*ebpf.Map{t.slots, t.ring, t.lost}))
	}
	t.slots, t.ring, t.lost, t.shared = nil, nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing the run-queue tracer: %w", err)
	}
	return nil
}
