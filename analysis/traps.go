package analysis

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rig-dev/rig/engine"
)

// Traps are what the engine harness caught of the user's code, per server node, from each node's
// final status (engine.Traps: counted since that process started, so a node relaunched in the run
// counts its last launch); absent when none was caught.
type Traps map[string]engine.Traps

func (d *runData) traps() Traps {
	out := Traps{}
	for n, st := range d.statuses {
		if st != nil && st.Traps != nil {
			out[n] = *st.Traps
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// line is the report's line on them: service errors with the first exception, unmatched replies
// with the codec and the first id; "" when none.
func (t Traps) line() string {
	var errs, unmatched []string
	first, codec := "", ""
	var firstID int64
	for _, n := range slices.Sorted(maps.Keys(t)) {
		tr := t[n]
		if tr.ServiceErrors > 0 {
			errs = append(errs, fmt.Sprintf("%s %d", n, tr.ServiceErrors))
			first = cmp.Or(first, tr.FirstServiceError)
		}
		if tr.UnmatchedReplies > 0 {
			unmatched = append(unmatched, fmt.Sprintf("%s %d", n, tr.UnmatchedReplies))
			if codec == "" {
				codec, firstID = tr.Codec, tr.FirstUnmatchedID
			}
		}
	}
	var parts []string
	if len(errs) > 0 {
		parts = append(parts, fmt.Sprintf("**Service errors** (messages the service threw on, each answered rejected, not resent): %s; first: %s.", strings.Join(errs, ", "), first))
	}
	if len(unmatched) > 0 {
		parts = append(parts, fmt.Sprintf("**Unmatched replies** (the codec %s read a correlation id the gateway never sent; first %d): %s.", codec, firstID, strings.Join(unmatched, ", ")))
	}
	return strings.Join(parts, " ")
}
