package backend

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	if req.ID != "" {
		// Not a value to hide: the exec's process records its PID under it
		// (supervisor.RecordExecPID); an older supervisor sets the variable alone.
		argv = append(argv, "-e", supervisor.ExecIDEnv+"="+req.ID)
	}
	if req.Workdir != "" {
		argv = append(argv, "-w", req.Workdir)
	}
	if req.TTY && req.Height > 0 && req.Width > 0 {
		argv = append(argv, "-e", supervisor.TTYSizeEnv+"="+supervisor.TTYSize(req.Width, req.Height))
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

// WatchParkedStatus is WatchParked on any backend that runs execs.
func WatchParkedStatus(ctx context.Context, ex Execer, containerID string, parked func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Without reporting what it read (StatusReadIn): the supervisor of the
	// run that claims it must not wait at its exit for a follower gone.
	rc, err := TailFile(ctx, ex, containerID, supervisor.StatusFile, 0, true, "")
	if err != nil {
		return failed("cannot follow the pooled sandbox's status: %v", err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), supervisor.MaxStatusLine)
	for sc.Scan() {
		var ev supervisor.StatusEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case supervisor.KindSupervisorParked:
			parked()
		case supervisor.KindSupervisorFailed:
			return failed("the pooled sandbox failed to start: %s", ev.Reason)
		case supervisor.KindDaemonExited, supervisor.KindDaemonGaveUp:
			return failed("the pooled sandbox's daemon %s exited", ev.Daemon)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return failed("the pooled sandbox stopped")
}

// ClaimDelivery is the delivery of a claim: the run's values by key path (of
// c.Manifest, which is required), and the claim itself under
// supervisor.ClaimKey.
func ClaimDelivery(c Claim) (map[string]string, error) {
	r := c.Manifest
	if r == nil {
		return nil, failed("cannot claim a parked sandbox without the run's manifest")
	}
	req := &Request{Command: c.Command, Env: c.Env, EnvSecrets: c.EnvSecrets, Workdir: c.Workdir}
	sc := supervisor.Claim{
		Argv: c.Command, Idle: c.Idle, Cwd: Workdir(req, r), Quiet: c.Quiet, EndMarker: c.EndMarker, Stdin: c.Stdin,
	}
	// The run's own entries (-e): the manifest's are in the parked spec.
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		sc.Env = append(sc.Env, supervisor.EnvEntry{Name: k, Value: &v})
	}
	for _, k := range slices.Sorted(maps.Keys(c.EnvSecrets)) {
		sc.Env = append(sc.Env, supervisor.EnvEntry{Name: k, Secret: envSecretKey(k)})
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, failed("cannot encode the claim: %v", err)
	}
	values := secretValues(r)
	for k, v := range c.EnvSecrets {
		values[envSecretKey(k)] = v
	}
	values[supervisor.ClaimKey] = string(b)
	return values, nil
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

type execStream struct {
	io.Reader
	close func()
}

func (s *execStream) Close() error { s.close(); return nil }
