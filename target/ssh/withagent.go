package ssh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

// ErrStartAgent marks a failure to stage or start the node's agent in WithAgent, before do ran.
var ErrStartAgent = errors.New("start agent")

// WithAgent stages rig on node n and starts its agent (Stage), hands do the agent's client, and
// stops the agent afterwards on a budget of its own, whatever do used up: what a verb outside a
// run does on a node (rig down's quiesce, rig disk-check).
func WithAgent(ctx context.Context, tr transport.Transport, n inventory.Node, so Options, do func(*agent.Client) error) error {
	staged, err := Stage(ctx, tr, n, so)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStartAgent, err)
	}
	c := target.AgentClient(tr, n, staged.Socket, "")
	defer c.Close()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := Stop(sctx, tr, n, so); err != nil && so.Logger != nil {
			so.Logger.Warn("stop agent", "node", n.Name, "err", err)
		}
	}()
	return do(c)
}
