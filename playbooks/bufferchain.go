package playbooks

import (
	"fmt"
	"strings"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/internal/bufferchain"
	"github.com/rig-dev/rig/internal/units"
)

// BurstChain is one burst entry's buffer chain for one run: the guide's minimums and the settings
// the run asks for (0: not set by the playbook).
type BurstChain struct {
	Entry   int // timeline index
	Burst   bufferchain.Burst
	Chain   bufferchain.Chain
	Asked   int64 // SO_RCVBUF the engine asks for
	RmemMax int64 // tuning net.core.rmem_max
	Window  int64
	Term    int64
}

// BurstChains are the buffer chains of the playbook's bursts (a resolved run's: no matrix).
func (p *Playbook) BurstChains() []BurstChain {
	var out []BurstChain
	for i, a := range p.Timeline {
		bs, ok := a.Spec.(actions.BurstSender)
		if !ok {
			continue
		}
		b := bs.Sends()
		senders := b.Senders
		if senders == 0 {
			senders = p.Cluster.Clients
		}
		bu := bufferchain.Burst{Messages: int64(b.Messages), Senders: senders, Size: b.Size, Aeron: p.Engine.BurstClient() != nil}
		if !p.Placement.IsZero() { // a zone's round trip: both ways of the link between zones
			bu.RTT = bufferchain.SameZoneRTT + 2*(p.Placement.Between.Delay+p.Placement.Between.Jitter)
		}
		c := BurstChain{Entry: i, Burst: bu, Chain: bufferchain.Predict(bu)}
		asked := bufferchain.SettingUDPRcvbuf
		if bu.Aeron {
			asked = bufferchain.SettingSoRcvbuf
		}
		c.Asked, _ = p.Engine.Int(asked)
		c.Window, _ = p.Engine.Int(bufferchain.SettingWindow)
		c.Term, _ = p.Engine.Int(bufferchain.SettingTerm)
		for _, s := range p.Tuning {
			if s.Key == bufferchain.TuningRmemMax {
				c.RmemMax, _ = units.ParseSize(s.Value)
			}
		}
		out = append(out, c)
	}
	return out
}

// bufferChainHead says once how the plan's buffer-chain lines are derived; "" without bursts.
func (pl *Plan) bufferChainHead() string {
	for _, r := range pl.Runs {
		for _, c := range r.Playbook.BurstChains() {
			if !c.Burst.Aeron {
				return fmt.Sprintf("the micro-burst guide's minimum per burst: SO_RCVBUF >= P x S x %s; P = messages x senders arriving within %s (the guide's wire-speed premise), S = the datagram; Linux grants min(asked, net.core.rmem_max) x 2",
					units.FormatDuration(bufferchain.BurstWindow), units.FormatDuration(bufferchain.BurstWindow))
			}
			return fmt.Sprintf("the micro-burst guide's minimums per burst: SO_RCVBUF >= P x S x %s, window >= P x S x RTT, term >= 2 x P x S x max stall (%s, the burst's own length); "+
				"P = messages x senders arriving within %s (the guide's wire-speed premise), S = the message + Aeron's %d B frame header + the cluster's %d B session header, %d B aligned; "+
				"RTT %s within a zone (assumed) plus the placement's delay both ways; Linux grants min(asked, net.core.rmem_max) x 2",
				units.FormatDuration(bufferchain.BurstWindow), units.FormatDuration(bufferchain.BurstWindow), units.FormatDuration(bufferchain.BurstWindow),
				bufferchain.AeronFrameHeader, bufferchain.ClusterSessionHeader, bufferchain.AeronFrameAlignment, units.FormatDuration(bufferchain.SameZoneRTT))
		}
	}
	return ""
}

// bufferChainLines are each run's bursts' minimums beside the settings in effect.
func (pl *Plan) bufferChainLines() []string {
	return pl.eachRunLines(func(p *Playbook) []string {
		var out []string
		for _, c := range p.BurstChains() {
			ch := c.Chain
			rmem, rmemFrom := c.RmemMax, "tuning"
			if rmem == 0 {
				rmem, rmemFrom = bufferchain.KernelRmemDefault, "the kernel's usual default, not tuned"
			}
			parts := []string{fmt.Sprintf("timeline[%d] %s x %d B x %d sender(s): P %s/ms, S %d B",
				c.Entry, units.FormatCount(c.Burst.Messages), c.Burst.Size, c.Burst.Senders, units.FormatCount(int64(ch.PerMs)), ch.Wire)}
			rcv := fmt.Sprintf("SO_RCVBUF >= %s", mem(ch.SoRcvbuf))
			if c.Asked > 0 {
				eff := bufferchain.Effective(c.Asked, rmem)
				rcv += fmt.Sprintf(" against %s in effect (asked %s, net.core.rmem_max %s from %s: granted %s)%s",
					mem(eff), mem(c.Asked), mem(rmem), rmemFrom, mem(bufferchain.Granted(c.Asked, rmem)), chainShort(eff, ch.SoRcvbuf))
			} else {
				rcv += " against the kernel's default (the engine asks for none)" + chainShort(bufferchain.KernelRmemDefault, ch.SoRcvbuf)
			}
			parts = append(parts, rcv)
			if c.Burst.Aeron {
				parts = append(parts, fmt.Sprintf("window >= %s at RTT %s against %s", mem(ch.Window), units.FormatDuration(ch.RTT), chainSetting(c.Window, ch.Window)),
					fmt.Sprintf("term >= %s against %s", mem(ch.Term), chainSetting(c.Term, ch.Term)))
			}
			out = append(out, strings.Join(parts, "; "))
		}
		return out
	})
}

func chainShort(have, need int64) string {
	if have < need {
		return ": SHORT"
	}
	return ""
}

func chainSetting(have, need int64) string {
	if have == 0 {
		return "the engine's default"
	}
	return mem(have) + chainShort(have, need)
}

// mem is a buffer size for a person: 12.2 MiB.
func mem(b int64) string { return units.FormatMemory(float64(b)) }
