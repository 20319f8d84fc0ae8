// Package layers holds the test of the module's import rules (docs/architecture.md, "Layout"):
// imports only go down.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

// Each package (with everything it imports) must not reach the packages listed against it.
func TestImportsGoDown(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	const mod = "github.com/rig-dev/rig/"
	for _, c := range []struct {
		pkg     string
		forbids []string
	}{
		{"./engine/...", []string{"loadgen", "loadgen/loadspec", "rundir", "runner", "analysis"}},
		{"./runner", []string{"analysis", "sweep"}},
		{"./conformance", []string{"runner", "analysis", "sweep"}},
		{"./transport/...", []string{"analysis", "infra/cluster"}},
		{"./agent/...", []string{"analysis", "infra/cluster"}},
	} {
		out, err := exec.Command(goBin, "list", "-deps", "../../"+strings.TrimPrefix(c.pkg, "./")).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c.pkg, err)
		}
		deps := map[string]bool{}
		for _, l := range strings.Fields(string(out)) {
			deps[l] = true
		}
		if !strings.Contains(string(out), mod) {
			t.Fatalf("go list -deps %s lists no package of the module: %q", c.pkg, out)
		}
		for _, f := range c.forbids {
			if deps[mod+f] {
				t.Errorf("%s imports %s (docs/architecture.md: imports only go down)", c.pkg, f)
			}
		}
	}
}
