package ssh

import (
	"context"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

// Access reaches an inventory's nodes over SSH outside a run: agents' sockets are in each
// node's rig folder under Base, and Stage puts rig there.
type Access struct {
	tr   transport.Transport
	base string
}

// NewAccess is the SSH access to nodes through tr, their rig folders under base ("": the login
// home).
func NewAccess(tr transport.Transport, base string) *Access { return &Access{tr: tr, base: base} }

func (a *Access) Transport() transport.Transport { return a.tr }

// AgentSocket makes the agent's folder on the node (as the login user) and returns its socket.
func (a *Access) AgentSocket(ctx context.Context, n inventory.Node) (string, error) {
	return Socket(ctx, a.tr, n, Options{Base: a.base})
}

// Stage uploads rig where it differs and starts the nodes' agents (All).
func (a *Access) Stage(ctx context.Context, nodes []inventory.Node, o target.StageOptions) ([]target.Staged, error) {
	return All(ctx, a.tr, nodes, Options{Binaries: o.Binaries, SourceDir: o.SourceDir, Base: a.base, Sudo: o.Sudo, Parallel: o.Parallel})
}

var _ target.Stager = (*Access)(nil)
