package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// DialFunc opens a connection to the agent; the controller passes the transport's Dial, so the
// same client works over a local socket and an SSH tunnel.
type DialFunc func(ctx context.Context) (net.Conn, error)

// ErrStranger is an answer from an agent that is not the one the client is for: another node,
// or an agent another run holds. The client refuses it.
var ErrStranger = errors.New("answer from a stranger agent")

// ErrLeaseLapsed is the agent's answer to a run whose lease lapsed (410): it has stopped that
// run's engine and reverted its tuning, and refuses the run from then on (but for its reads,
// until another run claims the agent).
var ErrLeaseLapsed = errors.New("the run's lease on this agent lapsed")

// ErrConflict classifies a 409 answer: the agent or its engine is busy with something else (an
// engine's snapshot while a step-down's election is still settling; another run's lease). A
// caller that knows the conflict passes may try again.
var ErrConflict = errors.New("conflict")

// Client talks to one agent. With Run set it sends the run's id with every request (the agent
// refuses it while another run holds its lease) and checks the identity on every answer: the
// node must be Node, and the lease holder Run or nobody.
type Client struct {
	Node string
	Run  string
	http *http.Client
}

// NewClient returns a client for the agent of node, reached through dial.
func NewClient(node string, dial DialFunc) *Client {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{Node: node, http: &http.Client{Transport: tr}}
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Ping checks the agent is up and returns its identity and clock.
func (c *Client) Ping(ctx context.Context) (PingResponse, error) {
	var out PingResponse
	err := c.do(ctx, http.MethodGet, "/ping", nil, &out)
	return out, err
}

// do sends one request; in and out are JSON bodies (either may be nil). When out is an
// io.Writer, the body is copied there raw.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+APIVersion+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Run != "" {
		req.Header.Set(HeaderRun, c.Run)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("agent %s %s %s: %w", c.Node, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e apiError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = string(b)
		}
		err := fmt.Errorf("agent %s %s %s: %s: %s", c.Node, method, path, resp.Status, e.Error)
		switch resp.StatusCode {
		case http.StatusGone:
			err = lapsedError{err}
		case http.StatusConflict:
			err = conflictError{err}
		}
		return err
	}
	// An answer that did not fail must still come from the agent this client is for.
	if err := c.checkIdentity(resp); err != nil {
		return fmt.Errorf("agent %s %s %s: %w", c.Node, method, path, err)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case io.Writer:
		_, err = io.Copy(o, resp.Body)
		return err
	default:
		return json.NewDecoder(resp.Body).Decode(out)
	}
}

func (c *Client) checkIdentity(resp *http.Response) error {
	node, run := resp.Header.Get(HeaderNode), resp.Header.Get(HeaderRun)
	if c.Node != "" && node != c.Node {
		return fmt.Errorf("%w: it is the agent of node %q", ErrStranger, node)
	}
	if c.Run != "" && run != "" && run != c.Run {
		return fmt.Errorf("%w: it is held by run %s, not by run %s", ErrStranger, run, c.Run)
	}
	return nil
}

// Lease claims or renews the agent's lease for c.Run: until it lapses (ttl without a renewal)
// the agent answers no other run, and when it lapses the agent undoes the run by itself.
func (c *Client) Lease(ctx context.Context, ttl time.Duration) (LeaseState, error) {
	var out LeaseState
	err := c.do(ctx, http.MethodPost, "/lease", LeaseRequest{Run: c.Run, TTL: ttl.String()}, &out)
	return out, err
}

// Release gives the lease back at the end of the run (nothing is undone).
func (c *Client) Release(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/lease?run="+url.QueryEscape(c.Run), nil, nil)
}

// LeaseState returns the agent's lease and its last lapse.
func (c *Client) LeaseState(ctx context.Context) (LeaseState, error) {
	var out LeaseState
	err := c.do(ctx, http.MethodGet, "/lease", nil, &out)
	return out, err
}

// conflictError keeps the agent's own words and matches ErrConflict.
type conflictError struct{ error }

func (e conflictError) Is(target error) bool { return target == ErrConflict }

// lapsedError keeps the agent's own words and matches ErrLeaseLapsed.
type lapsedError struct{ error }

func (e lapsedError) Is(target error) bool { return target == ErrLeaseLapsed }
