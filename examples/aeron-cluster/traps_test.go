package aeroncluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// trapRun runs engine.yaml with the example's deliberate misfit (-Drig.example.trap) and returns
// rig's output, its error and the run's summary (nil without one).
func trapRun(t *testing.T, trap, addr string) (string, error, *analysis.Summary) {
	t.Helper()
	pb := rewritePlaybook(t, "engine.yaml", map[string]string{
		`- "-XX:+UseG1GC"`: `- "-XX:+UseG1GC"` + "\n      - \"-Drig.example.trap=" + trap + "\"",
		"duration: 10s":    "duration: 6s",
	})
	// Short: the load generator's control socket path under it must fit in 107 bytes.
	res, err := os.MkdirTemp("", "rtrap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(res) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rigBinary(t), "run", "-q", "--results", res, "--first-address", addr, pb)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	sums, _ := filepath.Glob(filepath.Join(res, "*", rundir.SummaryFile))
	if len(sums) != 1 {
		return out.String(), err, nil
	}
	b, rerr := os.ReadFile(sums[0])
	if rerr != nil {
		t.Fatal(rerr)
	}
	var s analysis.Summary
	if jerr := json.Unmarshal(b, &s); jerr != nil {
		t.Fatal(jerr)
	}
	rep, _ := os.ReadFile(filepath.Join(filepath.Dir(sums[0]), rundir.ReportFile))
	return out.String() + "\n" + string(rep), err, &s
}

// TestTrapsNamed: a codec that misreads the correlation id stops the run naming the codec (not
// "no leader"); a service that throws on some orders has those requests answered rejected at
// once, not resent, and the report counts the exceptions naming the first.
func TestTrapsNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster twice")
	}
	build(t)
	t.Run("wrong correlation id", func(t *testing.T) {
		out, err, _ := trapRun(t, "wrong-correlation-id", "127.0.19.131")
		if err == nil {
			t.Fatalf("rig run succeeded with a codec that misreads every answer's id:\n%s", out)
		}
		for _, want := range []string{"dev.rig.aeron.matching.MatchingCodec", "never sent"} {
			if !strings.Contains(out, want) {
				t.Errorf("rig run's output does not name the trap (%q):\n%s", want, out)
			}
		}
		if strings.Contains(out, "no leader among") || strings.Contains(out, "exited before its first probe") {
			t.Errorf("the trap is reported as something else:\n%s", out)
		}
	})
	t.Run("service throws", func(t *testing.T) {
		out, err, s := trapRun(t, "throw-every=50", "127.0.19.141")
		if err != nil || s == nil {
			t.Fatalf("rig run: %v (summary %v)\n%s", err, s != nil, out)
		}
		var n uint64
		first := ""
		for _, tr := range s.Traps {
			n += tr.ServiceErrors
			first = tr.FirstServiceError
		}
		if n == 0 || !strings.Contains(first, "java.lang.IllegalStateException: order ") || !strings.Contains(out, "**Service errors**") {
			t.Errorf("service errors not counted in summary.json and the report: %d, %q\n%s", n, first, out)
		}
		if s.Status != "ok" || s.StatusReason != "" {
			t.Errorf("run %s (%s): the thrown-on requests were waited for or resent\n%s", s.Status, s.StatusReason, out)
		}
	})
}
