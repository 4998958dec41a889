package backend

import (
	"context"
	"io"
	"os"
	"sync"
)

// Execs in a running sandbox and the streams of its terminal.

// Streams are the CLI's end of a sandbox's terminal I/O. Stdin nil means none.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// ExecRequest runs a command in a running sandbox.
type ExecRequest struct {
	// ID is the API exec's ID: its process is recorded in the sandbox under
	// it, to be signalled (SignalExec). "" for none.
	ID      string
	Cmd     []string
	Env     []string // K=V from -e
	Workdir string
	TTY     bool
	// Height and Width, with TTY, are the terminal's size from the start:
	// the exec's process sets it before the command runs (ExecArgv), the
	// Engine sizing an exec's terminal only once it started.
	Height, Width uint
	Stdin         bool
	// Direct, with TTY and Stdin, asks for the exec's stream itself rather
	// than having it copied (Exec.Direct): a local client's terminal then
	// talks to the Engine with no hop between (a keystroke's echo).
	Direct bool
	// BeforeStart, when set, is called once the exec is made and before its
	// process starts (the caller records the exec meanwhile); an error from
	// it ends the exec unstarted, with that error.
	BeforeStart func() error
}

// Exec is a started exec: Wait for its exit code after its output ends.
type Exec struct {
	ID       string
	Done     <-chan error
	exitCode func(context.Context) (int, error)
	resize   func(ctx context.Context, height, width uint) error
	// Direct, for an ExecRequest.Direct the Engine's connection allowed
	// (a plain Unix or TCP socket), is the exec's terminal stream, raw: its
	// holder copies the terminal's bytes both ways and calls EndDirect once
	// it read the stream's end (until then, or without it, Done waits for the
	// Engine to say the exec ended). The caller closes it. Nil otherwise: the
	// Streams given to Exec carry the terminal.
	Direct *os.File
	// DirectAhead is the terminal's output the Engine sent with its answer to
	// the attach, read with that answer before Direct could be handed over:
	// it comes before Direct's bytes.
	DirectAhead []byte
	ended       chan struct{}
	once        sync.Once
}

// NewExec is a started exec: done ends with its output, exitCode reads its code once it finished, resize sets its
// terminal size (nil when it has none).
func NewExec(id string, done <-chan error, exitCode func(context.Context) (int, error), resize func(ctx context.Context, height, width uint) error) *Exec {
	return &Exec{ID: id, Done: done, exitCode: exitCode, resize: resize}
}

// NewDirectExec is NewExec for an exec whose terminal stream is f, raw
// (ExecRequest.Direct): EndDirect closes ended.
func NewDirectExec(id string, f *os.File, ended chan struct{}, done <-chan error, exitCode func(context.Context) (int, error), resize func(ctx context.Context, height, width uint) error) *Exec {
	e := NewExec(id, done, exitCode, resize)
	e.Direct, e.ended = f, ended
	return e
}

// EndDirect says that a Direct exec's stream ended: Done follows.
func (e *Exec) EndDirect() {
	if e.ended != nil {
		e.once.Do(func() { close(e.ended) })
	}
}

// ExitCode returns the exit code of a finished exec.
func (e *Exec) ExitCode(ctx context.Context) (int, error) { return e.exitCode(ctx) }

// Resize sets an exec's terminal size.
func (e *Exec) Resize(ctx context.Context, height, width uint) error {
	if e.resize == nil {
		return nil
	}
	return e.resize(ctx, height, width)
}
