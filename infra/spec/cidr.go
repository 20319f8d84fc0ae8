package spec

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
)

// MaxOperatorPrefixShare bounds the operator CIDRs as a set: their union may cover at most
// 1/2^8 of an address family, a /8 of IPv4 (16,777,216 addresses) or a /8 of IPv6. Judging each
// CIDR alone let [0.0.0.0/1, 128.0.0.0/1] open SSH to all of IPv4 while 0.0.0.0/0 was refused.
const MaxOperatorPrefixShare = 8

// union is one family's operator CIDRs: those not inside another, and how many addresses
// they cover together.
type union struct {
	cidrs []string
	size  *big.Int
}

// cidrUnion splits valid CIDRs by family and drops those inside another (CIDRs either nest or
// are disjoint, so the union's size is the sum of what is left).
func cidrUnion(cidrs []string) (v4, v6 union) {
	var ps []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			ps = append(ps, p.Masked())
		}
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits() // the wider first
	})
	v4.size, v6.size = new(big.Int), new(big.Int)
	var last netip.Prefix
	for _, p := range ps {
		if last.IsValid() && last.Addr().Is4() == p.Addr().Is4() && last.Bits() <= p.Bits() && last.Contains(p.Addr()) {
			continue // inside the one before
		}
		last = p
		u := &v6
		if p.Addr().Is4() {
			u = &v4
		}
		u.cidrs = append(u.cidrs, p.String())
		u.size.Add(u.size, new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits())))
	}
	return v4, v6
}

// wideUnion says whether u covers more than a /MaxOperatorPrefixShare of a family of bits.
func wideUnion(u union, bits int) bool {
	return u.size != nil && u.size.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(bits-MaxOperatorPrefixShare))) > 0
}

func checkCIDRUnion(cidrs []string, allowWide bool) Problems {
	var ps Problems
	v4, v6 := cidrUnion(cidrs)
	for _, f := range []struct {
		name string
		bits int
		u    union
	}{{"IPv4", 32, v4}, {"IPv6", 128, v6}} {
		if !wideUnion(f.u, f.bits) || slices.Contains(f.u.cidrs, "0.0.0.0/0") || slices.Contains(f.u.cidrs, "::/0") {
			continue // a /0 is refused on its own
		}
		value := "[" + strings.Join(f.u.cidrs, ", ") + "]"
		whole := new(big.Int).Lsh(big.NewInt(1), uint(f.bits))
		count := f.u.size.String()
		if f.bits == 32 {
			count = thousands(int(f.u.size.Int64()))
		}
		switch {
		case f.u.size.Cmp(whole) == 0:
			ps = append(ps, Problem{Severity: SeverityError, Field: "operatorCidrs", Value: value,
				Allowed: "CIDRs that together cover at most a /8 of " + f.name + "; all of it is refused even with allowWideOperatorCidrs",
				Reason:  "together they are all of " + f.name + ": this would open SSH to the whole internet"})
		case allowWide:
			ps = append(ps, Problem{Severity: SeverityWarning, Field: "operatorCidrs", Value: value,
				Allowed: "at most a /8 of " + f.name + " in all",
				Reason:  "together they open SSH to " + count + " " + f.name + " addresses; accepted because allowWideOperatorCidrs is true"})
		default:
			ps = append(ps, Problem{Severity: SeverityError, Field: "operatorCidrs", Value: value,
				Allowed: "CIDRs that together cover at most a /8 of " + f.name + " (" + limitText(f.bits) + " addresses), " +
					"or set rig:allowWideOperatorCidrs true to accept it deliberately",
				Reason: "together they open SSH to " + count + " " + f.name + " addresses"})
		}
	}
	return ps
}

func limitText(bits int) string {
	if bits == 32 {
		return thousands(1 << (32 - MaxOperatorPrefixShare))
	}
	return "2^120"
}

// VPCCIDR is the network of the VPC the rig creates (when it reuses none).
const VPCCIDR = "10.42.0.0/16"

// SubnetCIDRs carves n /24 subnets out of vpc, the first at 10.42.1.0/24 as single-az stacks
// have always had it (cidr_test.go checks that they lie inside vpc and never overlap).
func SubnetCIDRs(vpc string, n int) ([]string, error) {
	p, err := netip.ParsePrefix(vpc)
	if err != nil || !p.Addr().Is4() || p.Bits() > 23 {
		return nil, fmt.Errorf("VPC CIDR %q: want an IPv4 prefix of /23 or wider", vpc)
	}
	if most := 1<<(24-p.Bits()) - 1; n < 1 || n > most {
		return nil, fmt.Errorf("%d subnets of /24 in %s: want 1-%d", n, vpc, most)
	}
	a := p.Masked().Addr().As4()
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	out := make([]string, n)
	for i := range out {
		v := base + uint32(i+1)<<8
		out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 24).String()
	}
	return out, nil
}
