package launch

import (
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// The burst client's request names every member as node.properties does (peer.N =
// node,raft,client), the series, and its start on the client node's clock in Unix nanoseconds.
func TestBurstRequest(t *testing.T) {
	peers := []engine.Peer{{Node: "node-0", RaftAddr: "10.0.0.1:7000", ClientAddr: "10.0.0.1:7001"}, {Node: "node-1", RaftAddr: "10.0.0.2:7000", ClientAddr: "10.0.0.2:7001"}}
	start := time.Unix(1700000000, 5)
	got := BurstRequest(peers, "10.0.0.9", rundir.BurstSeries{Messages: 50000, Size: 170, Count: 3, Every: time.Second, Senders: 2, FirstBurst: 4}, start, "/out/bursts.json")
	want := "peer.0=node-0,10.0.0.1:7000,10.0.0.1:7001\npeer.1=node-1,10.0.0.2:7000,10.0.0.2:7001\nhost=10.0.0.9\nmessages=50000\nsize=170\ncount=3\n" +
		"every_ns=1000000000\nstart_unix_ns=1700000000000000005\nsenders=2\nfirst_burst=4\nout=/out/bursts.json\n"
	if got != want {
		t.Errorf("request:\n%s\nwant:\n%s", got, want)
	}
}
