package temporal

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Probe dials params with the pool's identity and options, runs one health
// check, asks the server its version (GetSystemInfo) and closes the client.
// Unlike Get it needs no Temporal namespace (params.Namespace may be empty)
// and caches nothing, so a TemporalConnection can be checked on its own.
// The server rejects bad credentials even on the health check; whether they
// may use a namespace is left to Get. The RPCs are counted like the pool's.
func (p *Pool) Probe(ctx context.Context, params ConnectionParams) (serverVersion string, err error) {
	opts, err := p.options(params)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := p.dial(ctx, opts)
	if err != nil {
		return "", explain(ctx, params, err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return "", explain(ctx, params, fmt.Errorf("health check: %w", err))
	}
	info, err := c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("get system info: %w", err)
	}
	return info.GetServerVersion(), nil
}
