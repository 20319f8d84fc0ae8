package agent

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/tune"
)

// Facts returns the node's facts (kernel, CPU, memory, THP, block devices, load, instance).
func (c *Client) Facts(ctx context.Context) (facts.Facts, error) {
	var out facts.Facts
	err := c.do(ctx, http.MethodGet, "/facts", nil, &out)
	return out, err
}

// DiskSpace reports the free and total bytes of the filesystem holding path on the node
// (relative: in the agent's folder; it need not exist yet).
func (c *Client) DiskSpace(ctx context.Context, path string) (facts.Space, error) {
	var out facts.Space
	err := c.do(ctx, http.MethodGet, "/facts/space?"+url.Values{"path": {path}}.Encode(), nil, &out)
	return out, err
}

// Tune applies a profile on the node: prior values are recorded on the node before any change
// and every setting is read back; an error names each setting that did not take.
func (c *Client) Tune(ctx context.Context, p tune.Profile) (tune.Report, error) {
	var out tune.Report
	err := c.do(ctx, http.MethodPost, "/tune", TuneRequest{Profile: p}, &out)
	return out, err
}

// TuneState returns the recorded prior values and the applied settings as read back now.
func (c *Client) TuneState(ctx context.Context) (TuneState, error) {
	var out TuneState
	err := c.do(ctx, http.MethodGet, "/tune", nil, &out)
	return out, err
}

// Revert restores every recorded prior value (no changes when nothing was recorded).
func (c *Client) Revert(ctx context.Context) (tune.Report, error) {
	var out tune.Report
	err := c.do(ctx, http.MethodPost, "/tune/revert", nil, &out)
	return out, err
}

// StartSamples starts recording OS samples on the node as NDJSON.
func (c *Client) StartSamples(ctx context.Context, req SamplesRequest) (SamplesInfo, error) {
	var out SamplesInfo
	err := c.do(ctx, http.MethodPost, "/samples", req, &out)
	return out, err
}

// StopSamples stops a sampler; its file stays readable.
func (c *Client) StopSamples(ctx context.Context, name string) (SamplesInfo, error) {
	var out SamplesInfo
	err := c.do(ctx, http.MethodDelete, "/samples/"+url.PathEscape(name), nil, &out)
	return out, err
}

// ListSamples lists the samplers this agent started.
func (c *Client) ListSamples(ctx context.Context) ([]SamplesInfo, error) {
	var out []SamplesInfo
	err := c.do(ctx, http.MethodGet, "/samples", nil, &out)
	return out, err
}

// ReadSamples copies the NDJSON recorded so far to w (parse it with rundir.ReadSamples).
func (c *Client) ReadSamples(ctx context.Context, name string, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/samples/"+url.PathEscape(name), nil, w)
}
