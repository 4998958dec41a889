package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/supervisor"
)

// A command channel is the host's end of `supervise channel` in a sandbox
// (supervisor.ServeChannel): one Engine exec kept open, through which the
// sandbox's API execs start as a fork in the sandbox rather than an Engine
// exec each. A warm pool's sandbox opens one while it is parked, so that the
// first command of the program that claims it starts at once. Only a command
// without a terminal, without input and without its own working directory
// goes through it; any other, and any command once the channel broke, is an
// Engine exec as before.

// errChannelEnded is a command's error when the channel ended before its end
// came.
var errChannelEnded = errors.New("the sandbox's command channel ended")

type cmdChannel struct {
	hj  types.HijackedResponse
	wmu sync.Mutex // one frame at a time

	mu     sync.Mutex
	next   uint32
	cmds   map[uint32]*channelCmd
	broken bool
}

// channelCmd is one command started through a channel.
type channelCmd struct {
	stdout, stderr io.Writer
	started        chan struct{} // closed once it runs, or ended
	startOnce      sync.Once
	done           chan struct{} // closed at its end (or the channel's)
	exit           supervisor.ChannelExit
	err            error
}

// openChannel starts `supervise channel` in container id and reads its frames
// until it ends.
func openChannel(ctx context.Context, engine client.APIClient, containerID string) (*cmdChannel, error) {
	resp, err := engine.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd: []string{backend.SupervisorIn, "supervise", "channel"}, AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot open the command channel: %w", err)
	}
	hj, err := engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot open the command channel: %w", err)
	}
	c := &cmdChannel{hj: hj, cmds: map[uint32]*channelCmd{}}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, hj.Reader)
		_ = pw.CloseWithError(err)
	}()
	go c.read(pr)
	return c, nil
}

// read hands each frame to its command until the channel ends; then every
// command not ended fails.
func (c *cmdChannel) read(r io.Reader) {
	for {
		typ, id, payload, err := supervisor.ReadChannelFrame(r)
		if err != nil {
			break
		}
		c.mu.Lock()
		cmd := c.cmds[id]
		c.mu.Unlock()
		if cmd == nil {
			continue
		}
		switch typ {
		case supervisor.ChanStarted:
			cmd.startOnce.Do(func() { close(cmd.started) })
		case supervisor.ChanStdout:
			_, _ = cmd.stdout.Write(payload)
		case supervisor.ChanStderr:
			_, _ = cmd.stderr.Write(payload)
		case supervisor.ChanExit:
			if json.Unmarshal(payload, &cmd.exit) != nil {
				cmd.err = errors.New("the sandbox's command channel sent a bad end")
			} else if cmd.exit.Error != "" {
				// As the Engine says why it could not start an exec.
				_, _ = fmt.Fprintf(cmd.stderr, "airlock: %s\n", cmd.exit.Error)
			}
			c.mu.Lock()
			delete(c.cmds, id)
			c.mu.Unlock()
			cmd.startOnce.Do(func() { close(cmd.started) })
			close(cmd.done)
		}
	}
	c.close()
}

// close ends the channel: its commands not ended fail.
func (c *cmdChannel) close() {
	c.hj.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken = true
	for id, cmd := range c.cmds {
		cmd.err = errChannelEnded
		close(cmd.done)
		delete(c.cmds, id)
	}
}

// usable says whether the channel can start req.
func (c *cmdChannel) usable(req backend.ExecRequest) bool {
	if c == nil || req.TTY || req.Stdin || req.Direct || req.Workdir != "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.broken
}

// start starts argv through the channel; ok false: the channel is broken, and
// nothing was started (it ended before the sandbox said the command runs).
func (c *cmdChannel) start(argv []string, s backend.Streams) (*backend.Exec, bool) {
	start, err := json.Marshal(supervisor.ChannelStart{Argv: argv})
	if err != nil {
		return nil, false
	}
	cmd := &channelCmd{stdout: orDiscard(s.Stdout), stderr: orDiscard(s.Stderr), started: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return nil, false
	}
	c.next++
	id := c.next
	c.cmds[id] = cmd
	c.mu.Unlock()
	c.wmu.Lock()
	err = supervisor.WriteChannelFrame(c.hj.Conn, supervisor.ChanStart, id, start)
	c.wmu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.cmds, id)
		c.mu.Unlock()
		c.close()
		return nil, false
	}
	select {
	case <-cmd.started:
	case <-cmd.done:
		if errors.Is(cmd.err, errChannelEnded) {
			return nil, false
		}
	}
	done := make(chan error, 1)
	go func() {
		<-cmd.done
		done <- cmd.err
	}()
	exitCode := func(ctx context.Context) (int, error) {
		select {
		case <-cmd.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if cmd.err != nil {
			return 0, cmd.err
		}
		return cmd.exit.Code, nil
	}
	resize := func(context.Context, uint, uint) error {
		return errors.New("cannot resize: the command has no terminal")
	}
	return backend.NewExec("channel-"+strconv.FormatUint(uint64(id), 10), done, exitCode, resize), true
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// What a parked sandbox opens before a program claims it, by its primary
// container: its command channel, and its status stream from the start (the
// daemon follows that stream from a claim on to see the sandbox ready: opened
// then, its Engine exec would come after the claim, in the program's wait).
type warmed struct {
	channel *cmdChannel
	early   io.ReadCloser // nil once the follower took it
	cancel  context.CancelFunc
}

type warmSet struct {
	mu sync.Mutex
	m  map[string]*warmed
}

// warm opens container id's channel and status stream, unless it has them.
// Either may fail: what it serves is then an Engine exec, as for any sandbox.
func (rt *Runtime) warm(containerID string) {
	rt.warmed.mu.Lock()
	if rt.warmed.m == nil {
		rt.warmed.m = map[string]*warmed{}
	}
	if _, ok := rt.warmed.m[containerID]; ok {
		rt.warmed.mu.Unlock()
		return
	}
	w := &warmed{}
	rt.warmed.m[containerID] = w
	rt.warmed.mu.Unlock()
	// Both live until the container's removal (forgetWarm), not a caller's context.
	ctx, cancel := context.WithCancel(context.Background())
	var ch *cmdChannel
	var rc io.ReadCloser
	var opened sync.WaitGroup
	opened.Go(func() {
		var err error
		if ch, err = openChannel(ctx, rt.Engine, containerID); err != nil {
			ch = nil
		}
	})
	opened.Go(func() {
		var err error
		if rc, err = backend.TailFile(ctx, rt, containerID, supervisor.StatusFile, 0, true, backend.StatusReadIn); err != nil {
			rc = nil
		}
	})
	opened.Wait()
	rt.warmed.mu.Lock()
	w.channel, w.early, w.cancel = ch, rc, cancel
	rt.warmed.mu.Unlock()
}

// channelOf is container id's open command channel, nil for none.
func (rt *Runtime) channelOf(containerID string) *cmdChannel {
	rt.warmed.mu.Lock()
	defer rt.warmed.mu.Unlock()
	if w := rt.warmed.m[containerID]; w != nil {
		return w.channel
	}
	return nil
}

// takeEarly hands over container id's status stream opened while it was
// parked, once; it ends with ctx as one opened now would.
func (rt *Runtime) takeEarly(ctx context.Context, containerID string) io.ReadCloser {
	rt.warmed.mu.Lock()
	defer rt.warmed.mu.Unlock()
	w := rt.warmed.m[containerID]
	if w == nil || w.early == nil {
		return nil
	}
	rc := w.early
	w.early = nil
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	return &earlyStream{ReadCloser: rc, stop: stop}
}

type earlyStream struct {
	io.ReadCloser
	stop func() bool
}

func (e *earlyStream) Close() error {
	e.stop()
	return e.ReadCloser.Close()
}

// forgetWarm closes what container id opened while parked (it was removed).
func (rt *Runtime) forgetWarm(containerID string) {
	rt.warmed.mu.Lock()
	w := rt.warmed.m[containerID]
	delete(rt.warmed.m, containerID)
	rt.warmed.mu.Unlock()
	if w == nil {
		return
	}
	if w.channel != nil {
		w.channel.close()
	}
	if w.early != nil {
		w.early.Close()
	}
	if w.cancel != nil {
		w.cancel()
	}
}
