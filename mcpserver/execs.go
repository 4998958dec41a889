package mcpserver

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

// Commands' time limits, in seconds.
const (
	defaultRunTimeout = 300
	maxRunTimeout     = 24 * 3600
)

// RunInput is run_command's and start_command's input.
type RunInput struct {
	SandboxID string   `json:"sandbox_id"`
	Argv      []string `json:"argv" jsonschema:"the command and its arguments, run without a shell (use [\"sh\", \"-c\", \"...\"] for one)"`
	Timeout   float64  `json:"timeout_seconds,omitempty" jsonschema:"end it (SIGTERM, then SIGKILL; exit code 124) after this many seconds; default 300 for run_command, none for start_command"`
	Workdir   string   `json:"workdir,omitempty" jsonschema:"its working directory (default: the sandbox's)"`
	Env       []string `json:"env,omitempty" jsonschema:"more environment variables, NAME=value"`
	Stdin     string   `json:"stdin,omitempty" jsonschema:"its whole standard input (run_command only; default empty)"`
}

// RunOutput is run_command's result.
type RunOutput struct {
	ExecID   string `json:"exec_id"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out,omitempty" jsonschema:"its timeout ended it"`
	Note     string `json:"note,omitempty" jsonschema:"what the result left out of its output"`
}

// StartOutput is start_command's result.
type StartOutput struct {
	ExecID    string `json:"exec_id" jsonschema:"read_command_output's exec_id"`
	StartedAt string `json:"started_at"`
}

// OutputInput is read_command_output's input.
type OutputInput struct {
	SandboxID   string  `json:"sandbox_id"`
	ExecID      string  `json:"exec_id"`
	StdoutFrom  int64   `json:"stdout_from,omitempty" jsonschema:"the byte of stdout to read from (a previous result's stdout_next)"`
	StderrFrom  int64   `json:"stderr_from,omitempty" jsonschema:"the byte of stderr to read from (a previous result's stderr_next)"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds for the command to end first"`
}

// OutputResult is read_command_output's result.
type OutputResult struct {
	Running    bool   `json:"running"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	StdoutNext int64  `json:"stdout_next" jsonschema:"stdout_from for the next read"`
	StderrNext int64  `json:"stderr_next" jsonschema:"stderr_from for the next read"`
	More       bool   `json:"more,omitempty" jsonschema:"there is more output than this result holds: read again from the _next offsets"`
	Note       string `json:"note,omitempty"`
}

func (s *server) addExecTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "run_command",
		Title: "Run a command",
		Description: "Run a command in a ready sandbox and wait for it: its exit code, stdout and stderr " +
			"(each cut to its first and last 32 KiB beyond 64 KiB, with a note; control characters escaped).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.run)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "start_command",
		Title:       "Start a command in the background",
		Description: "Start a command in a ready sandbox and return at once with its exec_id; it runs to its end with no client. Read its output and status with read_command_output.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, s.start)
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "read_command_output",
		Title: "Read a background command's output",
		Description: "A background command's status (running, exit code) and its output so far from the offsets given, " +
			"at most 64 KiB per stream a call (more: read again from stdout_next and stderr_next).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.output)
}

func (s *server) execRequest(what string, in RunInput, background bool) (*client.ExecRequest, error) {
	if err := need(what, "sandbox_id", in.SandboxID); err != nil {
		return nil, err
	}
	if len(in.Argv) == 0 || in.Argv[0] == "" {
		return nil, argError(what, "argv is required: the command and its arguments")
	}
	if in.Timeout < 0 || in.Timeout > maxRunTimeout {
		return nil, argError(what, "timeout_seconds is %g: want 0 to %d", in.Timeout, maxRunTimeout)
	}
	req := &client.ExecRequest{Cmd: in.Argv, Env: in.Env, Workdir: in.Workdir, ExecControl: client.ExecControl{Timeout: in.Timeout, Background: background}}
	if in.Stdin != "" {
		if background {
			return nil, argError(what, "a background command takes no stdin")
		}
		req.Stdin = []byte(in.Stdin)
	}
	return req, nil
}

func (s *server) run(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	what := "run " + quoteArgv(in.Argv) + " in " + termsafe.Line(in.SandboxID)
	if in.Timeout == 0 {
		in.Timeout = defaultRunTimeout
	}
	req, err := s.execRequest(what, in, false)
	if err != nil {
		return nil, RunOutput{}, err
	}
	stdout, stderr := newHeadTail(MaxStream), newHeadTail(MaxStream)
	ex, code, err := s.c.ExecStream(ctx, in.SandboxID, req, stdout, stderr)
	if err != nil {
		return nil, RunOutput{}, toolError(what, err)
	}
	out := RunOutput{ExitCode: code, Stdout: stdout.String(), Stderr: stderr.String()}
	var notes []string
	if ex != nil {
		// The stream's record is the one of its start: the end's says
		// whether its timeout ended it and whether the daemon cut its output.
		if fin, err := s.c.GetExec(ctx, in.SandboxID, ex.ID); err == nil {
			ex = fin
		}
		out.ExecID, out.TimedOut = termsafe.Line(ex.ID), ex.TimedOut
		if ex.Truncated {
			notes = append(notes, "the daemon cut this command's output at its own limit (artifacts.exec_output_max)")
		}
	}
	notes = append(notes, cutNote("stdout", stdout.cut(), stdout.total), cutNote("stderr", stderr.cut(), stderr.total))
	out.Note = joinNotes(notes...)
	return nil, out, nil
}

func (s *server) start(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, StartOutput, error) {
	what := "start " + quoteArgv(in.Argv) + " in " + termsafe.Line(in.SandboxID)
	req, err := s.execRequest(what, in, true)
	if err != nil {
		return nil, StartOutput{}, err
	}
	ex, err := s.c.Exec(ctx, in.SandboxID, req)
	if err != nil {
		return nil, StartOutput{}, toolError(what, err)
	}
	return nil, StartOutput{ExecID: termsafe.Line(ex.ID), StartedAt: ex.StartedAt.UTC().Format(time.RFC3339Nano)}, nil
}

func (s *server) output(ctx context.Context, _ *mcp.CallToolRequest, in OutputInput) (*mcp.CallToolResult, OutputResult, error) {
	what := "read the output of " + termsafe.Line(in.ExecID) + " in " + termsafe.Line(in.SandboxID)
	if err := need(what, "sandbox_id", in.SandboxID); err != nil {
		return nil, OutputResult{}, err
	}
	if err := need(what, "exec_id", in.ExecID); err != nil {
		return nil, OutputResult{}, err
	}
	if in.StdoutFrom < 0 || in.StderrFrom < 0 {
		return nil, OutputResult{}, argError(what, "an offset is negative")
	}
	var ex *client.Exec
	var err error
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds*float64(time.Second)))
		ex, err = s.c.WaitExec(wctx, in.SandboxID, in.ExecID)
		cancel()
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = nil // still running: say so below
			ex = nil
		}
	}
	if err == nil && ex == nil {
		ex, err = s.c.GetExec(ctx, in.SandboxID, in.ExecID)
	}
	if err != nil {
		return nil, OutputResult{}, toolError(what, err)
	}
	// The record first: once it says the command ended, the output read after
	// it is whole.
	out := OutputResult{Running: ex.FinishedAt == nil, ExitCode: ex.ExitCode, TimedOut: ex.TimedOut}
	var notes []string
	for _, st := range []struct {
		name string
		from int64
		text *string
		next *int64
	}{{client.OutputStdout, in.StdoutFrom, &out.Stdout, &out.StdoutNext}, {client.OutputStderr, in.StderrFrom, &out.Stderr, &out.StderrNext}} {
		b, more, err := s.readOutput(ctx, in.SandboxID, in.ExecID, st.name, st.from)
		if err != nil {
			return nil, OutputResult{}, toolError(what, err)
		}
		*st.text, *st.next = safeText(b), st.from+int64(len(b))
		if more {
			out.More = true
			notes = append(notes, st.name+": more than this result holds, from byte "+strconv.FormatInt(*st.next, 10))
		}
	}
	if ex.Truncated {
		notes = append(notes, "the daemon cut this command's output at its own limit (artifacts.exec_output_max)")
	}
	out.Note = joinNotes(notes...)
	return nil, out, nil
}

// readOutput reads at most MaxStream bytes of an exec's stream from byte
// from, whole runes only; more says there is more after them now.
func (s *server) readOutput(ctx context.Context, id, execID, stream string, from int64) ([]byte, bool, error) {
	r, err := s.c.ExecOutput(ctx, id, execID, stream, from, false)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, MaxStream+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) <= MaxStream {
		return b, false, nil
	}
	return trimRuneEnd(b[:MaxStream]), true, nil
}

func quoteArgv(argv []string) string {
	if len(argv) == 0 {
		return "a command"
	}
	s := strings.Join(argv, " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return termsafe.Line(strings.ToValidUTF8(s, "?"))
}

func joinNotes(notes ...string) string {
	var kept []string
	for _, n := range notes {
		if n != "" {
			kept = append(kept, n)
		}
	}
	return strings.Join(kept, "; ")
}
