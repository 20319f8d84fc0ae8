package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// DialFunc opens a connection to the agent; the controller passes the transport's Dial, so the
// same client works over a local socket and an SSH tunnel.
type DialFunc func(ctx context.Context) (net.Conn, error)

// Client talks to one agent.
type Client struct {
	Node string
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
		return fmt.Errorf("agent %s %s %s: %s: %s", c.Node, method, path, resp.Status, e.Error)
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
