package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

// The resources' URI templates.
const (
	EventsTemplate = "airlock://sandboxes/{id}/events"
	LogsTemplate   = "airlock://sandboxes/{id}/logs/{daemon}"
)

// maxLogRead bounds what a logs resource reads of a log before keeping its
// end.
const maxLogRead = 16 << 20

func (s *server) addResources(srv *mcp.Server) {
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "sandbox-events",
		Title:       "A sandbox's events",
		Description: "The sandbox's ordered event history (created, started, daemons ready, execs, stopped, …), one JSON object a line, the newest 64 KiB.",
		MIMEType:    client.NDJSON,
		URITemplate: EventsTemplate,
	}, s.readEvents)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "daemon-logs",
		Title:       "A sandbox daemon's log",
		Description: "A daemon's stdout and stderr in a sandbox (every run, across restarts), in order, the newest 64 KiB, control characters escaped. The daemons are create_sandbox's and list_sandboxes' daemons.",
		MIMEType:    "text/plain",
		URITemplate: LogsTemplate,
	}, s.readLogs)
}

// parseURI takes the sandbox ID (and the daemon's name) out of a resource URI.
func parseURI(uri string) (id, rest string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "airlock" || u.Host != "sandboxes" {
		return "", "", mcp.ResourceNotFoundError(uri)
	}
	parts := strings.SplitN(strings.TrimPrefix(u.Path, "/"), "/", 2)
	if len(parts) != 2 || parts[0] == "" {
		return "", "", mcp.ResourceNotFoundError(uri)
	}
	return parts[0], parts[1], nil
}

func (s *server) readEvents(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, rest, err := parseURI(uri)
	if err != nil || rest != "events" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	evs, err := s.c.History(ctx, id, 0)
	if err != nil {
		return nil, resourceError(uri, "read the events of "+termsafe.Line(id), err)
	}
	var buf bytes.Buffer
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		buf.Write(termsafe.JSON(b))
		buf.WriteByte('\n')
	}
	kept, cut := lastBytes(buf.Bytes(), MaxStream)
	text := string(kept)
	if cut > 0 {
		text = fmt.Sprintf("{\"note\":\"the oldest %d of %d bytes of events cut\"}\n", cut, buf.Len()) + text
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: client.NDJSON, Text: text}}}, nil
}

func (s *server) readLogs(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, rest, err := parseURI(uri)
	daemon, ok := strings.CutPrefix(rest, "logs/")
	if err != nil || !ok || daemon == "" || strings.Contains(daemon, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	what := "read the log of " + termsafe.Line(daemon) + " in " + termsafe.Line(id)
	r, err := s.c.DaemonLog(ctx, id, daemon, client.LogOptions{Stream: client.StreamBoth, Tail: -1})
	if err != nil {
		return nil, resourceError(uri, what, err)
	}
	defer r.Close()
	var buf bytes.Buffer
	lim := &io.LimitedReader{R: r, N: maxLogRead}
	if err := client.SplitLog(lim, &buf, &buf); err != nil {
		return nil, resourceError(uri, what, err)
	}
	kept, cut := lastBytes(buf.Bytes(), MaxStream)
	text := safeText(kept)
	switch {
	case lim.N == 0:
		text = fmt.Sprintf("[airlock: only the first %d bytes of the log read; its last %d kept]\n", maxLogRead, len(kept)) + text
	case cut > 0:
		text = fmt.Sprintf("[airlock: the oldest %d of %d bytes cut]\n", cut, buf.Len()) + text
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
}

// resourceError is a failed read: not found when the daemon does not know
// the sandbox, else the daemon's words.
func resourceError(uri, what string, err error) error {
	if errors.Is(err, client.ErrSandboxNotFound) {
		return mcp.ResourceNotFoundError(uri)
	}
	return toolError(what, err)
}
