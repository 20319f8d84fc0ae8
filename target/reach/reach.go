// Package reach opens the access to an inventory's nodes outside a run (target.Access), for the
// verbs that reach nodes by hand: the one place that picks a target by the inventory's kind.
package reach

import (
	"errors"
	"fmt"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

// ErrOptions classifies options that cannot open an access (the message names the flag).
var ErrOptions = errors.New("bad access options")

// Options say how remote nodes are logged in to; the local target needs none of them.
type Options struct {
	Login sshtarget.Login
	Base  string // the folder on the nodes that holds rig-NODE ("": the login home)
}

// Open returns the access to inv's nodes: this machine for a local inventory, SSH (host keys
// from the inventory) for any other.
func Open(inv *inventory.Inventory, o Options) (target.Access, error) {
	if inv.Target == inventory.TargetLocal {
		return local.NewAccess(), nil
	}
	if o.Login.ConnectTimeout <= 0 {
		return nil, fmt.Errorf("%w: --connect-timeout %s: want a positive duration", ErrOptions, o.Login.ConnectTimeout)
	}
	tr, err := o.Login.Transport(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: --ssh-key: %v", ErrOptions, err)
	}
	return sshtarget.NewAccess(tr, o.Base), nil
}
