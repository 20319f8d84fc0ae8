package playbooks

import (
	"errors"
	"testing"
)

// FuzzParse: whatever the input, Parse does not panic, and it either returns a playbook that
// plans or problems that each carry a position.
func FuzzParse(f *testing.F) {
	for _, name := range List() {
		data, err := embedded.ReadFile(name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(matrixPlaybook))
	f.Add([]byte("timeline:\n  - {at: 1s, kill: &a {node: leader}}\n  - {at: 2s, kill: *a}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.yaml", data, testDrivers)
		if err != nil {
			var probs Problems
			if !errors.As(err, &probs) || len(probs) == 0 {
				t.Fatalf("error is not a non-empty Problems: %v", err)
			}
			for _, pr := range probs {
				if pr.Pos.File != "f.yaml" || pr.Pos.Line < 1 {
					t.Fatalf("problem without a position: %q", pr)
				}
			}
			return
		}
		if _, err := p.Plan(); err != nil {
			t.Fatalf("Parse accepted a playbook that does not plan: %v", err)
		}
	})
}
