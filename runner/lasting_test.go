package runner

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/targettest"
)

// routedTarget starts a fake cluster whose links it says it routes: cutting and healing them
// counts links, as the local target's proxies would, and nothing else.
type routedTarget struct {
	targettest.Target
	onIsolate func() // called inside Isolate (e.g. to interrupt)
}

var _ target.Partitioner = (*routedTarget)(nil)

func (t *routedTarget) Partitions() string { return "fake proxies" }

func (t *routedTarget) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	cl, err := t.Target.Start(ctx, so)
	if err != nil {
		return nil, err
	}
	return &routedCluster{Cluster: cl.(*targettest.Cluster), t: t, cut: map[string]bool{}}, nil
}

type routedCluster struct {
	*targettest.Cluster
	t   *routedTarget
	mu  sync.Mutex
	cut map[string]bool
}

// linksPerNode is what Isolate and Heal say they changed: 2 peers and a client, each way.
const linksPerNode = 6

func (c *routedCluster) Route(_ context.Context, _, _, addr string) (string, error) { return addr, nil }

func (c *routedCluster) Isolate(nodes ...string) int {
	c.mu.Lock()
	for _, n := range nodes {
		c.cut[n] = true
	}
	c.mu.Unlock()
	if c.t.onIsolate != nil {
		c.t.onIsolate()
	}
	return linksPerNode * len(nodes)
}

func (c *routedCluster) Heal(nodes ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, node := range nodes {
		if c.cut[node] {
			delete(c.cut, node)
			n += linksPerNode
		}
	}
	return n
}

func (c *routedCluster) AddShape(linkproxy.Shape, string, ...string) ([]linkproxy.PairLink, func() int, error) {
	return nil, func() int { return 0 }, nil
}

func (c *routedCluster) ProbeLinks(context.Context) []linkproxy.PairProbe { return nil }

// A run interrupted while a partition lasts heals it and records the heal, as a hog records its
// end: the record never holds a lasting action without its end, so the analysis does not hold the
// partition to the end of the run.
func TestInterruptedPartitionRecordsItsHeal(t *testing.T) {
	tgt := &routedTarget{Target: targettest.Target{Cluster: targettest.NewCluster()}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tgt.onIsolate = cancel // interrupted right as the links are cut, 20 s before their heal
	pl := plan(t, "30s", "timeline:\n  - {at: 300ms, partition: {node: node-1, for: 20s}}\n")
	res := runFake(t, ctx, &tgt.Target, pl, func(o *Options) { o.Target = tgt })
	if !errors.Is(res.err, ErrInterrupted) {
		t.Fatalf("err %v, want ErrInterrupted", res.err)
	}
	var cut, heal *rundir.Event
	for i, e := range res.events {
		switch {
		case e.IsAction(actions.ActPartition):
			cut = &res.events[i]
		case e.IsAction(actions.ActHeal):
			heal = &res.events[i]
		}
	}
	if cut == nil || cut.Node != "node-1" || actions.PartitionOf(*cut).Links != linksPerNode {
		t.Fatalf("partition event %+v; want node-1's %d links cut", cut, linksPerNode)
	}
	if heal == nil {
		var names []rundir.ActionName
		for _, e := range res.events {
			if e.Action != nil {
				names = append(names, e.Action.Name)
			}
		}
		t.Fatalf("events.jsonl holds the partition and no heal: actions %v", names)
	}
	if heal.Node != "node-1" || actions.PartitionOf(*heal).Links != linksPerNode || actions.PartitionOf(*heal).As != "node-1" || heal.T.Before(cut.T) {
		t.Errorf("heal %+v %+v; want node-1's %d links healed after the cut", heal, actions.PartitionOf(*heal), linksPerNode)
	}
}
