package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// StartEngine writes the config on the node and starts the engine (an error if one is running).
// The new pid is in EngineStatus.
func (c *Client) StartEngine(ctx context.Context, req StartRequest) error {
	return c.do(ctx, http.MethodPost, "/engine/start", req, nil)
}

// Signal sends a signal (KILL, TERM, STOP, CONT, ...) to the engine's process group.
func (c *Client) Signal(ctx context.Context, signal string) error {
	return c.do(ctx, http.MethodPost, "/engine/signal", EngineSignalRequest{Signal: signal}, nil)
}

// Relaunch starts the engine again with the same config in the same folder; the previous
// process must have exited.
func (c *Client) Relaunch(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/engine/relaunch", nil, nil)
}

// StopEngine sends TERM and KILLs after the agent's default grace (10 s). Stopping an engine
// that is not running, or was never started, is not an error.
func (c *Client) StopEngine(ctx context.Context) error {
	_, err := c.StopEngineWithin(ctx, 0)
	return err
}

// StopEngineWithin is StopEngine with its own grace (0: the default), returning how the engine
// ended (nil if none was ever started).
func (c *Client) StopEngineWithin(ctx context.Context, grace time.Duration) (*rundir.ExitStatus, error) {
	var req EngineStopRequest
	if grace > 0 {
		req.Grace = grace.String()
	}
	var out EngineStopResponse
	err := c.do(ctx, http.MethodPost, "/engine/stop", req, &out)
	return out.Exit, err
}

// EngineStatus returns the process state and the engine's last polled status.
func (c *Client) EngineStatus(ctx context.Context) (EngineState, error) {
	var out EngineState
	err := c.do(ctx, http.MethodGet, "/engine/status", nil, &out)
	return out, err
}

// Transitions returns the transitions after since; when there are none it waits up to wait for
// one (a long poll; an empty answer after wait is not an error). Pass the last Seq seen as the
// next since.
func (c *Client) Transitions(ctx context.Context, since uint64, wait time.Duration) ([]rundir.Transition, error) {
	q := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var out TransitionsResponse
	err := c.do(ctx, http.MethodGet, "/engine/transitions?"+q.Encode(), nil, &out)
	return out.Transitions, err
}

// EngineAdmin POSTs to the engine's admin API through the agent (path: /snapshot or
// /step-down) and returns the engine's answer.
func (c *Client) EngineAdmin(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodPost, "/engine/proxy?"+url.Values{"path": {path}}.Encode(), nil, &buf)
	return buf.Bytes(), err
}

// EngineTransport asks the engine for its transport counters now (GET engine.AdminTransport).
func (c *Client) EngineTransport(ctx context.Context) (engine.TransportCounters, error) {
	var tc engine.TransportCounters
	err := c.do(ctx, http.MethodGet, "/engine/proxy?"+url.Values{"path": {engine.AdminTransport}}.Encode(), nil, &tc)
	return tc, err
}

// EngineStatusHash asks the engine itself, now, for its status including the state hash
// and, from the reference engine, every UDP burst it received (GET /status?hash=1&udp=1),
// unlike EngineStatus which returns the agent's last poll.
func (c *Client) EngineStatusHash(ctx context.Context) (engine.Status, error) {
	var st engine.Status
	err := c.do(ctx, http.MethodGet, "/engine/proxy?"+url.Values{"path": {engine.AdminStatus}, "hash": {"1"}, "udp": {"1"}}.Encode(), nil, &st)
	return st, err
}

// EngineStatusRaw returns the engine's GET /status body as it sent it (withHash: ?hash=1), for
// checking its fields and their JSON types.
func (c *Client) EngineStatusRaw(ctx context.Context, withHash bool) ([]byte, error) {
	q := url.Values{"path": {engine.AdminStatus}}
	if withHash {
		q.Set("hash", "1")
	}
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodGet, "/engine/proxy?"+q.Encode(), nil, &buf)
	return buf.Bytes(), err
}

// EngineOrders asks the engine which single orders it applied (GET /orders, engine.HeldOrders).
func (c *Client) EngineOrders(ctx context.Context) (engine.HeldOrders, error) {
	var h engine.HeldOrders
	err := c.do(ctx, http.MethodGet, "/engine/proxy?"+url.Values{"path": {engine.AdminOrders}}.Encode(), nil, &h)
	return h, err
}

// EngineMetrics returns the engine's GET /metrics (Prometheus text).
func (c *Client) EngineMetrics(ctx context.Context) ([]byte, error) {
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodGet, "/engine/proxy?"+url.Values{"path": {engine.AdminMetrics}}.Encode(), nil, &buf)
	return buf.Bytes(), err
}

// EngineTrace returns the engine's GET /trace: its flight recorder's window, a Go execution
// trace (recording.ReadGoTrace reads it).
func (c *Client) EngineTrace(ctx context.Context) ([]byte, error) {
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodGet, "/engine/proxy?"+url.Values{"path": {engine.AdminTrace}}.Encode(), nil, &buf)
	return buf.Bytes(), err
}

// ClockSample is one reading of the node's clock against ours.
type ClockSample struct {
	Node   time.Time     // the node's clock
	Local  time.Time     // our clock halfway through the round trip
	RTT    time.Duration // round trip of the request
	Offset time.Duration // Node - Local: add to our times to get the node's
}

// Clock reads the node's clock once.
func (c *Client) Clock(ctx context.Context) (ClockSample, error) {
	var out ClockResponse
	sent := time.Now()
	if err := c.do(ctx, http.MethodGet, "/clock", nil, &out); err != nil {
		return ClockSample{}, err
	}
	rtt := time.Since(sent) // monotonic
	local := sent.Add(rtt / 2)
	return ClockSample{Node: out.Now, Local: local, RTT: rtt, Offset: out.Now.Sub(local)}, nil
}

// ClockOffset reads the node's clock n times and keeps the sample with the shortest round trip,
// whose midpoint estimate is the tightest (error at most RTT/2).
func (c *Client) ClockOffset(ctx context.Context, n int) (ClockSample, error) {
	if n < 1 {
		n = 1
	}
	var best ClockSample
	for i := 0; i < n; i++ {
		s, err := c.Clock(ctx)
		if err != nil {
			return ClockSample{}, err
		}
		if i == 0 || s.RTT < best.RTT {
			best = s
		}
	}
	return best, nil
}

// Collect streams the node folder as a gzip'd tar into w; by default engine data files over
// DefaultCollectMaxFile are left out (CollectOptions).
func (c *Client) Collect(ctx context.Context, w io.Writer, opts CollectOptions) error {
	q := url.Values{}
	if opts.All {
		q.Set("all", "1")
	}
	if opts.MaxFile > 0 {
		q.Set("max_file", strconv.FormatInt(opts.MaxFile, 10))
	}
	path := "/collect"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if w == nil {
		return errors.New("collect: nil writer")
	}
	return c.do(ctx, http.MethodGet, path, nil, w)
}

// CollectInto fetches the node folder and unpacks it into dir.
func (c *Client) CollectInto(ctx context.Context, dir string, opts CollectOptions) error {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := c.Collect(ctx, pw, opts)
		pw.CloseWithError(err)
		errc <- err
	}()
	err := ExtractCollect(pr, dir)
	pr.CloseWithError(err) // unblocks the download if extraction failed first
	if derr := <-errc; derr != nil {
		return fmt.Errorf("collect %s: %w", c.Node, derr)
	}
	if err != nil {
		return fmt.Errorf("collect %s: %w", c.Node, err)
	}
	return nil
}
