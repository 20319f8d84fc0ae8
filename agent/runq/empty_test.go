package runq

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// emptyTracer has programs that return at once on both tracepoints: what a run costs before a
// program does anything, the kernel's statistics included (BenchmarkProgramCost's floor).
type emptyTracer struct {
	progs []*ebpf.Program
	names []string
	links []link.Link
}

func openEmptyTracer(b testing.TB) *emptyTracer {
	b.Helper()
	openTracer(b, Options{}).Close() // skips where the kernel cannot
	t := &emptyTracer{}
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

func (t *emptyTracer) track(int) error { return nil }

func (t *emptyTracer) stats() ([]ProgStats, error) {
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

func (t *emptyTracer) close() {
	for _, l := range t.links {
		l.Close()
	}
	for _, p := range t.progs {
		p.Close()
	}
	*t = emptyTracer{}
}
