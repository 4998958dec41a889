package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// sshdBin is Debian's OpenSSH server (openssh-server; ./scripts/engine.sh
	// installs it). sshd re-executes itself, so it is named by absolute path.
	sshdBin = "/usr/sbin/sshd"
	// sshdFirstPort is the port the first sshd listens on inside the
	// stand-in's network namespace; each later one takes the next (two tests
	// in parallel once both bound 22).
	sshdFirstPort = 2200
	// sshdAlias is the host name the client's ssh configuration knows sshd by.
	sshdAlias = "box"
	// sshdMarkEnv is set in the environment of every session sshd starts (and
	// so of what they start: the remote airlock daemon), for finding them.
	sshdMarkEnv = "AIRLOCK_TEST_SSHD"
	// sshdPrivsepDir is the directory sshd needs for privilege separation; the
	// stand-in's /run is a tmpfs of its own, without it.
	sshdPrivsepDir = "/run/sshd"
)

// SSHD is Debian's sshd running inside the mount and network namespaces of a
// stand-in remote Engine (RemoteEngine): a stand-in for a machine that a user
// reaches with ssh, where `airlock` is the binary under test, run by a user
// of its own (root, with its own HOME and XDG directories, so its own control
// daemon) whose DOCKER_HOST is the stand-in's Engine. sshd listens on a port
// of its own (2200, 2201, …) of that network namespace; socat exposes it on this host's loopback, as
// the Engine's socket is.
//
// The client side is the real ssh: BinDir holds an `ssh` that runs
// `/usr/bin/ssh -F SSHConfig "$@"`, where SSHConfig knows the host as Alias
// with the key pair the test made (ed25519, no passphrase), the host key sshd
// was given in its known_hosts file, BatchMode and nothing of the user's own
// configuration. So `PATH=BinDir:$PATH airlock -H ssh://root@box …` reaches it.
type SSHD struct {
	// Alias is the host name the client configuration knows sshd by ("box").
	Alias string
	// Addr is sshd's address on this host's loopback, 127.0.0.1:PORT.
	Addr string
	// BinDir holds the `ssh` wrapper; put it first in PATH.
	BinDir string
	// SSHConfig is the client configuration the wrapper passes to ssh -F.
	SSHConfig string
	// RemoteDir is the remote user's directory as seen inside the stand-in's
	// mount namespace: a directory of its /tmp, which this host does not see
	// (HostPath reaches it). It holds home (HOME), config, data and run
	// (XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_RUNTIME_DIR), bin/airlock (a copy
	// of the binary under test) and sshd's configuration and keys.
	RemoteDir string

	r       *RemoteEngine
	mark    string // the value of sshdMarkEnv in sessions
	sock    string // the unix socket, in the stand-in's Dir, between the two socats
	sshd    *process
	inner   *process // socat in the namespaces: sock to sshd's port
	outer   *process // socat on this host: Addr to sock
	log     SyncBuffer
	privsep bool // counted in r.sshds
	port    int  // sshd's port in the stand-in's network namespace
	stopped bool
}

// StartSSHD starts sshd in the stand-in's namespaces, with airlockBin as the
// remote user's `airlock` ("": none, a machine airlock was never installed
// on), and stops it when the test ends (see Stop). The
// test fails when it cannot start (it needs openssh-server and
// openssh-client: ./scripts/engine.sh installs them).
func (r *RemoteEngine) StartSSHD(t testing.TB, airlockBin string) *SSHD {
	t.Helper()
	for _, bin := range []string{sshdBin, "ssh", "ssh-keygen", "nsenter", "socat"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("cannot start sshd: %v (./scripts/engine.sh installs what the tests need)", err)
		}
	}
	s := &SSHD{r: r, Alias: sshdAlias, mark: strings.ToLower(rand.Text()[:12])}
	s.RemoteDir = "/tmp/airlock-sshd-" + s.mark
	s.sock = filepath.Join(r.Dir, "sshd-"+s.mark+".sock")
	t.Cleanup(func() {
		if problems := s.Stop(); len(problems) > 0 {
			t.Errorf("stopping sshd:\n  %s", strings.Join(problems, "\n  "))
		}
	})
	begin := time.Now()
	if err := s.start(t.TempDir(), airlockBin); err != nil {
		t.Fatalf("cannot start sshd in the stand-in remote Engine's namespaces: %v\nsshd's log:\n%s", err, s.log.String())
	}
	t.Logf("testenv: sshd (pid %d) in the namespaces of %s, on %s, answered in %v",
		s.sshd.cmd.Process.Pid, r.Host, s.Addr, time.Since(begin).Round(time.Millisecond))
	return s
}

// StartSSHDFor is StartSSHD outside a test (make bench): local is a
// directory of this host for the client's keys and configuration; stop ends
// sshd and reports what it could not clean.
func (r *RemoteEngine) StartSSHDFor(local, airlockBin string) (s *SSHD, stop func() error, err error) {
	s = &SSHD{r: r, Alias: sshdAlias, mark: strings.ToLower(rand.Text()[:12])}
	s.RemoteDir = "/tmp/airlock-sshd-" + s.mark
	s.sock = filepath.Join(r.Dir, "sshd-"+s.mark+".sock")
	stop = func() error {
		if problems := s.Stop(); len(problems) > 0 {
			return fmt.Errorf("stopping sshd: %s", strings.Join(problems, "; "))
		}
		return nil
	}
	if err := s.start(local, airlockBin); err != nil {
		_ = stop()
		return nil, nil, fmt.Errorf("cannot start sshd in the stand-in remote Engine's namespaces: %v\nsshd's log:\n%s", err, s.log.String())
	}
	return s, stop, nil
}

// Log is what sshd and the socats have logged (sshd at LogLevel VERBOSE).
func (s *SSHD) Log() string { return s.log.String() }

// HostPath is path, a path inside the stand-in's mount namespace (under
// RemoteDir, say), as this host reaches it (through /proc/PID/root).
func (s *SSHD) HostPath(path string) string { return s.remote(path) }

func (s *SSHD) remote(path string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", s.r.PID), path)
}

// start makes the key pairs, the remote user's files and sshd's
// configuration, starts sshd and the socats, writes the client side and checks
// that ssh reaches the remote user.
func (s *SSHD) start(local, airlockBin string) error {
	clientKey, hostKey := filepath.Join(local, "id_ed25519"), filepath.Join(local, "host_ed25519_key")
	if err := sshKeygen(clientKey); err != nil {
		return err
	}
	if err := sshKeygen(hostKey); err != nil {
		return err
	}
	if err := s.makeRemoteDir(airlockBin, hostKey, clientKey+".pub"); err != nil {
		return err
	}
	configFile, err := s.configure()
	if err != nil {
		return err
	}

	// The client side, under the test's temporary directory.
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return err
	}
	knownHosts := filepath.Join(local, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(s.Alias+" "+string(pub)), 0o600); err != nil {
		return err
	}
	if err := s.serveRetrying(configFile); err != nil {
		return err
	}
	if err := s.writeClient(local, clientKey, knownHosts); err != nil {
		return err
	}
	return s.checkSession()
}

// sshKeygen makes an ed25519 key pair without a passphrase: file and file.pub.
func sshKeygen(file string) error {
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "airlock-test", "-f", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh-keygen: %v: %s", err, out)
	}
	return nil
}

// makeRemoteDir makes the remote side's files in the stand-in's /tmp:
// RemoteDir with the remote user's home, bin (the airlock binary) and XDG
// directories, sshd's host key and the authorized client key; and the
// directory sshd needs for privilege separation.
func (s *SSHD) makeRemoteDir(airlockBin, hostKey, clientPub string) error {
	home, bin := filepath.Join(s.RemoteDir, "home"), filepath.Join(s.RemoteDir, "bin")
	for _, d := range []string{s.RemoteDir, home, bin, filepath.Join(s.RemoteDir, "config"), filepath.Join(s.RemoteDir, "data"), filepath.Join(s.RemoteDir, "run")} {
		if err := os.Mkdir(s.remote(d), 0o700); err != nil {
			return err
		}
	}
	if airlockBin != "" {
		if err := copyFile(airlockBin, s.remote(filepath.Join(bin, "airlock")), 0o755); err != nil {
			return fmt.Errorf("cannot copy the airlock binary: %w", err)
		}
	}
	if err := copyFile(hostKey, s.remote(filepath.Join(s.RemoteDir, "ssh_host_ed25519_key")), 0o600); err != nil {
		return err
	}
	if err := copyFile(clientPub, s.remote(filepath.Join(s.RemoteDir, "authorized_keys")), 0o600); err != nil {
		return err
	}
	return s.makePrivsepDir()
}

// sessionEnv is the environment sshd sets in every session: the remote user's
// PATH (its bin first), HOME, XDG directories and DOCKER_HOST (the stand-in's
// Engine), and the mark; sorted.
func (s *SSHD) sessionEnv() []string {
	home, bin := filepath.Join(s.RemoteDir, "home"), filepath.Join(s.RemoteDir, "bin")
	xdg := map[string]string{"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_RUNTIME_DIR": "run"}
	env := []string{
		"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"DOCKER_HOST=unix://" + filepath.Join(s.r.Dir, "docker.sock"),
		sshdMarkEnv + "=" + s.mark,
	}
	for k, d := range xdg {
		env = append(env, k+"="+filepath.Join(s.RemoteDir, d))
	}
	slices.Sort(env)
	return env
}

// configure writes sshd's configuration in RemoteDir, has sshd check it
// (sshd -t) and returns its path in the stand-in's mount namespace.
func (s *SSHD) configure() (string, error) {
	config := strings.Join([]string{
		"Port " + strconv.Itoa(s.port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(s.RemoteDir, "ssh_host_ed25519_key"),
		"PidFile none",
		"AuthorizedKeysFile " + filepath.Join(s.RemoteDir, "authorized_keys"),
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"UseDNS no",
		"PermitTTY no",
		"X11Forwarding no",
		"AllowTcpForwarding no",
		"AllowAgentForwarding no",
		"PrintMotd no",
		"PrintLastLog no",
		"PermitUserEnvironment no",
		"LogLevel VERBOSE",
		// sshd passes none of the client's environment (no AcceptEnv): the
		// sessions get this and what sshd itself sets.
		"SetEnv " + strings.Join(s.sessionEnv(), " "),
	}, "\n") + "\n"
	configFile := filepath.Join(s.RemoteDir, "sshd_config")
	if err := os.WriteFile(s.remote(configFile), []byte(config), 0o600); err != nil {
		return "", err
	}
	if out, err := s.nsenter(sshdBin, "-t", "-f", configFile).CombinedOutput(); err != nil {
		return "", fmt.Errorf("sshd -t: %v: %s", err, out)
	}
	return configFile, nil
}

// serveRetrying serves (serve) up to 3 times: a free port may be taken before
// socat binds it. It gives up at once when sshd or the inner socat exited.
func (s *SSHD) serveRetrying(configFile string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.serve(configFile); err == nil {
			break
		}
		if s.sshd == nil || s.sshd.exited() || s.inner == nil || s.inner.exited() {
			return err
		}
		s.stopProcesses()
	}
	return err
}

// writeClient writes the client side under local: SSHConfig, which knows sshd
// as Alias on Addr with clientKey and knownHosts, and BinDir's ssh wrapper.
func (s *SSHD) writeClient(local, clientKey, knownHosts string) error {
	_, port, _ := net.SplitHostPort(s.Addr)
	s.SSHConfig = filepath.Join(local, "ssh_config")
	cfg := strings.Join([]string{
		"Host " + s.Alias,
		"  HostName 127.0.0.1",
		"  Port " + port,
		"  HostKeyAlias " + s.Alias,
		"  IdentityFile " + clientKey,
		"  IdentitiesOnly yes",
		"  IdentityAgent none",
		"  UserKnownHostsFile " + knownHosts,
		"  GlobalKnownHostsFile /dev/null",
		"  StrictHostKeyChecking yes",
		"  UpdateHostKeys no",
		"  CheckHostIP no",
		"  BatchMode yes",
		"  PasswordAuthentication no",
		"  ControlMaster no",
		"  ControlPath none",
		"  ForwardAgent no",
		"  LogLevel ERROR",
	}, "\n") + "\n"
	if err := os.WriteFile(s.SSHConfig, []byte(cfg), 0o600); err != nil {
		return err
	}
	s.BinDir = filepath.Join(local, "bin")
	if err := os.Mkdir(s.BinDir, 0o755); err != nil {
		return err
	}
	wrapper := "#!/bin/sh\nexec /usr/bin/ssh -F '" + s.SSHConfig + "' \"$@\"\n"
	return os.WriteFile(filepath.Join(s.BinDir, "ssh"), []byte(wrapper), 0o755)
}

// checkSession runs a command of the remote user through the real ssh, the
// key and the host key: it must see the mark.
func (s *SSHD) checkSession() error {
	out, err := s.SSH(context.Background(), "root", "echo", "$"+sshdMarkEnv).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != s.mark {
		return fmt.Errorf("ssh root@%s echo: %v: %q", s.Alias, err, out)
	}
	return nil
}

// serve starts sshd and the two socats, on a free port, and waits for sshd's
// banner through them.
func (s *SSHD) serve(configFile string) error {
	s.log.Reset()
	var err error
	sshd := s.nsenter(sshdBin, "-D", "-e", "-f", configFile)
	sshd.Stdout, sshd.Stderr = &s.log, &s.log
	sshd.SysProcAttr = ownGroupDying(syscall.SIGTERM)
	if s.sshd, err = s.r.startProcess(sshd); err != nil {
		return fmt.Errorf("cannot run sshd: %w", err)
	}
	inner := s.nsenter("socat", "-t", socatHalfClose, "UNIX-LISTEN:"+s.sock+",fork,mode=600,unlink-early", "TCP:127.0.0.1:"+strconv.Itoa(s.port)+",nodelay")
	inner.Stdout, inner.Stderr = &s.log, &s.log
	inner.SysProcAttr = ownGroupDying(syscall.SIGKILL)
	if s.inner, err = s.r.startProcess(inner); err != nil {
		return fmt.Errorf("cannot run socat in the namespaces: %w", err)
	}
	if s.Addr, err = FreeLoopbackAddr(); err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	outer := exec.Command("socat", "-t", socatHalfClose, "TCP-LISTEN:"+port+",bind=127.0.0.1,fork,reuseaddr,nodelay", "UNIX-CONNECT:"+s.sock)
	outer.Stdout, outer.Stderr = &s.log, &s.log
	outer.SysProcAttr = ownGroupDying(syscall.SIGKILL)
	if s.outer, err = s.r.startProcess(outer); err != nil {
		return fmt.Errorf("cannot run socat: %w", err)
	}

	deadline := time.Now().Add(remoteStartTimeout)
	for {
		for _, p := range []struct {
			name string
			p    *process
		}{{"sshd", s.sshd}, {"socat in the namespaces", s.inner}, {"socat on " + s.Addr, s.outer}} {
			if p.p.exited() {
				return fmt.Errorf("%s exited (%v)", p.name, p.p.err)
			}
		}
		banner, err := sshBanner(s.Addr)
		if err == nil && strings.HasPrefix(banner, "SSH-2.0-") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no ssh banner on %s within %v (%q, %v)", s.Addr, remoteStartTimeout, banner, err)
		}
		time.Sleep(remotePollInterval)
	}
}

// sshBanner reads the first line an ssh server sends.
func sshBanner(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var line []byte
	b := make([]byte, 1)
	for len(line) < 255 {
		if _, err := c.Read(b); err != nil {
			return string(line), err
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	return string(line), nil
}

// nsenter is a command run in the stand-in's mount and network namespaces,
// with a minimal environment.
func (s *SSHD) nsenter(argv ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(s.r.PID), "-m", "-n", "--"}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

// SSH is `ssh -F SSHConfig -l user Alias ARGS…`, the real ssh client of the
// test's configuration, with no standard input.
func (s *SSHD) SSH(ctx context.Context, user string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, "ssh"), append([]string{"-T", "-l", user, "--", s.Alias}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(s.SSHConfig)}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// makePrivsepDir makes sshd's privilege separation directory in the
// stand-in's /run, once for all the SSHDs of the stand-in, and takes this
// sshd's port.
func (s *SSHD) makePrivsepDir() error {
	s.r.sshdMu.Lock()
	defer s.r.sshdMu.Unlock()
	s.port = sshdFirstPort + s.r.sshdsMade
	s.r.sshdsMade++
	if s.r.sshds == 0 {
		if err := os.Mkdir(s.remote(sshdPrivsepDir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	s.r.sshds++
	s.privsep = true
	return nil
}

// Left lists the processes that remain of sshd and of what it started in the
// stand-in's namespaces (the sessions and the remote airlock daemon, which
// detaches from them): those with the session mark in their environment,
// sshd's own and any running a program of RemoteDir.
func (s *SSHD) Left() []string {
	var left []string
	for pid, info := range processTree(s.r.mntNS) {
		if s.ours(pid, info) {
			left = append(left, fmt.Sprintf("%d (%s)", pid, info.cmd))
		}
	}
	slices.Sort(left)
	return left
}

func (s *SSHD) ours(pid int, info procInfo) bool {
	if s.sshd != nil && pid == s.sshd.cmd.Process.Pid && !s.sshd.exited() {
		return true
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil &&
		slices.Contains(strings.Split(string(env), "\x00"), sshdMarkEnv+"="+s.mark) {
		return true
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil &&
		(bytes.Contains(cmdline, []byte(s.RemoteDir)) || bytes.Contains(cmdline, []byte(s.sock))) {
		return true
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.HasPrefix(exe, s.RemoteDir+"/") {
		return true
	}
	// A session's sshd (privilege separation) has sshd's environment.
	return strings.HasPrefix(info.cmd, "sshd") && s.sshd != nil && descendsFrom(pid, s.sshd.cmd.Process.Pid)
}

func descendsFrom(pid, ancestor int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		info, ok := readProc(pid)
		if !ok {
			return false
		}
		if info.ppid == ancestor {
			return true
		}
		pid = info.ppid
	}
	return false
}

// Stop stops the remote user's airlock daemon (`airlock daemon stop` over
// ssh), then sshd and the socats, kills whatever of theirs is left (saying
// so), removes RemoteDir and says what it could not clean up. Later calls do
// nothing.
func (s *SSHD) Stop() []string {
	if s.stopped {
		return nil
	}
	s.stopped = true
	var problems []string
	if s.sshd != nil && !s.sshd.exited() && s.BinDir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), remoteStopTimeout)
		// The remote user's airlock: on its PATH, else one installed in its
		// cache (`airlock remote install`), else there is no daemon to stop.
		stop := `sh -c 'for a in $(command -v airlock) "$HOME"/.cache/airlock/bin/*/airlock; do [ -x "$a" ] && exec "$a" daemon stop; done; true'`
		if out, err := s.SSH(ctx, "root", stop).CombinedOutput(); err != nil {
			problems = append(problems, fmt.Sprintf("ssh %s airlock daemon stop: %v: %s", s.Alias, err, out))
		}
		cancel()
	}
	s.stopProcesses()
	// Nothing of it may outlive sshd: what is left is a problem, and killed.
	deadline := time.Now().Add(remoteStopTimeout)
	for reported := false; ; {
		left := s.Left()
		if len(left) == 0 {
			break
		}
		if !reported {
			problems = append(problems, "processes remain after sshd and `airlock daemon stop`: "+strings.Join(left, "; "))
			reported = true
		}
		if time.Now().After(deadline) {
			problems = append(problems, "cannot kill: "+strings.Join(left, "; "))
			break
		}
		for pid, info := range processTree(s.r.mntNS) {
			if s.ours(pid, info) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(remotePollInterval)
	}
	if s.RemoteDir != "" {
		if err := os.RemoveAll(s.remote(s.RemoteDir)); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if s.privsep {
		s.r.sshdMu.Lock()
		if s.r.sshds--; s.r.sshds == 0 {
			_ = os.Remove(s.remote(sshdPrivsepDir))
		}
		s.r.sshdMu.Unlock()
	}
	_ = os.Remove(s.sock)
	return problems
}

// stopProcesses ends sshd (SIGTERM: its sessions go with their connections)
// and the socats.
func (s *SSHD) stopProcesses() {
	for _, p := range []*process{s.outer, s.inner} {
		if p != nil && !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	if s.sshd != nil && !s.sshd.exited() {
		_ = syscall.Kill(s.sshd.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.sshd.done:
		case <-time.After(remoteStopTimeout):
			_ = syscall.Kill(-s.sshd.cmd.Process.Pid, syscall.SIGKILL)
			<-s.sshd.done
		}
	}
}

// copyFile copies src to dst (which must not exist) with perm. The copy gets a
// modification time of its own: the supervisor volume of a binary is keyed by
// it, and the remote daemon fills its volume under a lock in the stand-in's own
// /tmp, which the host's daemons (filling the same key on the same Engine, in
// TestRemoteEngine) would not share: two fillers at once leave a moment with no
// /airlock/bin/airlock in the volume.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	t := st.ModTime().Add(time.Second)
	return os.Chtimes(dst, t, t)
}
