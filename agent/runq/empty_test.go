package runq

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// openEmptyTracer attaches a program that returns at once to the tracepoint: what a run costs
// before a program does anything, the kernel's statistics included (BenchmarkProgramCost's
// floor). It is a Tracer with no maps, so only its Stats and Close are of use.
func openEmptyTracer(b testing.TB) *Tracer {
	b.Helper()
	openTracer(b, Options{}).Close() // skips where the kernel cannot
	t := &Tracer{}
	b.Cleanup(func() { t.Close() })
	for _, tp := range []string{"sched_switch"} {
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
