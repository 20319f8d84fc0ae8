package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/transport"
)

// loadgenConfig is the load generator's config for this run, written to the client node.
func (r *run) loadgenConfig() loadgen.Config {
	pb := r.pb
	out := r.nodePath(r.client, "loadgen")
	if r.inv.Target == "local" {
		out = filepath.Join(r.dir, "loadgen") // same machine: write straight into the run folder
	}
	return loadgen.Config{
		Servers:      r.clientAddrs(),
		Instruments:  pb.Preload.Instruments,
		StartTimeout: loadgen.Duration(30 * time.Second),
		Preload:      loadgen.PreloadConfig{Orders: loadgen.Count(pb.Preload.Orders), Out: out},
		Probe: loadgen.ProbeConfig{
			Rate: loadgen.Rate(pb.Load.ProbeRate), Duration: loadgen.Duration(pb.Duration),
			Out: out, Control: net.JoinHostPort(loopbackHost(r.client), strconv.Itoa(controlPort)),
		},
	}
}

// loadgenCmd runs `rig loadgen MODE --config FILE` on the client node; it writes the config first.
func (r *run) loadgenCmd(ctx context.Context, mode string, stdout io.Writer) error {
	b, _ := json.MarshalIndent(r.loadgenConfig(), "", "  ")
	local := filepath.Join(r.dir, "loadgen-"+mode+".json")
	if err := os.WriteFile(local, b, 0o644); err != nil {
		return err
	}
	remote := r.nodePath(r.client, "loadgen-"+mode+".json")
	if remote != local {
		if err := r.tr.Upload(ctx, r.client, local, remote, 0o644); err != nil {
			return fmt.Errorf("upload load generator config: %w", err)
		}
	}
	logf, err := os.Create(filepath.Join(r.dir, "loadgen-"+mode+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	var errw io.Writer = logf
	if stdout == nil {
		stdout = logf
	}
	_, err = r.tr.Exec(ctx, r.client, transport.Cmd{Args: []string{r.nodeBinary(r.client), "loadgen", mode, "--config", remote}, Stdout: stdout, Stderr: errw})
	return err
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

// load runs the probe stream for the playbook's duration and the timeline beside it.
func (r *run) load(ctx context.Context) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var lgErr error
	r.loadStart = time.Now()
	r.mark("load_start")
	r.progress("load start: %.0f probes/s for %s", r.pb.Load.ProbeRate, r.pb.Duration)
	wg.Add(1)
	go func() {
		defer wg.Done()
		lgErr = r.loadgenCmd(lctx, "probe", nil)
	}()
	go func() {
		if sleep(lctx, r.pb.Warmup) == nil {
			r.mark("warmup_end")
		}
	}()
	tlErr := r.runTimeline(lctx)
	if tlErr != nil {
		// A broken timeline makes the rest of the run meaningless; stop the load now.
		r.stopLoadgen(ctx)
	}
	wg.Wait()
	r.mark("load_end")
	r.readLoadgenStats()
	if tlErr != nil {
		return tlErr
	}
	if lgErr != nil && ctx.Err() == nil {
		return fmt.Errorf("load generator: %w", lgErr)
	}
	return ctx.Err()
}

func (r *run) readLoadgenStats() {
	b, err := os.ReadFile(filepath.Join(r.dir, "loadgen", "stats.json"))
	if err != nil {
		return
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		r.man.Loadgen = v
		r.saveManifest()
	}
	var st struct {
		Scheduled int64 `json:"scheduled"`
		SendLag   struct {
			MaxNs int64 `json:"max_ns"`
			P99Ns int64 `json:"p99_ns"`
			Late  int64 `json:"late"`
		} `json:"send_lag"`
	}
	// A load generator that cannot keep its schedule still charges every probe from its intended
	// time, but the lag is then the client's own, not the cluster's: say so.
	if json.Unmarshal(b, &st) == nil && st.SendLag.MaxNs > int64(maxSendLag) {
		r.warn("the load generator fell behind its schedule: send lag p99 %s, max %s, %d of %d probes late; those latencies include the client's own delay",
			time.Duration(st.SendLag.P99Ns).Round(time.Microsecond), time.Duration(st.SendLag.MaxNs).Round(time.Microsecond), st.SendLag.Late, st.Scheduled)
	}
}

// maxSendLag is the schedule slip above which a run is flagged.
const maxSendLag = 10 * time.Millisecond

// loadgenControl posts to the load generator's control API on the client node.
func (r *run) loadgenControl(ctx context.Context, path string, body any) error {
	addr := net.JoinHostPort(loopbackHost(r.client), strconv.Itoa(controlPort))
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return r.tr.Dial(ctx, r.client, addr)
	}}}
	defer hc.CloseIdleConnections()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://loadgen"+path, bytes.NewReader(b))
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
	return nil
}

func (r *run) stopLoadgen(ctx context.Context) {
	if err := r.loadgenControl(ctx, "/stop", struct{}{}); err != nil {
		r.log.Warn("stop load generator", "err", err)
	}
}

func (r *run) burst(ctx context.Context, b playbooks.Burst) error {
	return r.loadgenControl(ctx, "/burst", map[string]any{"messages": b.Messages, "every_ns": b.Every.Nanoseconds(), "count": b.Count})
}
