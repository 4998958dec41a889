package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/internal/proc"
	"github.com/airlock-dev/airlock/paths"
)

// daemonArgs are the listen options of a daemon: the flags of `airlock daemon
// start|run`, or what a running daemon recorded (daemonfiles.Listen).
type daemonArgs struct {
	host      string
	port      int
	token     string // the token itself: --token, AIRLOCK_TOKEN, or recorded
	tokenFile string // --token-file
	noToken   bool   // --unsafe-no-token
	// noTokenRefused: --no-token, refused (a token-less TCP listener only
	// behind --unsafe-no-token).
	noTokenRefused bool
	// tlsCert and tlsKey: --tls-cert, --tls-key (PEM files).
	tlsCert, tlsKey string
	// removeTokenFile: tokenFile is the CLI's hand-off file
	// (daemonfiles.TokenHandoffFile), read once and removed by the daemon.
	removeTokenFile bool
}

func (d daemonArgs) listenGiven() bool {
	return d.host != "" || d.token != "" || d.tokenFile != "" || d.noToken || d.noTokenRefused || d.tlsCert != "" || d.tlsKey != ""
}

func argsOf(l daemonfiles.Listen) daemonArgs {
	return daemonArgs{host: l.Host, port: l.Port, token: l.Token, tokenFile: l.TokenFile, noToken: l.NoToken, tlsCert: l.TLSCert, tlsKey: l.TLSKey}
}

// argv is the command line of a daemon started in the background. The token
// is never on it (any local user can read /proc/PID/cmdline): a token given by
// value goes through the hand-off file, see startDaemon.
func (d daemonArgs) argv() []string {
	return append([]string{"daemon", "run"}, d.listenFlags(true)...)
}

// daemonPaths are the user's paths, with the runtime dir made or checked
// before anything talks to the socket in it: in a directory another user made
// (the /tmp fallback), the "daemon" answering could be theirs.
func (a *app) daemonPaths() (*paths.Paths, error) {
	p, err := a.paths()
	if err != nil {
		return nil, err
	}
	if err := p.EnsureRuntimeDir(); err != nil {
		return nil, withCode(ExitAirlock, err)
	}
	return p, nil
}

// daemonClient returns a client of a healthy daemon of this build, starting one
// (or replacing an outdated one, without stopping any sandbox) when needed.
func (a *app) daemonClient(ctx context.Context) (*client.Client, error) {
	if h := a.remoteHost(); h != "" {
		return a.remoteDaemonClient(ctx, h)
	}
	return a.localDaemonClient(ctx)
}

// localDaemonClient is a client of this user's daemon on this machine, started
// (or replaced by one of this build) when need be.
func (a *app) localDaemonClient(ctx context.Context) (*client.Client, error) {
	p, err := a.daemonPaths()
	if err != nil {
		return nil, err
	}
	c := client.New(p.Socket())
	h, err := a.localHealth(ctx, c)
	var args daemonArgs
	if err == nil {
		if h.BuildID == BuildID {
			return c, nil
		}
		args, err = a.replaceDaemon(p, h)
		if err != nil {
			return nil, err
		}
	}
	if err := a.startDaemon(ctx, p, args); err != nil {
		return nil, err
	}
	return c, nil
}

// healthAnswer is a daemon's answer to a health check.
type healthAnswer struct {
	h   *client.Health
	err error
}

// askHealthEarly asks the local daemon for its health (its build) while the
// command does its own work (a run reads its manifest meanwhile): the first
// localDaemonClient takes the answer. Not for a daemon elsewhere.
func (a *app) askHealthEarly(ctx context.Context) {
	if a.remoteHost() != "" || a.earlyHealth != nil {
		return
	}
	p, err := a.daemonPaths()
	if err != nil {
		return // said again by localDaemonClient
	}
	ch := make(chan healthAnswer, 1)
	a.earlyHealth = ch
	go func() {
		h, err := healthOf(ctx, client.New(p.Socket()))
		ch <- healthAnswer{h, err}
	}()
}

// localHealth is the health of the local daemon c: the answer asked early
// (askHealthEarly) the first time, asked now after that.
func (a *app) localHealth(ctx context.Context, c *client.Client) (*client.Health, error) {
	if ch := a.earlyHealth; ch != nil {
		a.earlyHealth = nil
		r := <-ch
		if r.err == nil || ctx.Err() != nil {
			return r.h, r.err
		}
		// Asked again: the daemon may have started meanwhile.
	}
	return healthOf(ctx, c)
}

// healthOf asks daemon c for its health, for at most two seconds.
func healthOf(ctx context.Context, c *client.Client) (*client.Health, error) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.Health(hctx)
}

// replaceDaemon stops a daemon of another build (its sandboxes keep running)
// and returns its listen options, for the new one to use the same (design.md §8).
func (a *app) replaceDaemon(p *paths.Paths, h *client.Health) (daemonArgs, error) {
	fmt.Fprintf(a.stderr, "daemon outdated (build %s -> %s), restarting...\n", h.BuildID, BuildID)
	l, _ := daemonfiles.ReadListen(p) // read before it stops: it removes them
	if err := stopDaemon(p, h.PID); err != nil {
		return daemonArgs{}, withCode(ExitAirlock, err)
	}
	return argsOf(l), nil
}

// lastError is the last error line ("airlock: …") the daemon wrote to its log
// after offset from (at most 64 KiB of it read), without the prefix.
func lastError(logPath string, from int64) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(f, from, 64<<10), 64<<10))
	why := ""
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "airlock: "); ok {
			why = rest
		}
	}
	return why
}

// startDaemon starts `airlock daemon run` in the background, detached, and waits
// until it answers; if the child dies first it fails at once with the log path.
func (a *app) startDaemon(ctx context.Context, p *paths.Paths, args daemonArgs) error {
	bin, err := os.Executable()
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot find the airlock binary: %w", err))
	}
	if err := p.EnsureDaemonDir(); err != nil {
		return withCode(ExitAirlock, err)
	}
	logPath := daemonfiles.LogFile(p)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot open %s: %w", logPath, err))
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd) // what this child writes comes after
	if args.token != "" && args.tokenFile == "" {
		// A token given by value reaches the child through a 0600 file in
		// the daemon dir, never its command line or environment.
		if args.tokenFile, err = daemonfiles.WriteTokenHandoff(p, args.token); err != nil {
			return withCode(ExitAirlock, err)
		}
		args.removeTokenFile = true
		// The daemon removes it once read; this is for one that never got
		// that far.
		defer os.Remove(args.tokenFile)
	}
	if args.noToken && args.host != "" {
		// Every start of a token-less listener warns, an upgrade's too.
		fmt.Fprintf(a.stderr, "airlock: warning: %s\n", daemonfiles.TokenlessWarning(args.host, args.port))
	}
	cmd := exec.Command(bin, args.argv()...)
	cmd.Env = a.daemonEnviron()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot start the airlock daemon: %w", err))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := client.New(p.Socket())
	answers := func(ok func(*client.Health) bool) bool {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		h, err := c.Health(hctx)
		return err == nil && ok(h)
	}
	deadline := time.Now().Add(10 * time.Second)
	var werr error
	childExited := false
	up := waitUntil(ctx, every(50*time.Millisecond, time.Until(deadline)), func() (bool, error) {
		select {
		case werr = <-exited:
			childExited = true
			return false, errExited
		default:
		}
		return answers(func(h *client.Health) bool { return h.PID == cmd.Process.Pid }), nil
	})
	switch {
	case up:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case !childExited:
		return withCode(ExitAirlock, fmt.Errorf("the airlock daemon did not answer within 10 s; see %s", logPath))
	}
	// A second daemon that lost the race for the lock exits non-zero; if the
	// winner answers (it may still be starting), use it.
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(10*time.Millisecond), backoff.WithMultiplier(2),
		backoff.WithMaxInterval(200*time.Millisecond), backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(max(time.Until(deadline), time.Millisecond)))
	if waitUntil(ctx, b, func() (bool, error) {
		if answers(func(h *client.Health) bool { return h.BuildID == BuildID }) {
			return true, nil
		}
		if !daemonfiles.LockHeld(p) {
			return false, errNoWinner // it went away: none will answer
		}
		return false, nil
	}) {
		return nil
	}
	// Say why, as the daemon said it (an Engine it cannot reach, say), with
	// its exit code.
	code := ExitAirlock
	var ee *exec.ExitError
	if errors.As(werr, &ee) && ee.ExitCode() > 0 {
		code = ee.ExitCode()
	}
	if errors.As(werr, &ee) && (ee.ExitCode() < 0 || ee.ExitCode() == ExitFailure) {
		// Killed (kill -9 of the daemons while it started), or it lost the
		// lock to another daemon that went away before it answered:
		// starting another may well work (daemonClientAgain does).
		why := lastError(logPath, logStart)
		if why == "" {
			why = werr.Error()
		}
		return withCode(ExitAirlock, fmt.Errorf("the airlock daemon could not start: %w (%s; its log: %s)", errDaemonGone, why, logPath))
	}
	if why := lastError(logPath, logStart); why != "" {
		return withCode(code, fmt.Errorf("the airlock daemon could not start: %s (its log: %s)", why, logPath))
	}
	return withCode(code, fmt.Errorf("the airlock daemon exited at start (%v); see %s", werr, logPath))
}

// errDaemonGone: the daemon the CLI started, or the one that held the lock
// then, went away before it answered.
var errDaemonGone = errors.New("it went away before it answered")

// daemonClientAgain is daemonClient that starts a daemon again while the one it
// started is killed before it answers, for up to daemonRetryLimit.
func (a *app) daemonClientAgain(ctx context.Context) (*client.Client, error) {
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(daemonRetryLimit)), ctx)
	return backoff.RetryWithData(func() (*client.Client, error) {
		c, err := a.daemonClient(ctx)
		if err != nil && !errors.Is(err, errDaemonGone) {
			return nil, backoff.Permanent(err)
		}
		return c, err
	}, b)
}

// errNoWinner: the daemon that held the lock went away before it answered.
var errNoWinner = errors.New("the daemon holding the lock went away")

// errExited: the daemon child exited while the CLI waited for it.
var errExited = errors.New("the daemon exited")

// every is a backoff.BackOff that waits interval between tries and gives up
// once limit has passed.
func every(interval, limit time.Duration) backoff.BackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(interval), backoff.WithMultiplier(1),
		backoff.WithRandomizationFactor(0), backoff.WithMaxElapsedTime(limit))
}

// errNotYet is what waitUntil's operation gives backoff.Retry while its
// condition does not hold.
var errNotYet = errors.New("not yet")

// waitUntil tries cond at once and then as b says until it holds (true), b
// gives up, ctx ends or cond fails for good with an error (false).
func waitUntil(ctx context.Context, b backoff.BackOff, cond func() (bool, error)) bool {
	err := backoff.Retry(func() error {
		ok, err := cond()
		switch {
		case err != nil:
			return backoff.Permanent(err)
		case !ok:
			return errNotYet
		}
		return nil
	}, backoff.WithContext(b, ctx))
	return err == nil
}

// errNotDaemon: the pid is not provably the daemon, so it is not signalled.
var errNotDaemon = errors.New("not the airlock daemon")

// isDaemon reports whether pid is provably this user's daemon: it holds the
// singleton lock, or it answers health on the socket with that pid.
func isDaemon(p *paths.Paths, pid int) bool {
	if daemonfiles.HoldsLock(p, pid) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := client.New(p.Socket()).Health(ctx)
	return err == nil && h.PID == pid
}

// stopDaemon sends SIGTERM, waits up to 5 s, then SIGKILLs (design.md §8) — only
// a pid that is provably the daemon (errNotDaemon otherwise). The process is
// held by a pidfd (os.FindProcess) before it is checked, so the signals reach
// the process checked even if its pid is reused meanwhile.
func stopDaemon(p *paths.Paths, pid int) error {
	if pid <= 0 {
		return errors.New("cannot stop the daemon: no pid")
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("cannot stop the daemon (pid %d): %w", pid, err)
	}
	defer proc.Release()
	if !isDaemon(p, pid) {
		return fmt.Errorf("pid %d: %w", pid, errNotDaemon)
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return fmt.Errorf("cannot stop the daemon (pid %d): %w", pid, err)
	}
	gone := func() (bool, error) { return syscall.Kill(pid, 0) != nil || isZombie(pid), nil }
	if waitUntil(context.Background(), every(20*time.Millisecond, 5*time.Second), gone) {
		return nil
	}
	_ = proc.Signal(syscall.SIGKILL)
	waitUntil(context.Background(), every(20*time.Millisecond, 2*time.Second), gone)
	return nil
}

func isZombie(pid int) bool {
	state, _, ok := proc.State(pid)
	return !ok || state == "Z"
}

// daemonEnvNames are the variables a daemon started in the background gets
// from the CLI's environment, and no others: it never sees the vault
// passphrase, a token, or whatever else the user's shell holds.
var daemonEnvNames = []string{
	// who and where: home, user, tools, temporary files, language
	"HOME", "USER", "LOGNAME", "PATH", "TMPDIR", "LANG", "LANGUAGE", "TZ",
	// which Docker Engine, as the docker CLI chooses it (engine.Resolve)
	"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_TLS",
	// ssh:// Engines, and the ssh-agent tool
	"SSH_AUTH_SOCK",
	// credential helpers of the docker CLI, for the daemon's pulls (docs/registries.md):
	// secretservice's session bus, pass's store (never DOCKER_AUTH_CONFIG: credentials)
	"DBUS_SESSION_BUS_ADDRESS", "GNUPGHOME", "PASSWORD_STORE_DIR",
	// the tool caches and the Go toolchain the daemon plans on the host
	// (sandbox/mounts.go, sandbox/gotoolchain.go; PATH above finds go)
	"GOCACHE", "GOPATH", "GOMODCACHE", "GOROOT", "UV_CACHE_DIR",
	// the AIRLOCK_* variables the daemon reads (AIRLOCK_DAEMON_BACKGROUND is set below)
	"AIRLOCK_SUPERVISOR_BINARY",
}

// daemonEnvPrefixes: every variable with one of these prefixes is passed too.
var daemonEnvPrefixes = []string{"LC_", "XDG_"}

// daemonEnviron is the daemon child's environment: the variables above, as
// the CLI sees them (a.getenv), and AIRLOCK_DAEMON_BACKGROUND=1.
func (a *app) daemonEnviron() []string {
	names := append([]string(nil), daemonEnvNames...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, pre := range daemonEnvPrefixes {
			if strings.HasPrefix(k, pre) {
				names = append(names, k)
			}
		}
	}
	// The XDG variables that place airlock's files, even when a test's
	// getenv has them and the process has not.
	names = append(names, "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR")
	var env []string
	seen := map[string]bool{}
	for _, k := range names {
		if seen[k] {
			continue
		}
		seen[k] = true
		if v, ok := a.getenv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "AIRLOCK_DAEMON_BACKGROUND=1")
}

// listeners describes where the running daemon listens: its socket, then its
// TCP listener (from the listen options it keeps), never the token itself.
func listeners(p *paths.Paths) string {
	out := p.Socket()
	l, ok := daemonfiles.ReadListen(p)
	if !ok || l.Host == "" {
		return out
	}
	var how []string
	if l.TLSCert != "" {
		how = append(how, "TLS")
	}
	switch {
	case l.NoToken:
		how = append(how, "NO TOKEN: --unsafe-no-token")
	case l.TokenFile != "":
		how = append(how, "token from "+l.TokenFile)
	default:
		how = append(how, "token")
	}
	return fmt.Sprintf("%s, tcp://%s (%s)", out, net.JoinHostPort(l.Host, strconv.Itoa(l.Port)), strings.Join(how, ", "))
}

// listenApplied is nil when the running daemon (of this build) listens as the
// flags d ask; otherwise an error saying they were not applied and how to
// restart it with them.
func listenApplied(p *paths.Paths, h *client.Health, d daemonArgs) error {
	l, _ := daemonfiles.ReadListen(p)
	want := daemonfiles.Listen{Host: d.host, TokenFile: d.tokenFile, Token: d.token, NoToken: d.noToken, TLSCert: d.tlsCert, TLSKey: d.tlsKey}
	if d.host != "" {
		want.Port = d.port
	}
	if l.TokenFile != "" {
		l.Token = "" // the daemon read it from its file
	}
	if want.TokenFile != "" {
		want.Token = ""
	}
	if l == want {
		return nil
	}
	flags := strings.Join(d.flags(), " ")
	return fmt.Errorf("cannot apply %s: a daemon of this build runs already (PID %d, listening on %s) and the flags were not applied; "+
		"to restart it with them (sandboxes keep running): airlock daemon stop && airlock daemon start %s", flags, h.PID, listeners(p), flags)
}

// flags are the listen flags d stands for, as a user gives them (a token
// given by value is named, never shown).
func (d daemonArgs) flags() []string { return d.listenFlags(false) }

// listenFlags are the listen flags d stands for: for a daemon's command line
// (run) with the removal of the hand-off file, else as a user gives them,
// with a token given by value named as a token file.
func (d daemonArgs) listenFlags(run bool) []string {
	var f []string
	if d.host != "" {
		f = append(f, "--host", d.host, "--port", strconv.Itoa(d.port))
	}
	if d.tokenFile != "" {
		f = append(f, "--token-file", d.tokenFile)
	} else if d.token != "" && !run {
		f = append(f, "--token-file PATH")
	}
	if d.removeTokenFile && run {
		f = append(f, "--remove-token-file")
	}
	if d.noToken {
		f = append(f, "--unsafe-no-token")
	}
	if d.tlsCert != "" {
		f = append(f, "--tls-cert", d.tlsCert)
	}
	if d.tlsKey != "" {
		f = append(f, "--tls-key", d.tlsKey)
	}
	return f
}
