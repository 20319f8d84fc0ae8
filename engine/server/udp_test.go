package server

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/wire"
)

// TestUDPGapNakRepair sends a burst over a real loopback socket with two holes: one in the
// middle (seen when a later datagram arrives) and one at the tail (seen only through the
// heartbeat). The receiver must NAK both, the sender's resends must fill them, every command
// must be applied through the log exactly once, and the burst's figures must say so.
func TestUDPGapNakRepair(t *testing.T) {
	cfg := startEngine(t, 0)
	to, _ := net.ResolveUDPAddr("udp", cfg.ClientAddr)
	c, err := net.DialUDP("udp", nil, to)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n, size, session, burst = 200, 120, 7, 3
	dgrams := make([][]byte, n)
	for i := range dgrams {
		r := wire.Request{Type: wire.TypeOrder, Corr: uint64(i), Order: wire.Order{ID: uint64(1000 + i), Instrument: 1, Side: wire.Buy, TIF: wire.IOC, Price: 1, Qty: 1}}
		if dgrams[i], err = wire.AppendDataDgram(nil, session, uint64(i), burst, &r, size); err != nil {
			t.Fatal(err)
		}
	}
	skip := func(i int) bool { return (i >= 50 && i < 60) || i >= 190 }
	send := func(i int) {
		wire.StampDgram(dgrams[i], time.Now().UnixNano())
		if _, err := c.Write(dgrams[i]); err != nil {
			t.Error(err)
		}
	}
	naks := make(chan [2]uint64, 16)
	go func() { // the sender's NAK handler: resend from the retransmit buffer
		buf := make([]byte, 2048)
		var d wire.Dgram
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			if wire.DecodeDgram(buf[:k], &d) != nil || d.Kind != wire.DgramNak {
				continue
			}
			naks <- [2]uint64{d.Seq, uint64(d.Burst)}
			for s := d.Seq; s < d.Seq+uint64(d.Burst) && s < n; s++ {
				wire.MarkRetransmit(dgrams[s])
				send(int(s))
			}
		}
	}()
	for i := 0; i < n; i++ {
		if !skip(i) {
			send(i)
		}
	}
	send(5) // a duplicate
	c.Write([]byte("not a datagram, but long enough to have a header......"))
	c.Write(wire.AppendHeartbeat(nil, session, n, time.Now().UnixNano()))

	var st *engine.UDP
	waitUntil(t, "every command applied and the burst closed", func() bool {
		st = udpStatus(t, cfg)
		return st.Applied == n && len(st.Bursts) == 1 && st.Bursts[0].Closed
	})
	if st.Delivered != n || st.Gaps != 2 || st.Repaired != 2 || st.Naks < 2 || st.Lost != 0 || st.OpenGaps != 0 {
		t.Errorf("counters: %+v", st)
	}
	if st.Duplicates < 1 || st.Malformed != 1 || st.ApplyErrors != 0 || st.NotLeader != 0 {
		t.Errorf("duplicates %d malformed %d apply errors %d not leader %d", st.Duplicates, st.Malformed, st.ApplyErrors, st.NotLeader)
	}
	seen := map[uint64]uint64{}
	for len(naks) > 0 {
		k := <-naks
		seen[k[0]] = k[1]
	}
	if seen[50] != 10 || seen[190] != 10 {
		t.Errorf("NAKs (first -> count) %v, want 50 -> 10 and 190 -> 10", seen)
	}
	b := st.Bursts[0]
	if b.Burst != burst || b.Sessions != 1 || b.Received != n || b.Gaps != 2 || b.Repaired != 2 || b.Naks < 2 {
		t.Errorf("burst %+v", b)
	}
	// The repaired messages waited at least the NAK delay, so the worst latency shows it.
	if b.RepairMaxMs < 2 || b.LatencyMaxUs < 2000 || b.PeakPerMs < 1 || b.AbsorbMs <= 0 || b.LatencyP50Us > b.LatencyMaxUs {
		t.Errorf("burst figures %+v", b)
	}
}

// TestUDPRcvbufReadBack asks for a receive buffer and checks /status reports what the kernel
// granted: Linux doubles the request, clamped to rmem_max.
func TestUDPRcvbufReadBack(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Skip("no /proc/sys/net/core/rmem_max")
	}
	rmemMax, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	const asked = 128 << 20
	cfg := startEngine(t, asked)
	st := udpStatus(t, cfg)
	if st.RcvbufAsked != asked || st.RmemMax != rmemMax {
		t.Errorf("asked %d rmem_max %d, want %d and %d", st.RcvbufAsked, st.RmemMax, asked, rmemMax)
	}
	if want := 2 * min(asked, rmemMax); st.RcvbufGranted != want {
		t.Errorf("granted %d, want 2 x min(asked, rmem_max) = %d", st.RcvbufGranted, want)
	}
}

func udpStatus(t *testing.T, cfg engine.Config) *engine.UDP {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+cfg.AdminAddr+"/status?udp=1", nil)
	engine.AuthorizeAdmin(req, testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st engine.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.UDP == nil {
		t.Fatal("status has no udp section")
	}
	return st.UDP
}

// udp_recv_nice raises the receive thread's priority (root only) and /status reads it back.
func TestUDPRecvNice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a negative nice value needs root")
	}
	cfg := startEngineWith(t, func(c *engine.Config) { c.UDPRecvNice = -5 })
	if st := udpStatus(t, cfg); st.RecvNice != -5 || st.RecvNiceError != "" {
		t.Errorf("receive thread nice %d (%q), want -5", st.RecvNice, st.RecvNiceError)
	}
}
