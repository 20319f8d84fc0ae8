package playbooks

import (
	"bytes"
	"strings"
	"testing"
)

// TestPlanSaysWhichVerdictsItsRoundsReach: the hand-off sweep, 8 combinations at 2 rounds: 2
// runs a side give Mann–Whitney a p of 1/3 at best, the 7 others against the baseline on p50 and
// p99 are a family of 14 whose strongest difference needs p ≤ 0.05/14, so the rank test calls
// nothing, and 6 rounds (2/924 ≤ 0.00357 < 2/252) would; at 6 rounds the plan says it can.
func TestPlanSaysWhichVerdictsItsRoundsReach(t *testing.T) {
	pb, err := Open("../examples/aeron-cluster/handoff-knobs.yaml", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	print := func(pb *Playbook) string {
		t.Helper()
		pl, err := pb.Plan()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		pl.Print(&buf)
		return strings.Join(strings.Fields(buf.String()), " ")
	}
	out := print(pb)
	for _, want := range []string{
		"verdicts at 2 rounds (2 runs a side) Mann–Whitney's smallest two-sided p is 0.333; the report tests the 7 other combinations against the baseline",
		"a Benjamini–Hochberg family of at least 14 verdicts, whose strongest difference is called at q 0.05 only if its p ≤ 0.05/14 = 0.00357: the rank test cannot",
		"at least 6 rounds would",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	pb.Rounds = 6
	if out := print(pb); !strings.Contains(out, "at 6 rounds (6 runs a side) Mann–Whitney's smallest two-sided p is 0.00216;") ||
		!strings.Contains(out, "0.00357: the rank test can reach it") {
		t.Errorf("at 6 rounds:\n%s", out)
	}
	// One combination: nothing to compare, no line.
	pb.Matrix = nil
	if out := print(pb); strings.Contains(out, "verdicts ") {
		t.Errorf("a lone combination says which verdicts it reaches:\n%s", out)
	}
}
