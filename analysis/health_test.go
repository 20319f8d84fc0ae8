package analysis

import (
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	dur := 40.0
	// A micro-burst run seen here: load for 89 s of a 40 s duration, 24,514 of 35,000 lost.
	s := &Summary{Status: "ok", Settings: Settings{LoadS: 89, PlannedDurationS: &dur}, Probes: Stats{N: 35000 - 24514, Lost: 24514}}
	w := applyHealth(s)
	if s.Status != "failed" || len(w) != 2 || !strings.Contains(s.StatusReason, "the load ran 89.0 s of a 40 s duration") ||
		!strings.Contains(s.StatusReason, "24514 of 35000 post-warm-up probes were lost") {
		t.Errorf("status %q reason %q warnings %q", s.Status, s.StatusReason, w)
	}
	// 10 % over and half lost are still within the limits.
	ok := &Summary{Status: "ok", Settings: Settings{LoadS: 44, PlannedDurationS: &dur}, Probes: Stats{N: 500, Lost: 500}}
	if w := applyHealth(ok); w != nil || ok.Status != "ok" {
		t.Errorf("at the limits: %q %q", ok.Status, w)
	}
	// An interrupted run stays interrupted; the reason is a warning.
	in := &Summary{Status: "interrupted", Probes: Stats{N: 1, Lost: 9}}
	if w := applyHealth(in); in.Status != "interrupted" || in.StatusReason != "" || len(w) != 1 {
		t.Errorf("interrupted: %q %q %q", in.Status, in.StatusReason, w)
	}
}

// A burst of which nothing was answered shows n/a, not "absorbed in 0 µs"; the counts stand apart.
func TestBurstNothingAnswered(t *testing.T) {
	s := &Summary{RunID: "r", Status: "ok", Nodes: map[string]NodeFinal{},
		Bursts: []BurstRow{{AtS: 5, Planned: 200000, Sent: 30784, NotSent: 169216, Answered: 0, Lost: 30784}}}
	md := renderReport(s)
	if !strings.Contains(md, "| 1 | 5.0 s | 200000 | 30784 | 169216 | 0 | 30784 | 0 | 0 µs | n/a (nothing answered) | n/a |") {
		t.Errorf("burst row:\n%s", md)
	}
}
