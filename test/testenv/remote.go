package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

const (
	// remoteStartTimeout bounds the wait for a stand-in remote Engine to answer.
	remoteStartTimeout = 60 * time.Second
	// remoteStopTimeout bounds each step of stopping it: removing its
	// containers, dockerd's own shutdown, the end of stray processes.
	remoteStopTimeout = 30 * time.Second
	// remotePollInterval is how often readiness and exits are checked.
	remotePollInterval = 50 * time.Millisecond
	// remoteStorageDriver is the stand-in's storage driver; overlay2 works on
	// the tmpfs that holds its data root.
	remoteStorageDriver = "overlay2"
	// remoteRunParent holds each stand-in's directory, which both the host
	// and the stand-in's mount namespace see (unlike /tmp).
	remoteRunParent = "/run"
	// remoteRunPrefix starts the name of that directory.
	remoteRunPrefix = "airlock-remote-"
	// remoteLogTail is how many lines of dockerd's log errors quote.
	remoteLogTail = 30
)

// remoteWrapper runs as `sh -c remoteWrapper NAME RUNDIR ROOTNAME DRIVER`
// under `unshare --mount --net --propagation private` and becomes dockerd.
// Mounts made here do not propagate to the host. The stand-in sees neither the
// host's /tmp (where test projects live) nor its /run, /etc/docker (its Engine
// identity, key.json, and configuration) or Engine data: it gets fresh tmpfs
// instead, and its own loopback and, from dockerd, its own docker0. Only
// RUNDIR, with dockerd's socket and log, is shared with the host.
const remoteWrapper = `set -eu
run=$1 root=/tmp/$2 driver=$3
for ns in mnt net; do
  if [ "$(readlink /proc/self/ns/$ns)" = "$(readlink /proc/$PPID/ns/$ns)" ]; then
    echo "airlock-remote: not in a new $ns namespace; refusing to start dockerd" >&2
    exit 1
  fi
done
ip link set lo up
# Detach this namespace's copies of the host's mounts below /tmp, /run and
# /var/lib/docker (the host Engine's container file systems and network
# namespaces), so that the stand-in does not keep them alive.
awk '$2 ~ "^/(tmp|run|var/lib/docker)/" { print $2 }' /proc/self/mounts | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null || true; done
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir /tmp/.run
mount --bind "$run" /tmp/.run
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p "$run"
mount --move /tmp/.run "$run"
for d in /etc/docker /var/lib/docker /var/lib/containerd; do
  if [ -d "$d" ]; then mount -t tmpfs -o mode=711 tmpfs "$d"; fi
done
mkdir -p "$root/data" "$root/exec"
exec dockerd --data-root "$root/data" --exec-root "$root/exec" --pidfile "$root/dockerd.pid" \
  -H "unix://$run/docker.sock" --storage-driver "$driver"
`

// RemoteEngine is a second Docker Engine in its own network and mount
// namespaces, reached over loopback TCP: a stand-in for a remote Engine that
// shares no file system, network or Engine state with this host.
//
// Its dockerd runs under unshare(1) with tmpfs over /tmp, /run, /etc/docker and
// /var/lib/docker, its data and exec roots in that /tmp, its own loopback and
// default bridge, and no route out (it cannot pull from a registry, not even
// one on this host's loopback). socat forwards Host to its unix socket.
type RemoteEngine struct {
	// Host is the Engine's address, "tcp://127.0.0.1:PORT", as DOCKER_HOST takes it.
	Host string
	// Client is a client of the Engine with API-version negotiation on,
	// closed when the test ends.
	Client *client.Client
	// Dir is the directory, under /run, with dockerd's unix socket and its log
	// (dockerd.log); it is removed when the test ends.
	Dir string
	// PID is dockerd's process ID, also its process group.
	PID int
	// StartTime is how long the Engine took to answer.
	StartTime time.Duration

	ready    bool
	mntNS    string   // dockerd's mount namespace, "mnt:[INODE]"
	mntNSFd  *os.File // holds it, so that its inode is not reused while killTree looks for it
	lock     *os.File // Dir's lock file, held while the stand-in lives
	thread   *lockedThread
	dockerd  *process
	socat    *process
	socatOut SyncBuffer

	sshdMu sync.Mutex // guards sshds
	sshds  int        // the SSHDs started in its namespaces and not yet stopped
	// sshdsMade counts the SSHDs ever started here: each listens on a port
	// of its own (tests in parallel each start one).
	sshdsMade int

	busybox struct {
		once sync.Once
		ref  string
		err  error
	}
}

// StartRemoteEngine starts a stand-in remote Engine for the test and stops it
// when the test ends, leaving no process, mount or file behind. Each call
// starts a new one: it answers in about 0.3 s and stops in about 1 s. The test
// fails when it cannot start (it needs root, unshare, ip, dockerd and socat:
// ./scripts/engine.sh installs them), or is skipped when AIRLOCK_SKIP_DOCKER=1.
func StartRemoteEngine(t testing.TB) *RemoteEngine {
	t.Helper()
	if skipDocker() {
		t.Skipf("%s=1: skipping test that needs a stand-in remote Docker Engine", SkipDockerEnv)
	}
	r := &RemoteEngine{}
	if err := r.start(t); err != nil {
		t.Fatalf("cannot start a stand-in remote Docker Engine: %v", err)
	}
	t.Logf("testenv: stand-in remote Engine %s (dockerd pid %d, storage driver %s, dir %s) answered in %v",
		r.Host, r.PID, remoteStorageDriver, r.Dir, r.StartTime.Round(time.Millisecond))
	return r
}

// BusyboxImage returns the reference of the busybox test image (see the
// package-level BusyboxImage) on the stand-in Engine, building it there once.
func (r *RemoteEngine) BusyboxImage(t testing.TB) string {
	t.Helper()
	r.busybox.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), busyboxBuildTimeout)
		defer cancel()
		start := time.Now()
		r.busybox.ref, r.busybox.err = BuildBusyboxImage(ctx, r.Client)
		if r.busybox.err == nil {
			t.Logf("testenv: image %s on %s in %v", r.busybox.ref, r.Host, time.Since(start).Round(time.Millisecond))
		}
	})
	if r.busybox.err != nil {
		t.Fatalf("on the stand-in remote Engine %s: %v", r.Host, r.busybox.err)
	}
	return r.busybox.ref
}

// LogTail returns the last lines of dockerd's log, for failure messages.
func (r *RemoteEngine) LogTail(lines int) string {
	b, err := os.ReadFile(filepath.Join(r.Dir, "dockerd.log"))
	if err != nil {
		return fmt.Sprintf("(cannot read dockerd's log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// cleaner is what start needs of a test: testing.TB, or benchCleaner outside one.
type cleaner interface {
	Cleanup(func())
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// StartRemoteEngineFor starts a stand-in remote Engine outside a test (make bench);
// stop ends it and reports what it could not clean.
func StartRemoteEngineFor(logf func(format string, args ...any)) (r *RemoteEngine, stop func() error, err error) {
	c := &benchCleaner{logf: logf}
	r = &RemoteEngine{}
	stop = func() error {
		for i := len(c.cleanups) - 1; i >= 0; i-- {
			c.cleanups[i]()
		}
		c.cleanups = nil
		return errors.Join(c.errs...)
	}
	if err := r.start(c); err != nil {
		_ = stop()
		return nil, nil, fmt.Errorf("cannot start a stand-in remote Docker Engine: %w", err)
	}
	return r, stop, nil
}

type benchCleaner struct {
	cleanups []func()
	errs     []error
	logf     func(format string, args ...any)
}

func (b *benchCleaner) Cleanup(f func()) { b.cleanups = append(b.cleanups, f) }
func (b *benchCleaner) Errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}
func (b *benchCleaner) Logf(format string, args ...any) {
	if b.logf != nil {
		b.logf(format, args...)
	}
}

func (r *RemoteEngine) start(t cleaner) error {
	begin := time.Now()
	if os.Geteuid() != 0 {
		return errors.New("it needs root, to run dockerd in new mount and network namespaces")
	}
	for _, bin := range []string{"unshare", "ip", "dockerd", "socat"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%v (./scripts/engine.sh installs what the tests need)", err)
		}
	}
	sweepRemoteDirs()
	dir, err := os.MkdirTemp(remoteRunParent, remoteRunPrefix)
	if err != nil {
		return fmt.Errorf("cannot make its directory: %w", err)
	}
	r.Dir = dir
	if r.lock, err = lockRemoteDir(dir); err != nil {
		os.Remove(dir)
		return err
	}
	r.thread = newLockedThread()
	// From here on, stop undoes whatever was done, should start fail half-way.
	t.Cleanup(func() {
		begin := time.Now()
		if problems := r.stop(); len(problems) > 0 {
			t.Errorf("stopping the stand-in remote Engine %s:\n  %s", r.Dir, strings.Join(problems, "\n  "))
		} else if r.ready {
			t.Logf("testenv: stand-in remote Engine %s stopped in %v", r.Host, time.Since(begin).Round(time.Millisecond))
		}
	})

	logf, err := os.OpenFile(filepath.Join(dir, "dockerd.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "private",
		"sh", "-c", remoteWrapper, "airlock-remote-engine", dir, filepath.Base(dir), remoteStorageDriver)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, for cleanup; SIGTERM, a clean shutdown, should
	// the test process die without cleaning up.
	cmd.SysProcAttr = ownGroupDying(syscall.SIGTERM)
	r.dockerd, err = r.startProcess(cmd)
	logf.Close()
	if err != nil {
		return fmt.Errorf("cannot run dockerd: %w", err)
	}
	r.PID = cmd.Process.Pid

	sock := filepath.Join(dir, "docker.sock")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before socat binds it
		addr, err := FreeLoopbackAddr()
		if err != nil {
			return fmt.Errorf("cannot find a free loopback port: %w", err)
		}
		if lastErr = r.expose(addr, sock); lastErr != nil {
			return lastErr
		}
		lastErr = r.waitReady(begin)
		if !r.socatExited() {
			if lastErr != nil {
				return lastErr
			}
			break
		}
		if lastErr == nil { // whatever answered, it was not through this socat
			lastErr = fmt.Errorf("socat on %s exited (%v): %s", r.Host, r.socat.err, strings.TrimSpace(r.socatOut.String()))
		}
	}
	if lastErr != nil {
		return lastErr
	}

	self, err := namespaces(os.Getpid())
	if err != nil {
		return err
	}
	its, err := namespaces(r.PID)
	if err != nil {
		return fmt.Errorf("cannot read dockerd's namespaces: %w", err)
	}
	if its[1] == self[1] {
		return fmt.Errorf("dockerd runs in this host's network namespace (%s), not in a new one", its[1])
	}
	if r.captureMountNS(); r.mntNSFd == nil {
		return fmt.Errorf("dockerd runs in this host's mount namespace (%s), not in a new one", its[0])
	}
	r.ready = true
	r.StartTime = time.Since(begin)
	return nil
}

// socatHalfClose is how long socat keeps a connection whose one direction
// ended (a client that closed its writing side, as an exec whose stdin ended
// does) before it ends the other: its default, 0.5 s, cut execs with stdin
// that ran longer (exit 126, no output) where a real Engine keeps the reply
// flowing.
const socatHalfClose = "3600"

// expose starts socat forwarding addr (127.0.0.1:PORT) to the unix socket.
func (r *RemoteEngine) expose(addr, sock string) error {
	_, port, _ := net.SplitHostPort(addr)
	r.socatOut.Reset()
	cmd := exec.Command("socat", "-t", socatHalfClose, "TCP-LISTEN:"+port+",bind=127.0.0.1,fork,reuseaddr", "UNIX-CONNECT:"+sock)
	cmd.Stdout, cmd.Stderr = &r.socatOut, &r.socatOut
	cmd.SysProcAttr = ownGroupDying(syscall.SIGKILL)
	p, err := r.startProcess(cmd)
	if err != nil {
		return fmt.Errorf("cannot run socat: %w", err)
	}
	r.socat = p
	r.Host = "tcp://" + addr
	if r.Client != nil {
		r.Client.Close()
	}
	r.Client, err = client.NewClientWithOpts(client.WithHost(r.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("cannot create a client of %s: %w", r.Host, err)
	}
	return nil
}

func (r *RemoteEngine) socatExited() bool { return r.socat.exited() }

// waitReady polls _ping through socat until the Engine answers, dockerd or
// socat exits, or remoteStartTimeout from begin has passed.
func (r *RemoteEngine) waitReady(begin time.Time) error {
	deadline := begin.Add(remoteStartTimeout)
	tick := time.NewTicker(remotePollInterval)
	defer tick.Stop()
	// exited reports an exit of dockerd or socat; it is checked before each
	// ping, since select picks at random among ready cases.
	exited := func() error {
		select {
		case <-r.dockerd.done:
			return fmt.Errorf("dockerd exited (%v); last lines of %s:\n%s",
				r.dockerd.err, filepath.Join(r.Dir, "dockerd.log"), r.LogTail(remoteLogTail))
		case <-r.socat.done:
			return fmt.Errorf("socat on %s exited (%v): %s", r.Host, r.socat.err, strings.TrimSpace(r.socatOut.String()))
		default:
			return nil
		}
	}
	for {
		if err := exited(); err != nil {
			return err
		}
		r.captureMountNS() // as soon as it exists, for stop to find any stray process
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ping, err := r.Client.Ping(ctx)
		cancel()
		if err == nil {
			r.Client.NegotiateAPIVersionPing(ping)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to _ping on %s within %v (last error: %v); last lines of %s:\n%s",
				r.Host, remoteStartTimeout, err, filepath.Join(r.Dir, "dockerd.log"), r.LogTail(remoteLogTail))
		}
		select {
		case <-r.dockerd.done:
		case <-r.socat.done:
		case <-tick.C:
		}
	}
}

// stop removes the Engine's containers, stops socat and dockerd, kills what
// remains in dockerd's mount namespace (with descendants: the containers) and
// removes Dir. It returns what it could not undo.
func (r *RemoteEngine) stop() []string {
	var problems []string
	if r.Client != nil && r.ready {
		// Removing the containers first spares dockerd their stop timeouts.
		ctx, cancel := context.WithTimeout(context.Background(), remoteStopTimeout)
		ctrs, err := r.Client.ContainerList(ctx, container.ListOptions{All: true})
		if err != nil {
			problems = append(problems, fmt.Sprintf("cannot list its containers: %v", err))
		}
		for _, c := range ctrs {
			if err := r.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				problems = append(problems, fmt.Sprintf("cannot remove container %.12s: %v", c.ID, err))
			}
		}
		cancel()
	}
	if r.Client != nil {
		r.Client.Close()
	}
	// Signal only processes not yet reaped: the ID of a reaped one may be reused.
	if r.socat != nil && !r.socat.exited() {
		_ = syscall.Kill(-r.socat.cmd.Process.Pid, syscall.SIGKILL)
		<-r.socat.done
	}

	if r.dockerd != nil && !r.dockerd.exited() {
		pid := r.dockerd.cmd.Process.Pid
		r.captureMountNS() // should start have failed before
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-r.dockerd.done:
		case <-time.After(remoteStopTimeout):
			problems = append(problems, fmt.Sprintf("dockerd did not stop within %v of SIGTERM; killed its process group", remoteStopTimeout))
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-r.dockerd.done
		}
	}

	// containerd and its shims are in their own process groups; dockerd stops
	// them, but make sure: kill whatever is left in its mount namespace, with
	// descendants (the containers' processes, in namespaces of their own).
	if r.mntNSFd != nil {
		if left := killTree(r.mntNS); len(left) > 0 {
			problems = append(problems, "processes remain: "+strings.Join(left, "; "))
		}
		r.mntNSFd.Close() // the namespace, and with it its mounts, goes
	}
	if r.thread != nil {
		r.thread.stop()
	}
	if r.Dir != "" {
		if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mi, []byte(r.Dir)) {
			problems = append(problems, "mounts of "+r.Dir+" are visible on the host")
		}
		if err := os.RemoveAll(r.Dir); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if r.lock != nil {
		r.lock.Close()
	}
	return problems
}

// remoteLockName is the file in Dir that the test process holds locked while
// the stand-in lives.
const remoteLockName = ".lock"

// lockRemoteDir creates Dir's lock file, locked: under a temporary name first,
// so that sweepRemoteDirs never finds it unlocked (not paths.CreateAtomic: the
// file is locked, not written, before it takes its name, and stays open).
func lockRemoteDir(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, remoteLockName+"-")
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, remoteLockName)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweepRemoteDirs removes the directories of stand-ins whose test process
// died without cleaning up (its dockerd shut down on its own, on the
// parent-death signal): those whose lock file nobody holds.
func sweepRemoteDirs() {
	dirs, _ := filepath.Glob(filepath.Join(remoteRunParent, remoteRunPrefix+"*"))
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, remoteLockName))
		if err != nil {
			continue // being set up, or not ours
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(dir)
		}
		f.Close()
	}
}

// process is a started command whose exit a goroutine waits for.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and err is set
	err  error
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startProcess starts cmd from r's locked thread, so that Pdeathsig fires
// when the test process ends rather than when the Go runtime happens to retire
// the thread that forked it.
func (r *RemoteEngine) startProcess(cmd *exec.Cmd) (*process, error) {
	var err error
	r.thread.run(func() { err = cmd.Start() })
	if err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// lockedThread runs functions on one OS thread, locked to a goroutine, that
// lives until stop.
type lockedThread struct {
	fns  chan func()
	done chan struct{}
}

func newLockedThread() *lockedThread {
	l := &lockedThread{fns: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// No unlock: the thread ends with this goroutine, after stop.
		defer close(l.done)
		for f := range l.fns {
			f()
		}
	}()
	return l
}

func (l *lockedThread) run(f func()) {
	done := make(chan struct{})
	l.fns <- func() { f(); close(done) }
	<-done
}

func (l *lockedThread) stop() {
	close(l.fns)
	<-l.done
}

// captureMountNS holds dockerd's mount namespace once unshare has made it,
// unless held already or dockerd has exited.
func (r *RemoteEngine) captureMountNS() {
	if r.mntNSFd != nil || r.dockerd == nil || r.dockerd.exited() {
		return
	}
	self, err := namespaces(os.Getpid())
	if err != nil {
		return
	}
	f, ns, err := holdMountNS(r.dockerd.cmd.Process.Pid)
	if err != nil {
		return
	}
	if ns == self[0] { // not yet unshared, or never
		f.Close()
		return
	}
	r.mntNSFd, r.mntNS = f, ns
}

// holdMountNS opens the mount namespace of a process, which keeps the
// namespace and its inode number (which identifies it) from going while the
// file is open, and returns it with that identity, "mnt:[INODE]".
func holdMountNS(pid int) (*os.File, string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return nil, "", err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		f.Close()
		return nil, "", fmt.Errorf("cannot stat %s", f.Name())
	}
	return f, fmt.Sprintf("mnt:[%d]", st.Ino), nil
}

// namespaces returns the mount and network namespaces of a process, as
// "mnt:[INODE]" and "net:[INODE]".
func namespaces(pid int) ([2]string, error) {
	var ns [2]string
	for i, kind := range []string{"mnt", "net"} {
		s, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		if err != nil {
			return ns, err
		}
		ns[i] = s
	}
	return ns, nil
}

// procInfo is what killTree needs to know of a process.
type procInfo struct {
	ppid   int
	zombie bool
	cmd    string
}

// readProc reads /proc/PID/stat; ok is false once the process is gone.
func readProc(pid int) (info procInfo, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return info, false
	}
	// PID (COMM) STATE PPID ...; COMM may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return info, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 2 {
		return info, false
	}
	info.cmd = string(b[open+1 : end])
	info.zombie = f[0] == "Z" || f[0] == "X"
	info.ppid, _ = strconv.Atoi(f[1])
	return info, true
}

// processTree returns the live processes in mount namespace mntNS and their
// descendants, by PID. It is empty when mntNS is this process's namespace.
// The caller holds the namespace (holdMountNS): the inode number of a freed
// namespace is soon reused by another, e.g. a container's on the host Engine.
func processTree(mntNS string) map[int]procInfo {
	tree := map[int]procInfo{}
	if self, err := namespaces(os.Getpid()); err != nil || self[0] == mntNS {
		return tree
	}
	entries, _ := os.ReadDir("/proc")
	all := map[int]procInfo{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		info, ok := readProc(pid)
		if !ok || info.zombie {
			continue
		}
		all[pid] = info
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && ns == mntNS {
			tree[pid] = info
		}
	}
	for grew := true; grew; {
		grew = false
		for pid, info := range all {
			if _, in := tree[pid]; !in {
				if _, parentIn := tree[info.ppid]; parentIn {
					tree[pid] = info
					grew = true
				}
			}
		}
	}
	return tree
}

// killTree SIGKILLs the processes of processTree(mntNS) until none is left or
// remoteStopTimeout has passed, and returns those left ("PID (COMM)").
func killTree(mntNS string) []string {
	deadline := time.Now().Add(remoteStopTimeout)
	for {
		tree := processTree(mntNS)
		if len(tree) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for pid, info := range tree {
				left = append(left, fmt.Sprintf("%d (%s)", pid, info.cmd))
			}
			slices.Sort(left)
			return left
		}
		for pid := range tree {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(remotePollInterval)
	}
}
