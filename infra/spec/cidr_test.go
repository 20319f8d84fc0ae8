package spec

import (
	"strings"
	"testing"
)

func cidrProblems(cidrs []string, allow bool) Problems {
	s := validSpec()
	s.OperatorCIDRs, s.AllowWideOperatorCIDRs = cidrs, allow
	var out Problems
	for _, p := range Validate(s) {
		if p.Field == "operatorCidrs" {
			out = append(out, p)
		}
	}
	return out
}

// The operator CIDRs are judged as a set: two halves of IPv4 are all of it, as 0.0.0.0/0 is.
func TestOperatorCIDRUnion(t *testing.T) {
	cases := []struct {
		cidrs []string
		allow bool
		want  string // "" = no problem; "warning: ..." or "error: ..." substring
	}{
		{[]string{"203.0.113.7/32"}, false, ""},
		{[]string{"10.0.0.0/8"}, false, ""},                // exactly a /8
		{[]string{"10.0.0.0/8", "10.1.0.0/16"}, false, ""}, // nested: still a /8
		{[]string{"10.0.0.0/8", "11.0.0.0/32"}, false, "error: rig:operatorCidrs = [10.0.0.0/8, 11.0.0.0/32]: allowed CIDRs that together cover at most a /8 of IPv4 (16,777,216 addresses), or set rig:allowWideOperatorCidrs true to accept it deliberately (together they open SSH to 16,777,217 IPv4 addresses)"},
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, false, "error: rig:operatorCidrs = [0.0.0.0/1, 128.0.0.0/1]: allowed CIDRs that together cover at most a /8 of IPv4; all of it is refused even with allowWideOperatorCidrs (together they are all of IPv4: this would open SSH to the whole internet)"},
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, true, "error: rig:operatorCidrs = [0.0.0.0/1, 128.0.0.0/1]: allowed CIDRs that together cover at most a /8 of IPv4; all of it is refused even with allowWideOperatorCidrs (together they are all of IPv4: this would open SSH to the whole internet)"},
		{[]string{"0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2"}, false, "or set rig:allowWideOperatorCidrs true"},
		{[]string{"0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2"}, true, "warning: rig:operatorCidrs = [0.0.0.0/2, 64.0.0.0/2, 128.0.0.0/2]: allowed at most a /8 of IPv4 in all (together they open SSH to 3,221,225,472 IPv4 addresses; accepted because allowWideOperatorCidrs is true"},
		{[]string{"203.0.113.7/32", "::/1", "8000::/1"}, false, "together they are all of IPv6"},
		{[]string{"203.0.113.7/32", "2000::/7"}, false, "at most a /8 of IPv6"},
	}
	for _, c := range cases {
		probs := cidrProblems(c.cidrs, c.allow)
		var union []string
		for _, p := range probs {
			if strings.Contains(p.String(), "together") {
				union = append(union, p.String())
			}
		}
		if c.want == "" {
			if len(union) > 0 {
				t.Errorf("%v: %v", c.cidrs, union)
			}
			continue
		}
		if len(union) != 1 || !strings.Contains(union[0], c.want) {
			t.Errorf("%v (allow %v): got %q, want one containing %q", c.cidrs, c.allow, union, c.want)
		}
	}
}
