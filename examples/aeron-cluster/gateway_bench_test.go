package aeroncluster_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rig-dev/rig/gatewaybench"
	"github.com/rig-dev/rig/playbooks"
)

// BenchmarkGateway is a short `rig bench gateway` on the built example (one take of 2 s per rate
// and side): the gateway's added latency at p50 and p99 per rate, as metrics. The command is the
// measurement to quote (docs/engines.md, "Gateway"); this keeps the path exercised by
// `go test -bench Gateway -run '^$' ./examples/aeron-cluster`.
func BenchmarkGateway(b *testing.B) {
	if _, err := os.Stat("matching/target/matching.jar"); err != nil {
		b.Skip("the example is not built: mvn -q -o -B -f examples/aeron-cluster/pom.xml package -DskipTests")
	}
	pb, err := playbooks.Open("engine.yaml", testDrivers)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		rep, err := gatewaybench.Run(context.Background(), gatewaybench.Options{Playbook: pb, ClientArgs: []string{"-Xmx256m", "--gateway-bench"},
			Rates: []float64{1000, 20000}, For: 2 * time.Second, Warmup: 2 * time.Second, Takes: 1, Spin: 50 * time.Microsecond, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range rep.Points {
			b.ReportMetric(p.AddedP50Us, fmt.Sprintf("added-p50-us@%.0f/s", p.Rate))
			b.ReportMetric(p.AddedP99Us, fmt.Sprintf("added-p99-us@%.0f/s", p.Rate))
		}
		b.Logf("load average %.2f -> %.2f: %+v", rep.Load1, rep.Load1After, rep.Points)
	}
}
