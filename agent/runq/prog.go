package runq

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The programs are BTF-enabled raw tracepoints (tp_btf): their arguments are the tracepoint's
// own (no record is built) and a task_struct pointer among them can be read with a plain load,
// which the verifier checks against the kernel's BTF, instead of a bpf_probe_read_kernel call.
//
// sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
//
//	unsigned int prev_state)
//
// sched_waking(struct task_struct *p)
//
// Each argument is one u64 slot of the context.
const (
	argPreempt   = 0
	argPrev      = 8
	argNext      = 16
	argPrevState = 24
	argWakingP   = 0
)

// Stack slots (offsets from R10).
const (
	slotKey    = -8  // u32 map key
	slotRecord = -40 // record: tid u32, pad u32, start u64, dur u64
)

// recordSize is the ring buffer record: tid u32, pad u32, start u64, dur u64 (host order).
const recordSize = 24

// A slot of the slots map, one per TID index: the TID it tracks (0: none) and, while that
// thread is runnable and waiting, when it became so (0: not waiting). The programs read and
// write it in place through the pointer the (inlined) array lookup returns.
const (
	slotSize     = 16
	slotTIDOff   = 0
	slotStartOff = 8
)

// ringbufNoWakeup asks bpf_ringbuf_output not to wake a reader: Drain polls, and the wake-up
// is an irq_work per record the kernel would otherwise queue.
const ringbufNoWakeup = 1

type progMaps struct {
	slots, events, lost *ebpf.Map
}

// lookupSlot jumps to skip unless the thread whose TID is in tid (a callee-saved register,
// kept) is tracked; otherwise R0 points at its slot. It uses R0-R5 and the key slot. TID 0
// (every CPU's idle task) is never tracked, and returns before the lookup: half the switches
// of a CPU that idles are to or from it.
func lookupSlot(m *ebpf.Map, mask uint32, tid asm.Register, skip string) asm.Instructions {
	return asm.Instructions{
		asm.JEq.Imm32(tid, 0, skip),
		asm.Mov.Reg32(asm.R1, tid),
		asm.And.Imm32(asm.R1, int32(mask)),
		asm.StoreMem(asm.RFP, slotKey, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapLookupElem.Call(), // an array's lookup: the verifier inlines it
		asm.JEq.Imm(asm.R0, 0, skip),
		asm.LoadMem(asm.R1, asm.R0, slotTIDOff, asm.Word),
		asm.JNE.Reg32(asm.R1, tid, skip),
	}
}

// setStart stores now as the wait start in the slot R0 points at, and keeps now in R9.
func setStart() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R8, slotStartOff, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R9, asm.R0),
	}
}

// wakingProg: a tracked thread woken becomes runnable now.
func wakingProg(maps progMaps, mask uint32, pidOff int16) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R1, argWakingP, asm.DWord),
		asm.LoadMem(asm.R6, asm.R1, pidOff, asm.Word),
	}
	insns = append(insns, lookupSlot(maps.slots, mask, asm.R6, "exit")...)
	insns = append(insns, setStart()...)
	return append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	)
}

// switchProg: a tracked thread switched out still runnable (preempted, or its state still
// TASK_RUNNING) starts waiting now; a tracked thread switched in ends its wait, which is
// reported when at least minWaitNs long. A thread switched out asleep keeps the start a
// sched_waking may already have set: a waker can run between the sleeper's dequeue and this
// tracepoint, and the next switch-in of a sleeper always follows a sched_waking that sets it.
// A switch from a tracked thread preempted to a tracked thread waiting reads the clock once.
func switchProg(maps progMaps, mask uint32, pidOff int16, minWaitNs int64) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Imm(asm.R9, 0), // now, once read
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R1, asm.R6, argPrev, asm.DWord),
		asm.LoadMem(asm.R7, asm.R1, pidOff, asm.Word),
	}
	insns = append(insns, lookupSlot(maps.slots, mask, asm.R7, "next")...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, argPreempt, asm.DWord),
		asm.JNE.Imm32(asm.R1, 0, "runnable"),
		asm.LoadMem(asm.R1, asm.R6, argPrevState, asm.DWord),
		asm.JNE.Imm32(asm.R1, 0, "next"),
	)
	insns = append(insns, labelled("runnable", setStart())...)

	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, argNext, asm.DWord).WithSymbol("next"),
		asm.LoadMem(asm.R7, asm.R1, pidOff, asm.Word),
	)
	insns = append(insns, lookupSlot(maps.slots, mask, asm.R7, "exit")...)
	insns = append(insns,
		asm.LoadMem(asm.R8, asm.R0, slotStartOff, asm.DWord),
		asm.JEq.Imm(asm.R8, 0, "exit"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R0, slotStartOff, asm.R1, asm.DWord),
		asm.JNE.Imm(asm.R9, 0, "now"),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.Mov.Reg(asm.R0, asm.R9).WithSymbol("now"),
		asm.Sub.Reg(asm.R0, asm.R8),
		asm.LoadImm(asm.R1, minWaitNs, asm.DWord),
		asm.JLT.Reg(asm.R0, asm.R1, "exit"),
		asm.StoreMem(asm.RFP, slotRecord, asm.R7, asm.Word),
		asm.StoreImm(asm.RFP, slotRecord+4, 0, asm.Word),
		asm.StoreMem(asm.RFP, slotRecord+8, asm.R8, asm.DWord),
		asm.StoreMem(asm.RFP, slotRecord+16, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, maps.events.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotRecord),
		asm.Mov.Imm(asm.R3, recordSize),
		asm.Mov.Imm(asm.R4, ringbufNoWakeup),
		asm.FnRingbufOutput.Call(),
		asm.JSGE.Imm(asm.R0, 0, "exit"),
		// The ring buffer is full: count the lost wait so the reader knows.
		asm.StoreImm(asm.RFP, slotKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, maps.lost.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	)
	return insns
}

// labelled gives the first instruction of insns the label.
func labelled(label string, insns asm.Instructions) asm.Instructions {
	insns[0] = insns[0].WithSymbol(label)
	return insns
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

func checkPidOffset(off uint32) (int16, error) {
	if off > 1<<15-4 {
		return 0, fmt.Errorf("task_struct.pid at byte %d is beyond a load's 16-bit offset", off)
	}
	return int16(off), nil
}
