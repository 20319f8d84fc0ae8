package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/transport"
)

// loadgenConfig is the load generator's config for this run, written to the client node.
func (r *run) loadgenConfig() loadspec.Config {
	pb := r.pb
	out := r.cl.OutputPath(r.client, rundir.LoadgenDir)
	return loadspec.Config{
		Servers:      r.clientAddrs(),
		Instruments:  pb.Preload.Instruments,
		StartTimeout: loadspec.Duration(30 * time.Second),
		Conn:         r.loadgenConn(),
		Preload:      loadspec.PreloadConfig{Orders: loadspec.Count(pb.Preload.Orders), Out: out},
		Probe: loadspec.ProbeConfig{
			Rate: loadspec.Rate(pb.Load.ProbeRate), Duration: loadspec.Duration(pb.Duration),
			Spin: loadspec.Duration(pb.Load.Spin), Out: out, Control: r.loadgenAddr(),
			PIDFile: r.cl.NodePath(r.client, loadspec.PIDFile),
		},
	}
}

// loadgenConn is how the load generator treats its connections: it leaves a silent leader after
// the engines' heartbeat timeout in effect, as a follower would.
func (r *run) loadgenConn() loadspec.ConnConfig {
	return loadspec.ConnConfig{LeaderTimeout: loadspec.Duration(r.leaderTimeout)}
}

// loadgenCmd runs `rig loadgen MODE --config FILE` on the client node; it writes the config first.
func (r *run) loadgenCmd(ctx context.Context, mode string, stdout io.Writer) error {
	return r.runLoadgen(ctx, r.client, mode, rundir.LoadgenCommandName(mode), r.loadgenConfig(), stdout)
}

// runLoadgen runs `rig loadgen MODE --config NAME.json` on node n with cfg; its log goes to
// NAME.log in the run folder.
func (r *run) runLoadgen(ctx context.Context, n inventory.Node, mode, name string, cfg loadspec.Config, stdout io.Writer) error {
	local := filepath.Join(r.dir, name+".json")
	if err := atomicfile.WriteJSON(local, cfg); err != nil {
		return err
	}
	remote := r.cl.NodePath(n, name+".json")
	if err := r.cl.Transport().Upload(ctx, n, local, remote, 0o644); err != nil {
		return fmt.Errorf("upload load generator config: %w", err)
	}
	logf, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	var errw io.Writer = logf
	if stdout == nil {
		stdout = logf
	} else {
		stdout = io.MultiWriter(logf, stdout)
	}
	_, err = r.cl.Transport().Exec(ctx, n, transport.Cmd{Args: []string{r.cl.Binary(n), "loadgen", mode, "--config", remote}, Stdout: stdout, Stderr: errw})
	return err
}

// remoteBurst sends a client node's share of a burst with `rig loadgen burst`; its figures land
// in the run folder as <node>/loadgen/bursts-<first>/bursts.json.
func (r *run) remoteBurst(ctx context.Context, n inventory.Node, series rundir.BurstSeries) error {
	first := series.FirstBurst
	rel := rundir.RemoteBurstsDir(n.Name, first)
	cfg := loadspec.Config{
		Servers: r.clientAddrs(), Instruments: r.pb.Preload.Instruments, StartTimeout: loadspec.Duration(30 * time.Second),
		Conn: r.loadgenConn(), Burst: loadspec.BurstSection(series, r.cl.OutputPath(n, rel)),
	}
	if err := r.runLoadgen(ctx, n, "burst", rundir.LoadgenCommandName(fmt.Sprintf("burst-%s-%d", n.Name, first)), cfg, nil); err != nil {
		return err
	}
	return r.cl.Gather(ctx, n, path.Join(rel, rundir.BurstStatsFile))
}

func (r *run) preload(ctx context.Context) error {
	if r.pb.Preload.Orders == 0 {
		return nil
	}
	r.mark("preload_start")
	start := time.Now()
	r.progress("preloading %d resting orders", r.pb.Preload.Orders)
	if err := r.loadgenCmd(ctx, "preload", nil); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	d := time.Since(start)
	r.mark("preload_end")
	r.progress("preloaded %d orders in %s (%.0f orders/s)", r.pb.Preload.Orders, d.Round(time.Millisecond), float64(r.pb.Preload.Orders)/d.Seconds())
	return nil
}

// load runs the probe stream for the playbook's duration and the timeline beside it. Offsets
// (timeline, warm-up) count from the load generator's own schedule start, not from when the
// controller launched it. An interrupt stops the load generator gracefully: it stops sending,
// waits out its grace period and writes every probe, so nothing collected is lost.
func (r *run) load(ctx context.Context) error {
	lgCtx, lgKill := context.WithCancel(context.WithoutCancel(ctx))
	defer lgKill()
	lgDone := make(chan error, 1)
	started := newStartWatch()
	go func() { lgDone <- r.loadgenCmd(lgCtx, "probe", started) }()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			r.stopLoadgen(context.WithoutCancel(ctx))
			select {
			case <-stopped:
			case <-time.After(loadgenStopWait):
				lgKill() // it did not finish in time: its process group is killed
			}
		case <-stopped:
		}
	}()
	start, err := r.awaitLoadStart(ctx, lgDone, started.c)
	if err != nil {
		return err
	}
	r.loadStart = start
	r.markAt("load_start", start)
	r.progress("load start: %.0f probes/s for %s", r.pb.Load.ProbeRate, r.pb.Duration)
	tlCtx, tlCancel := context.WithCancel(ctx)
	defer tlCancel()
	// The warm-up mark is joined before load returns: nothing may write during finish.
	warmupDone := make(chan struct{})
	go func() {
		defer close(warmupDone)
		if ctxtime.SleepUntil(tlCtx, start.Add(r.pb.Warmup)) == nil {
			r.markAt("warmup_end", start.Add(r.pb.Warmup))
		}
	}()
	// With a placement, the links are probed again halfway through the measured load.
	linksDone := make(chan struct{})
	go func() {
		defer close(linksDone)
		if !r.pb.Placement.IsZero() && ctxtime.SleepUntil(tlCtx, start.Add(r.pb.Warmup+(r.pb.Duration-r.pb.Warmup)/2)) == nil {
			r.probeLinksUnderLoad(tlCtx)
		}
	}()
	defer func() { tlCancel(); <-warmupDone; <-linksDone }()
	tlDone := make(chan error, 1)
	go func() { tlDone <- r.runTimeline(tlCtx) }()
	var tlErr, lgErr error
	select {
	case tlErr = <-tlDone:
		if tlErr != nil {
			r.stopLoadgen(context.WithoutCancel(ctx)) // the rest of the run would mean nothing
		}
		lgErr = <-lgDone
	case lgErr = <-lgDone:
		tlCancel()
		if tlErr = <-tlDone; errors.Is(tlErr, context.Canceled) && ctx.Err() == nil {
			tlErr = nil
		}
	}
	r.mark("load_end")
	r.readLoadgenStats()
	switch {
	case ctx.Err() != nil:
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("stopped %s into the load: %w", time.Since(start).Round(time.Millisecond), cause)
		}
		return fmt.Errorf("interrupted %s into the load", time.Since(start).Round(time.Millisecond))
	case tlErr != nil:
		return tlErr
	case lgErr != nil:
		return fmt.Errorf("load generator: %w", lgErr)
	}
	return nil
}

// loadgenStopWait bounds a graceful stop: the load generator's grace period plus writing.
const loadgenStopWait = 20 * time.Second

// awaitLoadStart waits for the load generator's schedule start (probe 0's intended send time,
// on the client node's clock, moved onto ours), which it prints the moment it starts.
func (r *run) awaitLoadStart(ctx context.Context, lgDone <-chan error, started <-chan time.Time) (time.Time, error) {
	const limit = 60 * time.Second
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case start := <-started:
		return start.Add(-r.srv(r.client.Name).offset), nil
	case err := <-lgDone:
		return time.Time{}, fmt.Errorf("load generator exited before its first probe: %v", err)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-t.C:
		return time.Time{}, fmt.Errorf("load generator did not start its schedule within %s", limit)
	}
}

// startWatch reads the load generator's stdout as it comes and hands on the schedule start
// from its loadspec.StartLine.
type startWatch struct {
	c    chan time.Time
	line []byte
	sent bool
}

func newStartWatch() *startWatch { return &startWatch{c: make(chan time.Time, 1)} }

func (w *startWatch) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != '\n' {
			if len(w.line) < 4096 {
				w.line = append(w.line, b)
			}
			continue
		}
		if t, ok := loadspec.ParseStartLine(string(w.line)); ok && !w.sent {
			w.c <- t
			w.sent = true
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

func (r *run) readLoadgenStats() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.cl.Gather(ctx, r.client, path.Join(rundir.LoadgenDir, rundir.StatsFile)); err != nil {
		r.warn("fetch load generator stats: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, rundir.LoadgenDir, rundir.StatsFile))
	if err != nil {
		return
	}
	var st rundir.ProbeStats
	if err := json.Unmarshal(b, &st); err != nil {
		r.warn("load generator stats: %v", err)
		return
	}
	r.updateManifest(func(m *rundir.Manifest) { m.Loadgen = &st })
	// A load generator that cannot keep its schedule still charges every probe from its intended
	// time, but the lag is then the client's own, not the cluster's: say so.
	if st.SendLag.MaxNs > int64(maxSendLag) {
		r.warn("the load generator fell behind its schedule: send lag p99 %s, max %s, %d of %d probes late (%d of them held while no leader could take them, %d late outside those holds); those latencies include the client's own delay",
			time.Duration(st.SendLag.P99Ns).Round(time.Microsecond), time.Duration(st.SendLag.MaxNs).Round(time.Microsecond), st.SendLag.Late, st.Scheduled,
			st.SendLag.Late-st.SendLag.LateConnected, st.SendLag.LateConnected)
	}
}

// maxSendLag is the schedule slip above which a run is flagged.
const maxSendLag = 10 * time.Millisecond

// loadgenControl posts to the load generator's control API on the client node.
func (r *run) loadgenControl(ctx context.Context, path string, body any) error {
	b, _ := json.Marshal(body)
	return r.loadgenDo(ctx, http.MethodPost, path, bytes.NewReader(b), nil)
}

func (r *run) loadgenDo(ctx context.Context, method, path string, body io.Reader, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addr := r.loadgenAddr()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return r.cl.Transport().Dial(ctx, r.client, addr)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, "http://loadgen"+path, body)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("load generator control %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("load generator control %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

func (r *run) stopLoadgen(ctx context.Context) {
	if err := r.loadgenControl(ctx, "/stop", struct{}{}); err != nil {
		r.log.Warn("stop load generator", "err", err)
	}
}

// loadgenAddr is the load generator's control socket on the client node, in the client agent's
// 0700 folder: only the controller reaches it.
func (r *run) loadgenAddr() string {
	return r.cl.ControlSocket(r.client, "loadgen.sock")
}
