package targettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/transport"
)

// Loadgen scripts the fake load generator.
type Loadgen struct {
	// ExitEarly is the probe command's error: before its first probe, or ExitAfter after its
	// start when that is set.
	ExitEarly error
	ExitAfter time.Duration
	// Preload is the preload command's run (nil: it succeeds at once).
	Preload func(ctx context.Context) error
}

type loadgenState struct {
	mu       sync.Mutex
	stop     chan struct{}
	stopOnce sync.Once
}

type fakeTransport struct{ c *Cluster }

// Exec runs `rig loadgen MODE --config FILE` for preload, probe and burst, reading the config
// the runner uploaded; any other command is an error.
func (t fakeTransport) Exec(ctx context.Context, n inventory.Node, cmd transport.Cmd) (transport.Result, error) {
	c := t.c
	if len(cmd.Args) < 5 || cmd.Args[1] != "loadgen" {
		return transport.Result{}, fmt.Errorf("targettest: the fake transport runs only rig loadgen, not %q", cmd.Args)
	}
	c.record(n.Name, "loadgen "+cmd.Args[2])
	b, err := os.ReadFile(cmd.Args[4])
	if err != nil {
		return transport.Result{}, err
	}
	var cfg loadspec.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return transport.Result{}, err
	}
	script, lg := c.Loadgen, &c.lg
	switch cmd.Args[2] {
	case "preload":
		if script.Preload != nil {
			return transport.Result{}, script.Preload(ctx)
		}
		return transport.Result{}, nil
	case "probe":
		if script.ExitEarly != nil && script.ExitAfter == 0 {
			return transport.Result{}, script.ExitEarly
		}
		lg.mu.Lock()
		start, stop := time.Now().Add(10*time.Millisecond), make(chan struct{})
		lg.stop, lg.stopOnce = stop, sync.Once{}
		lg.mu.Unlock()
		if cmd.Stdout != nil { // as `rig loadgen probe` does once its schedule starts
			fmt.Fprintln(cmd.Stdout, loadspec.StartLine(start))
		}
		end := time.Duration(cfg.Probe.Duration)
		var err error
		if script.ExitEarly != nil {
			end, err = script.ExitAfter, script.ExitEarly
		}
		select {
		case <-time.After(end):
		case <-stop:
		case <-ctx.Done():
			return transport.Result{}, ctx.Err()
		}
		os.MkdirAll(cfg.Probe.Out, 0o755)
		os.WriteFile(filepath.Join(cfg.Probe.Out, rundir.StatsFile), []byte(`{"scheduled": 10}`), 0o644)
		return transport.Result{}, err
	case "burst":
		b, _ := json.Marshal(cfg.Burst)
		c.record(n.Name, "loadgen burst-config "+string(b))
		os.MkdirAll(cfg.Burst.Out, 0o755)
		return transport.Result{}, os.WriteFile(filepath.Join(cfg.Burst.Out, rundir.BurstStatsFile), []byte(`{"transport": "udp"}`), 0o644)
	}
	return transport.Result{}, fmt.Errorf("targettest: the fake load generator has no mode %q", cmd.Args[2])
}

// Upload copies a file on this machine.
func (t fakeTransport) Upload(_ context.Context, _ inventory.Node, local, remote string, _ uint32) error {
	if local == remote {
		return nil
	}
	b, err := os.ReadFile(local)
	if err != nil {
		return err
	}
	os.MkdirAll(filepath.Dir(remote), 0o755)
	return os.WriteFile(remote, b, 0o644)
}

func (t fakeTransport) Download(context.Context, inventory.Node, string, string) error {
	return errors.New("targettest: the fake transport has no downloads")
}

// Dial reaches the load generator's control API at a client's ControlSocket (the agents are
// dialled by their clients); anything else is refused.
func (t fakeTransport) Dial(_ context.Context, n inventory.Node, addr string) (net.Conn, error) {
	if n.Role != inventory.RoleClient || !strings.HasPrefix(addr, t.c.ControlSocket(n, "")+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: targettest: nothing listens at %s on %s (the fake serves only a client's control socket)", transport.ErrUnreachable, addr, n.Name)
	}
	lg := &t.c.lg
	mux := http.NewServeMux()
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		t.c.record(n.Name, "loadgen stop")
		lg.mu.Lock()
		defer lg.mu.Unlock()
		if lg.stop != nil {
			lg.stopOnce.Do(func() { close(lg.stop) })
		}
	})
	mux.HandleFunc("POST /burst", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		t.c.record(n.Name, "loadgen burst "+string(b))
	})
	return pipeServe(mux), nil
}

func (t fakeTransport) Close() error { return nil }
