package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"unicode/utf8"
)

// NDJSON is the media type of a streamed exec's answer: one ExecFrame per line.
const NDJSON = "application/x-ndjson"

// ExecFrame is one line of a streamed exec (POST /v1/sandboxes/{id}/execs with
// Accept: application/x-ndjson): first the exec record, then the command's
// output as it comes, then its exit code. Exactly one field group is set.
type ExecFrame struct {
	// Exec is the first frame: the exec's record (no output paths).
	Exec *Exec `json:"exec,omitempty"`
	// Stream is "stdout" or "stderr" for an output frame: Data holds the bytes
	// when they are valid UTF-8, else DataB64 (base64 in JSON).
	Stream  string `json:"stream,omitempty"`
	Data    string `json:"data,omitempty"`
	DataB64 []byte `json:"data_b64,omitempty"`
	// ExitCode is the last frame: the command's code (125 when it could not
	// run; its reason was the last stderr frame).
	ExitCode *int `json:"exit_code,omitempty"`
}

// Bytes returns an output frame's bytes.
func (f *ExecFrame) Bytes() []byte {
	if f.DataB64 != nil {
		return f.DataB64
	}
	return []byte(f.Data)
}

// OutputFrame is the frame that carries p on stream.
func OutputFrame(stream string, p []byte) ExecFrame {
	if utf8.Valid(p) {
		return ExecFrame{Stream: stream, Data: string(p)}
	}
	return ExecFrame{Stream: stream, DataB64: append([]byte(nil), p...)}
}

// ExecStream runs a command in a ready sandbox with its output streamed back:
// stdout and stderr are written as it comes, and its exit code returned.
func (c *Client) ExecStream(ctx context.Context, id string, req *ExecRequest, stdout, stderr io.Writer) (*Exec, int, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot encode the request: %w", err)
	}
	resp, err := c.sendRaw(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/execs", bytes.NewReader(b),
		http.Header{"Content-Type": {"application/json"}, "Accept": {NDJSON}})
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ex *Exec
	for sc.Scan() {
		var f ExecFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return ex, 0, fmt.Errorf("cannot decode a frame of the exec's stream: %w", err)
		}
		switch {
		case f.Exec != nil:
			ex = f.Exec
		case f.ExitCode != nil:
			return ex, *f.ExitCode, nil
		case f.Stream == "stdout" && stdout != nil:
			if _, err := stdout.Write(f.Bytes()); err != nil {
				return ex, 0, err
			}
		case f.Stream == "stderr" && stderr != nil:
			if _, err := stderr.Write(f.Bytes()); err != nil {
				return ex, 0, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return ex, 0, fmt.Errorf("cannot read the exec's stream: %w", err)
	}
	return ex, 0, fmt.Errorf("cannot read the exec's stream: it ended before the exit code")
}
