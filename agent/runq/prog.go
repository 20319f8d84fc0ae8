package runq

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The program is a BTF-enabled raw tracepoint (tp_btf): its arguments are the tracepoint's own
// (no record is built) and a task_struct pointer among them can be read with a plain load,
// which the verifier checks against the kernel's BTF, instead of a bpf_probe_read_kernel call.
//
// sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
//
//	unsigned int prev_state)
//
// Each argument is one u64 slot of the context.
const argNext = 16

// Stack slots (offsets from R10).
const (
	slotKey    = -8  // u32 map key
	slotTracer = -16 // u32: the tracer's index, the key of its ring and lost count
	slotRecord = -40 // record: tid u32, pad u32, start u64, dur u64
)

// recordSize is the ring buffer record: tid u32, pad u32, start u64, dur u64 (host order).
const recordSize = 24

// slot is a slots map value, one per TID index: the TID tracked there (0: none), the tracer
// whose ring buffer gets its waits, and the thread's run_delay as its last switch-in left it (0:
// none seen since Track).
type slot struct {
	TID, Tracer uint32
	RunDelay    uint64
}

const (
	slotSize        = 16
	slotTracerOff   = 4
	slotRunDelayOff = 8
)

// ringbufNoWakeup asks bpf_ringbuf_output not to wake a reader: Drain polls, and the wake-up
// is an irq_work per record the kernel would otherwise queue.
const ringbufNoWakeup = 1

type progMaps struct {
	slots, rings, lost *ebpf.Map
}

// kernelLayout is where the program reads the kernel's own state, from its BTF.
type kernelLayout struct {
	pidOff        int16 // task_struct.pid: the thread's TID
	runDelayOff   int16 // task_struct.sched_info.run_delay: the thread's run-queue wait so far
	lastQueuedOff int16 // task_struct.sched_info.last_queued: rq clock when it was queued, 0 if not
	cfsRqOff      int16 // task_struct.se.cfs_rq: the CPU's (group's) CFS queue the task is on
	rqOff         int16 // cfs_rq.rq: that CPU's run queue
	clockOff      int16 // rq.clock: the clock sched_info's times are on
}

// switchProg reports a tracked thread's run-queue wait as it gets a CPU, when at least minWaitNs
// long. The wait is the kernel's own: it was queued at sched_info.last_queued (on the run queue's
// clock, set as it was woken or preempted still runnable) and the run queue's clock was read for
// this switch (reached through the task's own se.cfs_rq, set for every task as it is placed on a
// CPU: a kernel built without KALLSYMS_ALL does not let a program name the per-CPU runqueues);
// the kernel adds exactly that difference to the thread's schedstat run_delay just after this
// tracepoint. A wait cut by a move to another CPU (load balancing, an affinity change) was
// already partly added as the thread left the first queue, and queued afresh on the second: so
// the slot keeps run_delay as each switch-in leaves it, and what run_delay grew by since is part
// of this wait too (TestWaitsAcrossCPUMovesWhole). So one program on the switch sees every wait,
// and the waits it reports sum to run_delay's growth. The start is placed on CLOCK_MONOTONIC
// (bpf_ktime_get_ns) as now less the wait: later than the queueing by the microseconds between
// the scheduler's clock update and this tracepoint.
func switchProg(maps progMaps, mask uint32, k kernelLayout, minWaitNs int64) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R1, asm.R6, argNext, asm.DWord),
		asm.LoadMem(asm.R7, asm.R1, k.pidOff, asm.Word),
		// TID 0 (every CPU's idle task) is never tracked, and returns before the lookup: half
		// the switches of a CPU that idles are to it.
		asm.JEq.Imm32(asm.R7, 0, "exit"),
		asm.Mov.Reg32(asm.R1, asm.R7),
		asm.And.Imm32(asm.R1, int32(mask)),
		asm.StoreMem(asm.RFP, slotKey, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, maps.slots.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapLookupElem.Call(), // an array's lookup: the verifier inlines it
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JNE.Reg32(asm.R1, asm.R7, "exit"),
		asm.LoadMem(asm.R1, asm.R0, slotTracerOff, asm.Word),
		asm.StoreMem(asm.RFP, slotTracer, asm.R1, asm.Word),
		// Tracked. run_delay now (before this switch-in adds to it) less the slot's run_delay
		// after the last switch-in: what was added since, while this wait was cut by moves
		// between CPUs; plus the part since it was last queued (0 if it was not).
		asm.Mov.Reg(asm.R8, asm.R0), // the slot, kept across the calls below
		asm.LoadMem(asm.R1, asm.R6, argNext, asm.DWord),
		asm.LoadMem(asm.R2, asm.R1, k.runDelayOff, asm.DWord),
		asm.LoadMem(asm.R3, asm.R1, k.lastQueuedOff, asm.DWord),
		asm.Mov.Imm(asm.R4, 0),
		asm.JEq.Imm(asm.R3, 0, "summed"),
		asm.LoadMem(asm.R1, asm.R1, k.cfsRqOff, asm.DWord),
		asm.LoadMem(asm.R1, asm.R1, k.rqOff, asm.DWord),
		asm.LoadMem(asm.R4, asm.R1, k.clockOff, asm.DWord),
		asm.Sub.Reg(asm.R4, asm.R3),
		// R2: run_delay as this switch-in leaves it; R9: the wait.
		asm.Add.Reg(asm.R2, asm.R4).WithSymbol("summed"),
		asm.LoadMem(asm.R9, asm.R8, slotRunDelayOff, asm.DWord),
		asm.StoreMem(asm.R8, slotRunDelayOff, asm.R2, asm.DWord),
		asm.JNE.Imm(asm.R9, 0, "since"),
		asm.Mov.Reg(asm.R9, asm.R4), // the first switch-in tracked: the part since queued only
		asm.Ja.Label("wait"),
		asm.Sub.Reg(asm.R2, asm.R9).WithSymbol("since"),
		asm.Mov.Reg(asm.R9, asm.R2),
		asm.LoadImm(asm.R1, minWaitNs, asm.DWord).WithSymbol("wait"),
		// Signed: a clock behind the queueing (it cannot be, but a negative wait is no wait).
		asm.JSLT.Reg(asm.R9, asm.R1, "exit"),
		asm.FnKtimeGetNs.Call(),
		asm.Sub.Reg(asm.R0, asm.R9),
		asm.StoreMem(asm.RFP, slotRecord, asm.R7, asm.Word),
		asm.StoreImm(asm.RFP, slotRecord+4, 0, asm.Word),
		asm.StoreMem(asm.RFP, slotRecord+8, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, slotRecord+16, asm.R9, asm.DWord),
		// The tracer's ring buffer (an array of maps' lookup: inlined too).
		asm.LoadMapPtr(asm.R1, maps.rings.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotTracer),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotRecord),
		asm.Mov.Imm(asm.R3, recordSize),
		asm.Mov.Imm(asm.R4, ringbufNoWakeup),
		asm.FnRingbufOutput.Call(),
		asm.JSGE.Imm(asm.R0, 0, "exit"),
		// The ring buffer is full: count the lost wait so its reader knows.
		asm.LoadMapPtr(asm.R1, maps.lost.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotTracer),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	}
}

// progSpec is a tp_btf program on the sched tracepoint named.
func progSpec(name, tracepoint string, insns asm.Instructions) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     tracepoint,
		Instructions: insns,
		// Tracing programs must declare a GPL-compatible licence to be loaded.
		License: "Dual MIT/GPL",
	}
}

// loadOffset is a field's byte offset as a load's 16-bit offset.
func loadOffset(field string, off uint32) (int16, error) {
	if off > 1<<15-8 {
		return 0, fmt.Errorf("%s at byte %d is beyond a load's 16-bit offset", field, off)
	}
	return int16(off), nil
}
