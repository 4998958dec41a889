package supervisor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// The exec channel: one long-lived process in a sandbox (`supervise channel`,
// started by the host through one Engine exec) that starts commands for the
// host and carries their streams back, so that a command costs a fork in the
// sandbox instead of an Engine exec (the Engine's runtime spawning a process
// into the container: tens of milliseconds). Several commands share it at
// once, each under a number the host chose.
//
// Both directions carry frames: a type byte, the command's number (4 bytes,
// big-endian), the payload's length (4 bytes, big-endian), the payload. The
// host sends ChanStart (a JSON ChannelStart); the sandbox answers ChanStarted
// once the command runs (so that the host knows to wait for it, or to start it
// another way when the channel ended first), ChanStdout, ChanStderr and, once
// the command ended and its output is all sent, ChanExit (a JSON
// ChannelExit). A command reads /dev/null: one that takes input is
// started through the Engine (a command that does not read its input would
// otherwise hold up the frames of the others).

// Frame types.
const (
	ChanStart   byte = 'S'
	ChanStarted byte = 'A'
	ChanStdout  byte = 'O'
	ChanStderr  byte = 'E'
	ChanExit    byte = 'X'
)

// MaxChannelPayload bounds a frame's payload.
const MaxChannelPayload = 1 << 20

// ChannelStart is a command the host asks the channel to start.
type ChannelStart struct {
	Argv []string `json:"argv"`
}

// ChannelExit is a command's end: its exit code (128+N for signal N, as an
// Engine exec reports it), or why it could not start.
type ChannelExit struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

// WriteChannelFrame writes one frame.
func WriteChannelFrame(w io.Writer, typ byte, id uint32, payload []byte) error {
	if len(payload) > MaxChannelPayload {
		return fmt.Errorf("cannot send a frame of %d bytes (at most %d)", len(payload), MaxChannelPayload)
	}
	buf := make([]byte, 9+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], id)
	binary.BigEndian.PutUint32(buf[5:9], uint32(len(payload)))
	copy(buf[9:], payload)
	_, err := w.Write(buf)
	return err
}

// ReadChannelFrame reads one frame.
func ReadChannelFrame(r io.Reader) (typ byte, id uint32, payload []byte, err error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > MaxChannelPayload {
		return 0, 0, nil, fmt.Errorf("cannot read a frame of %d bytes (at most %d)", n, MaxChannelPayload)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return h[0], binary.BigEndian.Uint32(h[1:5]), payload, nil
}

// ServeChannel starts the commands in's frames ask for and writes their
// streams and ends to out, until in ends; it then waits for the commands
// still running (their output goes nowhere) and returns. A command runs as
// an Engine exec's would: this process's user, env and working directory, in
// a session of its own.
func ServeChannel(in io.Reader, out io.Writer) error {
	ch := &channelServer{out: out}
	var err error
	for {
		var typ byte
		var id uint32
		var payload []byte
		typ, id, payload, err = ReadChannelFrame(in)
		if err != nil {
			break
		}
		if typ != ChanStart {
			continue
		}
		var st ChannelStart
		if jerr := json.Unmarshal(payload, &st); jerr != nil || len(st.Argv) == 0 {
			ch.exit(id, ChannelExit{Code: 126, Error: "cannot start the command: a bad start frame"})
			continue
		}
		ch.start(id, st)
	}
	ch.running.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type channelServer struct {
	wmu     sync.Mutex // one frame at a time on out
	out     io.Writer
	running sync.WaitGroup
}

// send writes a frame (once the host is gone, to no one).
func (ch *channelServer) send(typ byte, id uint32, payload []byte) {
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	_ = WriteChannelFrame(ch.out, typ, id, payload)
}

func (ch *channelServer) exit(id uint32, e ChannelExit) {
	b, _ := json.Marshal(e)
	ch.send(ChanExit, id, b)
}

// start runs one command: its output copied in frames, its end reported
// after all of it.
func (ch *channelServer) start(id uint32, st ChannelStart) {
	cmd := exec.Command(st.Argv[0], st.Argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	outR, outW, err := os.Pipe()
	if err != nil {
		ch.exit(id, ChannelExit{Code: 126, Error: "cannot start the command: " + err.Error()})
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		ch.exit(id, ChannelExit{Code: 126, Error: "cannot start the command: " + err.Error()})
		return
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		ch.exit(id, ChannelExit{Code: code, Error: "cannot start the command: " + err.Error()})
		return
	}
	outW.Close()
	errW.Close()
	ch.send(ChanStarted, id, nil)
	ch.running.Add(1)
	go func() {
		defer ch.running.Done()
		var copies sync.WaitGroup
		for typ, r := range map[byte]*os.File{ChanStdout: outR, ChanStderr: errR} {
			copies.Add(1)
			go func() {
				defer copies.Done()
				defer r.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := r.Read(buf)
					if n > 0 {
						ch.send(typ, id, buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
		copies.Wait()
		werr := cmd.Wait()
		code := 0
		if cmd.ProcessState != nil {
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			} else {
				code = cmd.ProcessState.ExitCode()
			}
		} else if werr != nil {
			code = 126
		}
		ch.exit(id, ChannelExit{Code: code})
	}()
}
