package loadgen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server"
	"github.com/rig-dev/rig/engine/server/servertest"
	"github.com/rig-dev/rig/rundir"
)

// TestUDPBurstToEngine sends UDP bursts from two senders to a real reference engine on
// loopback: every datagram must be delivered once and applied through the log, whatever the
// socket buffer dropped (NAK repair), and the receiver must see both senders in every burst.
func TestUDPBurstToEngine(t *testing.T) {
	cfg := servertest.Start(t, func(c *engine.Config) { c.UDPNakDelay = "1ms" }, serveEngine)
	const per, count, senders = 3000, 3, 2
	st, err := Burst(context.Background(), BurstOptions{
		Servers: []string{cfg.ClientAddr}, Out: t.TempDir(),
		Series: rundir.BurstSeries{UDP: true, Size: 300, Senders: senders, Messages: per, Count: count, Every: 150 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Transport != "udp" || st.Sent != per*count*senders || len(st.Bursts) != count || st.Target != cfg.ClientAddr {
		t.Fatalf("sender stats %+v", st)
	}
	for _, b := range st.Bursts {
		if b.Sent != per*senders || b.PeakPerMs <= 0 || b.SendNs <= 0 {
			t.Errorf("burst %+v", b)
		}
	}
	var u *engine.UDP
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if u = servertest.UDP(t, cfg); u.Applied == per*count*senders {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all applied: %+v", *u)
		}
	}
	if u.Delivered != per*count*senders || u.Lost != 0 || u.Malformed != 0 {
		t.Errorf("receiver %+v", u)
	}
	if u.SocketDrops > 0 && (u.Naks == 0 || u.Repaired == 0) {
		t.Errorf("%d datagrams dropped by the socket, but %d NAKs and %d repairs", u.SocketDrops, u.Naks, u.Repaired)
	}
	var resent int64
	for _, s := range st.UDPSenders {
		resent += s.Resent
	}
	if u.Naks > 0 && resent == 0 {
		t.Errorf("receiver sent %d NAKs but the senders resent nothing: %+v", u.Naks, st.UDPSenders)
	}
	if len(u.Bursts) != count {
		t.Fatalf("receiver bursts %+v", u.Bursts)
	}
	for _, b := range u.Bursts {
		if b.Sessions != senders || b.Received != per*senders || b.PeakPerMs <= 0 {
			t.Errorf("receiver burst %+v", b)
		}
	}
	t.Logf("socket drops %d, gaps %d, NAKs %d, repaired %d, resent %d", u.SocketDrops, u.Gaps, u.Naks, u.Repaired, resent)
}

func serveEngine(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
	return server.New(node, log, token).Run(ctx)
}
