package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// MetricsContentType is the media type of GET /metrics: Prometheus' text
// exposition format, version 0.0.4.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// metricsMax bounds the answer of GET /metrics the client reads.
const metricsMax = 16 << 20

// Metrics returns the daemon's metrics in Prometheus' text exposition format
// (GET /metrics, docs/metrics.md), as the daemon wrote them.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	h := http.Header{}
	h.Set("Accept", "text/plain")
	resp, err := c.sendRaw(ctx, http.MethodGet, "/metrics", nil, h)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, metricsMax+1))
	if err != nil {
		return "", fmt.Errorf("cannot read the daemon's metrics: %w", err)
	}
	if len(b) > metricsMax {
		return "", fmt.Errorf("cannot read the daemon's metrics: more than %d bytes", metricsMax)
	}
	return string(b), nil
}
