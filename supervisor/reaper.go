package supervisor

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reaper is the only caller of wait4 in the supervisor. Children are started
// through spawn (syscall.ForkExec, never os/exec, whose Wait would race with
// wait4(-1)); each one's status is delivered on the channel spawn returned,
// and every other child (an orphan reparented to us) is reaped and dropped.
//
// spawn holds lock shared across fork and registration and the reap loop holds
// it exclusively, so a child that exits at once cannot be reaped before its
// channel exists, and ForkExec's own wait4 of a child whose exec failed is not
// raced either.
type reaper struct {
	lock    sync.RWMutex
	mu      sync.Mutex // guards waiters
	waiters map[int]chan unix.WaitStatus
	sigs    chan os.Signal
	stop    chan struct{}
	done    chan struct{}
	orphans int // reaped children nobody waited for (guarded by lock)
}

// startReaper makes the supervisor a child subreaper (unless it is PID 1,
// which is one already) and starts the reap loop.
func startReaper() (*reaper, error) {
	if os.Getpid() != 1 {
		if err := setChildSubreaper(); err != nil {
			return nil, errors.Join(errors.New("cannot become a child subreaper"), err)
		}
	}
	r := &reaper{
		waiters: map[int]chan unix.WaitStatus{},
		sigs:    make(chan os.Signal, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	signal.Notify(r.sigs, unix.SIGCHLD)
	go r.loop()
	return r, nil
}

func (r *reaper) loop() {
	defer close(r.done)
	// The tick is a safety net only; SIGCHLD drives the loop.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.reapAll()
		select {
		case <-r.sigs:
		case <-tick.C:
		case <-r.stop:
			return
		}
	}
}

// reapAll collects every exited child without blocking.
func (r *reaper) reapAll() {
	r.lock.Lock()
	defer r.lock.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ws.Stopped() || ws.Continued() {
			continue
		}
		r.mu.Lock()
		ch, ok := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ok {
			ch <- ws
		} else {
			r.orphans++
		}
	}
}

// close stops the loop (after one last reap).
func (r *reaper) close() {
	signal.Stop(r.sigs)
	close(r.stop)
	<-r.done
	r.reapAll()
}

// spawnFunc starts a process; it is syscall.ForkExec or a hardened variant.
type spawnFunc func(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error)

// spawn starts a child with start and returns its pid and the channel its
// status arrives on.
func (r *reaper) spawn(start spawnFunc, argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan unix.WaitStatus, error) {
	r.lock.RLock()
	defer r.lock.RUnlock()
	pid, err := start(argv0, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.mu.Lock()
	r.waiters[pid] = ch
	r.mu.Unlock()
	return pid, ch, nil
}
