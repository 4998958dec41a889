package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/paths"
)

// daemonArgs are the flags a started daemon gets.
type daemonArgs struct {
	host    string
	port    int
	token   string
	noToken bool
}

func (d daemonArgs) argv() []string {
	argv := []string{"daemon", "run"}
	if d.host != "" {
		argv = append(argv, "--host", d.host, "--port", fmt.Sprint(d.port))
	}
	if d.token != "" {
		argv = append(argv, "--token", d.token)
	}
	if d.noToken {
		argv = append(argv, "--no-token")
	}
	return argv
}

// daemonClient returns a client of a healthy daemon of this build, starting one
// (or replacing an outdated one, without stopping any sandbox) when needed.
func (a *app) daemonClient(ctx context.Context) (*client.Client, error) {
	p, err := a.paths()
	if err != nil {
		return nil, err
	}
	c := client.New(p.Socket())
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	h, err := c.Health(hctx)
	cancel()
	if err == nil {
		if h.BuildID == BuildID {
			return c, nil
		}
		fmt.Fprintf(a.stderr, "daemon outdated (build %s -> %s), restarting...\n", h.BuildID, BuildID)
		if err := stopDaemon(p, h.PID); err != nil {
			return nil, withCode(ExitAirlock, err)
		}
	}
	if err := a.startDaemon(ctx, p, daemonArgs{}); err != nil {
		return nil, err
	}
	return c, nil
}

// startDaemon starts `airlock daemon run` in the background, detached, and waits
// until it answers; if the child dies first it fails at once with the log path.
func (a *app) startDaemon(ctx context.Context, p *paths.Paths, args daemonArgs) error {
	bin, err := os.Executable()
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot find the airlock binary: %w", err))
	}
	if err := os.MkdirAll(p.DaemonDir(), 0o700); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot create %s: %w", p.DaemonDir(), err))
	}
	logPath := control.LogFile(p)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot open %s: %w", logPath, err))
	}
	defer logf.Close()
	cmd := exec.Command(bin, args.argv()...)
	cmd.Env = append(a.environ(), "AIRLOCK_DAEMON_BACKGROUND=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot start the airlock daemon: %w", err))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := client.New(p.Socket())
	deadline := time.Now().Add(10 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := c.Health(hctx)
		cancel()
		if err == nil && h.PID == cmd.Process.Pid {
			return nil
		}
		select {
		case werr := <-exited:
			// A second daemon that lost the race for the lock exits non-zero;
			// if the winner answers, use it.
			if h, err := c.Health(ctx); err == nil && h.BuildID == BuildID {
				return nil
			}
			return withCode(ExitAirlock, fmt.Errorf("the airlock daemon exited at start (%v); see %s", werr, logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return withCode(ExitAirlock, fmt.Errorf("the airlock daemon did not answer within 10 s; see %s", logPath))
		}
	}
}

// stopDaemon sends SIGTERM, waits up to 5 s, then SIGKILLs (DESIGN §8).
func stopDaemon(p *paths.Paths, pid int) error {
	if pid <= 0 {
		return errors.New("cannot stop the daemon: no pid")
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("cannot stop the daemon (pid %d): %w", pid, err)
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return fmt.Errorf("cannot stop the daemon (pid %d): %w", pid, err)
	}
	gone := func() bool { return syscall.Kill(pid, 0) != nil || isZombie(pid) }
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if gone() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = proc.Signal(syscall.SIGKILL)
	for i := 0; i < 100 && !gone(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func isZombie(pid int) bool {
	state, _, ok := control.ProcessState(pid)
	return !ok || state == "Z"
}

// environ returns the environment for the daemon child: the process's, with the
// variables that place airlock's files taken from the CLI's own view.
func (a *app) environ() []string {
	env := os.Environ()
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "DOCKER_HOST", "PATH", "AIRLOCK_SUPERVISOR_BINARY"} {
		if v, ok := a.getenv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
