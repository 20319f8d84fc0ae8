package runq

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// The programs this package had before the slots map (a bitmap of tracked TIDs in an array
// map, each tracked thread's start in a hash map, kept and cleared with map helper calls),
// kept here only so BenchmarkProgramCost prices the two side by side on the same events.
// Their waits are not read.

type oldTracer struct {
	tracked, starts, events, lost *ebpf.Map
	words                         []uint64
	progs                         []*ebpf.Program
	names                         []string
	links                         []link.Link
}

func openOldTracer(b testing.TB, minWaitNs int64) *oldTracer {
	b.Helper()
	openTracer(b, Options{}).Close() // skips where the kernel cannot
	pidMax, err := readPidMax()
	if err != nil {
		b.Fatal(err)
	}
	pidOff, err := taskPidOffset(btf.NewCache())
	if err != nil {
		b.Fatal(err)
	}
	t := &oldTracer{}
	b.Cleanup(t.close)
	for _, s := range []struct {
		m    **ebpf.Map
		spec *ebpf.MapSpec
	}{
		{&t.tracked, &ebpf.MapSpec{Name: "runq_old_tracked", Type: ebpf.Array, KeySize: 4, ValueSize: 8,
			MaxEntries: uint32((pidMax + 63) / 64)}},
		{&t.starts, &ebpf.MapSpec{Name: "runq_old_starts", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 2048}},
		{&t.events, &ebpf.MapSpec{Name: "runq_old_events", Type: ebpf.RingBuf, MaxEntries: defaultRingBytes}},
		{&t.lost, &ebpf.MapSpec{Name: "runq_old_lost", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}},
	} {
		if *s.m, err = ebpf.NewMap(s.spec); err != nil {
			b.Fatal(err)
		}
	}
	t.words = make([]uint64, (pidMax+63)/64)
	for _, spec := range []*ebpf.ProgramSpec{
		progSpec("runq_old_switch", "sched_switch", t.switchProg(pidOff, minWaitNs)),
		progSpec("runq_old_waking", "sched_waking", t.wakingProg(pidOff)),
	} {
		prog, err := ebpf.NewProgram(spec)
		if err != nil {
			b.Fatal(err)
		}
		t.progs = append(t.progs, prog)
		t.names = append(t.names, spec.AttachTo)
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			b.Fatal(err)
		}
		t.links = append(t.links, l)
	}
	return t
}

// openEmptyTracer attaches programs that return at once to both tracepoints: what a run
// costs before the program does anything, the kernel's statistics included.
func openEmptyTracer(b testing.TB) *oldTracer {
	b.Helper()
	openTracer(b, Options{}).Close() // skips where the kernel cannot
	t := &oldTracer{}
	b.Cleanup(t.close)
	for _, tp := range []string{"sched_switch", "sched_waking"} {
		prog, err := ebpf.NewProgram(progSpec("runq_empty", tp, asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}))
		if err != nil {
			b.Fatal(err)
		}
		t.progs = append(t.progs, prog)
		t.names = append(t.names, tp)
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			b.Fatal(err)
		}
		t.links = append(t.links, l)
	}
	return t
}

func (t *oldTracer) track(tid int) error {
	if t.tracked == nil {
		return nil
	}

	if err := t.starts.Delete(uint32(tid)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	t.words[tid/64] |= 1 << (tid % 64)
	return t.tracked.Put(uint32(tid/64), t.words[tid/64])
}

func (t *oldTracer) stats() ([]ProgStats, error) {
	var out []ProgStats
	for i, p := range t.progs {
		s, err := p.Stats()
		if err != nil {
			return nil, err
		}
		out = append(out, ProgStats{Tracepoint: t.names[i], RunCount: s.RunCount, RunTime: s.Runtime})
	}
	return out, nil
}

func (t *oldTracer) close() {
	for _, l := range t.links {
		l.Close()
	}
	for _, p := range t.progs {
		p.Close()
	}
	for _, m := range []*ebpf.Map{t.tracked, t.starts, t.events, t.lost} {
		if m != nil {
			m.Close()
		}
	}
	*t = oldTracer{}
}

func (t *oldTracer) checkTracked(tid asm.Register, skip string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg32(asm.R2, tid),
		asm.RSh.Imm32(asm.R2, 6),
		asm.StoreMem(asm.RFP, slotKey, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, t.tracked.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, skip),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Mov.Reg32(asm.R2, tid),
		asm.And.Imm32(asm.R2, 63),
		asm.RSh.Reg(asm.R1, asm.R2),
		asm.And.Imm(asm.R1, 1),
		asm.JEq.Imm(asm.R1, 0, skip),
	}
}

const oldSlotValue = -16

func (t *oldTracer) setStart(tid asm.Register) asm.Instructions {
	return asm.Instructions{
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, oldSlotValue, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, slotKey, tid, asm.Word),
		asm.LoadMapPtr(asm.R1, t.starts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, oldSlotValue),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
	}
}

func (t *oldTracer) wakingProg(pidOff int16) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R1, argWakingP, asm.DWord),
		asm.LoadMem(asm.R6, asm.R1, pidOff, asm.Word),
	}
	insns = append(insns, t.checkTracked(asm.R6, "exit")...)
	insns = append(insns, t.setStart(asm.R6)...)
	return append(insns, asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"), asm.Return())
}

func (t *oldTracer) switchProg(pidOff int16, minWaitNs int64) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R1, asm.R6, argPrev, asm.DWord),
		asm.LoadMem(asm.R7, asm.R1, pidOff, asm.Word),
	}
	insns = append(insns, t.checkTracked(asm.R7, "next")...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, argPreempt, asm.DWord),
		asm.JNE.Imm32(asm.R1, 0, "runnable"),
		asm.LoadMem(asm.R1, asm.R6, argPrevState, asm.DWord),
		asm.JNE.Imm32(asm.R1, 0, "next"),
	)
	insns = append(insns, labelled("runnable", t.setStart(asm.R7))...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, argNext, asm.DWord).WithSymbol("next"),
		asm.LoadMem(asm.R7, asm.R1, pidOff, asm.Word),
	)
	insns = append(insns, t.checkTracked(asm.R7, "exit")...)
	return append(insns,
		asm.StoreMem(asm.RFP, slotKey, asm.R7, asm.Word),
		asm.LoadMapPtr(asm.R1, t.starts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.LoadMem(asm.R8, asm.R0, 0, asm.DWord),
		asm.LoadMapPtr(asm.R1, t.starts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapDeleteElem.Call(),
		asm.FnKtimeGetNs.Call(),
		asm.Sub.Reg(asm.R0, asm.R8),
		asm.LoadImm(asm.R1, minWaitNs, asm.DWord),
		asm.JLT.Reg(asm.R0, asm.R1, "exit"),
		asm.StoreMem(asm.RFP, slotRecord, asm.R7, asm.Word),
		asm.StoreImm(asm.RFP, slotRecord+4, 0, asm.Word),
		asm.StoreMem(asm.RFP, slotRecord+8, asm.R8, asm.DWord),
		asm.StoreMem(asm.RFP, slotRecord+16, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, t.events.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotRecord),
		asm.Mov.Imm(asm.R3, recordSize),
		asm.Mov.Imm(asm.R4, ringbufNoWakeup),
		asm.FnRingbufOutput.Call(),
		asm.JSGE.Imm(asm.R0, 0, "exit"),
		asm.StoreImm(asm.RFP, slotKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, t.lost.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	)
}
