package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/supervisor"
)

// The host's end of the channel to a running sandbox, shared by every backend:
// values delivered to a waiting supervisor (or service wrapper) and files of the
// sandbox's state followed, each through an exec of `airlock supervise …`, over
// the Docker Engine's exec API or a Pod's.

// Execer runs a command in a container of a sandbox with the given streams (nil:
// not attached; stdin is closed after its end) until it exits or ctx ends, and
// returns its exit code.
type Execer interface {
	ExecIn(ctx context.Context, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// DeliverValues hands values to the process waiting on SecretsSocketIn inside a
// running container: a non-TTY exec of `supervise deliver` whose stdin carries
// them. The exec's configuration holds only the command; nothing is written to any
// disk. No values (an empty object) release a supervisor that holds (Spec.Hold).
func DeliverValues(ctx context.Context, ex Execer, containerID string, values map[string]string) error {
	if values == nil {
		values = map[string]string{}
	}
	payload, err := json.Marshal(values)
	if err != nil {
		return failed("cannot encode the secret values")
	}
	out := &limitedBuffer{n: 64 << 10}
	code, err := ex.ExecIn(ctx, containerID, []string{SupervisorIn, "supervise", "deliver", "--socket", SecretsSocketIn},
		bytes.NewReader(payload), out, out)
	if err != nil {
		return failed("cannot deliver the secret values: %v", err)
	}
	if code != 0 {
		return failed("cannot deliver the secret values: %s", bytes.TrimSpace(out.bytes()))
	}
	return nil
}

// ExecArgv is the command line of an exec of req in a running sandbox: `airlock
// supervise exec`, which gives CMD the sandbox's [env] (substituted values
// included) from the supervisor's tmpfs. req.Env values are private too (a token
// from the CLI's environment, or a literal the CLI cannot tell from one): they are
// delivered first, as the stdin of a non-TTY exec of `supervise deliver
// --exec-env` that writes them to a new file with a one-time random name on the
// tmpfs, which `supervise exec --values` reads and removes. So neither the exec's
// configuration (docker inspect, a Pod exec request) nor any process's argv holds
// them, and the exec keeps its own stdin for CMD.
func ExecArgv(ctx context.Context, ex Execer, containerID string, req ExecRequest) ([]string, error) {
	argv := []string{SupervisorIn, "supervise", "exec", "--spec", SpecIn}
	if len(req.Env) > 0 {
		path, err := deliverExecEnv(ctx, ex, containerID, req.Env)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--values", path)
	}
	if req.Workdir != "" {
		argv = append(argv, "-w", req.Workdir)
	}
	return append(append(argv, "--"), req.Cmd...), nil
}

// deliverExecEnv hands env to a new file on the sandbox's tmpfs and returns its path.
func deliverExecEnv(ctx context.Context, ex Execer, containerID string, env []string) (string, error) {
	payload, err := json.Marshal(env)
	if err != nil {
		return "", failed("cannot encode the exec's environment")
	}
	path := RunMount + "/exec-" + rand.Text() + ".json"
	out := &limitedBuffer{n: 64 << 10}
	code, err := ex.ExecIn(ctx, containerID, []string{SupervisorIn, "supervise", "deliver", "--exec-env", path},
		bytes.NewReader(payload), out, out)
	if err != nil {
		return "", failed("cannot deliver the exec's environment: %v", err)
	}
	if code != 0 {
		msg := bytes.TrimSpace(out.bytes())
		if bytes.Contains(msg, []byte("unknown flag: --exec-env")) {
			// Never fall back to a command line: the values would show there.
			return "", failed("cannot deliver the exec's environment: the sandbox runs the supervisor of an older airlock, which cannot take -e values privately; recreate the sandbox (airlock down, then airlock up -d) or pass none")
		}
		return "", failed("cannot deliver the exec's environment: %s", msg)
	}
	return path, nil
}

// TailFile streams a file of a running sandbox from a byte offset through an exec
// of `supervise tail` (in the primary), with what is appended when follow, until
// the exec ends, ctx ends or the stream is closed. report names the file in the
// sandbox where the follower reports how far it read ("" for none).
func TailFile(ctx context.Context, ex Execer, containerID, file string, from int64, follow bool, report string) (io.ReadCloser, error) {
	cmd := []string{SupervisorIn, "supervise", "tail"}
	if follow {
		cmd = append(cmd, "--follow")
	}
	cmd = append(cmd, "--from", strconv.FormatInt(from, 10))
	if report != "" {
		cmd = append(cmd, "--report", report)
	}
	return tailExec(ctx, ex, containerID, file, append(cmd, "--", file))
}

// TailLog streams a daemon log of a running sandbox through an exec of
// `supervise tail`: from its start, or with lines >= 0 from its last lines
// (found in the sandbox by reading backwards from the end, supervisor.TailStart),
// then with follow what is appended, until the exec ends, ctx ends or the stream
// is closed. Lines longer than supervisor.MaxLogLineOf(file) are cut in the
// sandbox, so only what is printed crosses the API.
func TailLog(ctx context.Context, ex Execer, containerID, file string, lines int, follow bool) (io.ReadCloser, error) {
	cmd := []string{SupervisorIn, "supervise", "tail", "--max-line", strconv.Itoa(supervisor.MaxLogLineOf(file))}
	if follow {
		cmd = append(cmd, "--follow")
	}
	if lines >= 0 {
		cmd = append(cmd, "--lines", strconv.Itoa(lines))
	}
	return tailExec(ctx, ex, containerID, file, append(cmd, "--", file))
}

// TailLog is TailLog on the Docker Engine.
func (rt *Runtime) TailLog(ctx context.Context, containerID, file string, lines int, follow bool) (io.ReadCloser, error) {
	return TailLog(ctx, rt, containerID, file, lines, follow)
}

// tailExec runs cmd, an exec of `supervise tail` of file, and returns its output
// after the tail's header.
func tailExec(ctx context.Context, ex Execer, containerID, file string, cmd []string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	errOut := &limitedBuffer{n: 4096}
	go func() {
		code, err := ex.ExecIn(ctx, containerID, cmd, nil, pw, errOut)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit status %d", code)
		}
		pw.CloseWithError(err)
	}()
	closeAll := func() { cancel(); pr.Close() }
	// The Engine writes its own failures (a stopped container, say) into the
	// stream: only output after the tail's header is the file's.
	header := make([]byte, len(supervisor.TailHeader))
	if n, err := io.ReadFull(pr, header); err != nil || string(header) != supervisor.TailHeader {
		closeAll()
		return nil, fmt.Errorf("cannot read %s in the sandbox: %s", file, bytes.TrimSpace(append(header[:n], errOut.bytes()...)))
	}
	return &execStream{Reader: pr, close: closeAll}, nil
}

// ExecIn runs cmd in a container through the Engine's exec API (Execer).
func (rt *Runtime) ExecIn(ctx context.Context, containerID string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	resp, err := rt.Engine.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd: cmd, AttachStdin: stdin != nil, AttachStdout: stdout != nil, AttachStderr: stderr != nil,
	})
	if err != nil {
		return 0, err
	}
	hj, err := rt.Engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, func() { hj.Close() })
	defer stop()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, stdin)
			_ = hj.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if _, err := stdcopy.StdCopy(stdout, stderr, hj.Reader); err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return rt.execExitCode(context.WithoutCancel(ctx), resp.ID)
}
