package runq

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// openEmptyTracer attaches a program that returns at once to the tracepoint: what a run costs
// before a program does anything, the kernel's statistics included (BenchmarkProgramCost's
// floor). It is a Shared with no maps, so only its Stats and Close are of use.
func openEmptyTracer(b testing.TB) *Shared {
	b.Helper()
	openTracer(b, Options{}).Close() // skips where the kernel cannot
	s := &Shared{}
	b.Cleanup(func() { s.Close() })
	prog, err := ebpf.NewProgram(progSpec("runq_empty", "sched_switch", asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}))
	if err != nil {
		b.Fatal(err)
	}
	s.prog = prog
	if s.link, err = link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp}); err != nil {
		b.Fatal(err)
	}
	return s
}
