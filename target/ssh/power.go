package ssh

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

var (
	_ target.PowerCutter = (*Target)(nil)
	_ target.Rebooter    = (*Cluster)(nil)
)

// PowerCutNodes is what TargetOptions.SysrqTrigger is on a stack's nodes: the kernel's own.
const PowerCutNodes = "/proc/sysrq-trigger"

// PowerCuts: the nodes reboot without sync, when their agents were given a SysRq trigger.
func (t *Target) PowerCuts() target.PowerCuts {
	if t.opts.SysrqTrigger == "" {
		return target.PowerCuts{Refused: fmt.Sprintf("the nodes of %s are not this run's to reboot (their agents get no SysRq trigger): "+
			"run it on a stack (--stack), give --sysrq-trigger %s for an inventory whose machines may reboot, "+
			"or on the local target with a disk: block", t.Name(), PowerCutNodes)}
	}
	return target.PowerCuts{How: "reboots each node without sync (its agent writes b to " + t.opts.SysrqTrigger + ")"}
}

// PowerCut has n's agent reboot it without sync and returns the boot it left.
func (c *Cluster) PowerCut(ctx context.Context, n inventory.Node) (string, error) {
	cut, err := c.Agent(n.Name).PowerCut(ctx)
	if err != nil {
		return "", fmt.Errorf("power cut of %s: %w", n.Name, err)
	}
	return cut.BootID, nil
}

// AwaitBoot waits until SSH (host key verified as always) reads a boot id other than old under
// the agent's root, then stages the agent again, which starts it: the one that answered before
// is gone with the old boot.
func (c *Cluster) AwaitBoot(ctx context.Context, n inventory.Node, old string, o target.RebootOptions) (target.Rebooted, error) {
	if o.Timeout <= 0 {
		o.Timeout = target.DefaultRebootTimeout
	}
	start := time.Now()
	out := target.Rebooted{OldBoot: old}
	no := c.stage.withDefaults(n)
	bootFile := path.Join(no.Root, "proc/sys/kernel/random/boot_id")
	if no.PowerProc != "" {
		bootFile = path.Join(no.PowerProc, "sys/kernel/random/boot_id")
	}
	var err error
	out.NewBoot, out.SeenDown, err = waitBoot(ctx, bootWait{Node: n.Name, Old: old, Timeout: o.Timeout, Progress: o.Progress,
		Read: func(ctx context.Context) (string, error) {
			res, err := c.tr.Exec(ctx, n, transport.Cmd{Args: []string{"cat", bootFile}})
			return strings.TrimSpace(string(res.Stdout)), err
		}})
	if err != nil {
		return out, err
	}
	out.Back = time.Since(start)
	if out.Agent, err = Stage(ctx, c.tr, n, c.stage); err != nil {
		return out, fmt.Errorf("after the reboot of %s: %w", n.Name, err)
	}
	// A client of the old agent may hold connections into the boot that is gone.
	fresh := target.AgentClient(c.tr, n, out.Agent.Socket, c.run)
	c.mu.Lock()
	prev := c.agents[n.Name]
	c.agents[n.Name], c.sockets[n.Name] = fresh, out.Agent.Socket
	c.mu.Unlock()
	prev.Close()
	return out, nil
}

// bootWait is a wait for a node to be back in another boot.
type bootWait struct {
	Node, Old string
	Timeout   time.Duration
	// Every is the time between reads (default 1 s); Report between progress lines while
	// nothing changes (default 10 s).
	Every, Report time.Duration
	// Read reads the node's boot id; an error is a node not (yet) reachable.
	Read     func(ctx context.Context) (string, error)
	Progress func(format string, args ...any)
}

// errNotBack is a node that did not come back in another boot within the wait.
var errNotBack = errors.New("not back in another boot")

// bootRead bounds one read: a node going down may leave a connection hanging.
const bootRead = 10 * time.Second

// waitBoot reads the boot id until it differs from Old, for at most Timeout. The same id means
// the node has not gone down yet (the cut is delayed so that its answer gets out) or never did;
// a failed read means it is down. It returns the new id and whether a read failed on the way.
func waitBoot(ctx context.Context, w bootWait) (boot string, seenDown bool, err error) {
	if w.Every <= 0 {
		w.Every = time.Second
	}
	if w.Report <= 0 {
		w.Report = 10 * time.Second
	}
	progress := func(format string, args ...any) {
		if w.Progress != nil {
			w.Progress(format, args...)
		}
	}
	start := time.Now()
	deadline := start.Add(w.Timeout)
	nextReport := start.Add(w.Report)
	var last error
	for {
		rctx, cancel := context.WithTimeout(ctx, min(bootRead, time.Until(deadline)))
		id, rerr := w.Read(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return "", seenDown, ctx.Err()
		case rerr != nil:
			if !seenDown {
				progress("%s: down (%v)", w.Node, rerr)
			}
			seenDown, last = true, rerr
		case id == "":
			last = errors.New("an empty boot id")
		case id != w.Old:
			progress("%s: back in boot %s after %s", w.Node, id, time.Since(start).Round(time.Millisecond))
			return id, seenDown, nil
		default:
			last = fmt.Errorf("still in boot %s", id)
		}
		now := time.Now()
		if !now.Before(deadline) {
			return "", seenDown, fmt.Errorf("%s: %w within %s of the power cut (last: %v)", w.Node, errNotBack, w.Timeout, last)
		}
		if !now.Before(nextReport) {
			progress("%s: waiting for another boot, %s of %s (last: %v)", w.Node, now.Sub(start).Round(time.Second), w.Timeout, last)
			nextReport = now.Add(w.Report)
		}
		t := time.NewTimer(min(w.Every, deadline.Sub(now)))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", seenDown, ctx.Err()
		case <-t.C:
		}
	}
}
