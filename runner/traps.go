package runner

import (
	"errors"
	"fmt"

	"github.com/rig-dev/rig/engine"
)

// ErrTrap classifies a run stopped because the user's code does not fit the engine harness
// (engine.Traps): what would follow (no leader, unanswered requests) is a symptom of it.
var ErrTrap = errors.New("the engine harness caught a misfit")

// onTrap acts on a node's first report of a trap (a TransTrap transition): an unmatched reply
// stops the run naming the codec; a service exception is warned about naming it, and counted in
// the report (the request was answered, so the run goes on).
func (r *run) onTrap(name string, t *engine.Traps) {
	if t == nil {
		return
	}
	if t.UnmatchedReplies > 0 {
		r.stopOn(fmt.Errorf("%w: %s: %s", ErrTrap, name, t.UnmatchedError()))
	}
	if t.ServiceErrors > 0 {
		r.warn("%s: %s (the request was answered rejected, not resent; %d so far on this node; the report counts them)", name, t.FirstServiceError, t.ServiceErrors)
	}
}
