package control

import (
	"context"
	"io"
	"net/http"
	"os"

	"github.com/airlock-dev/airlock/client"
)

// attachPrimary answers POST /v1/sandboxes/{id}/attach, a stream upgrade
// (client.StreamProtocol) to the sandbox's main command.
func (s *server) attachPrimary(w http.ResponseWriter, r *http.Request) {
	var req client.AttachRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if !upgradesTo(r, client.StreamProtocol) {
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot attach without a stream: send Connection: Upgrade and Upgrade: " + client.StreamProtocol})
		return
	}
	id := r.PathValue("id")
	// The attachment outlives the request's context once the connection is
	// taken over: the client going away shows as its connection closing.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	serveStream(w, false, false, func(stdin io.Reader, stdout, stderr io.Writer) (streamTarget, error) {
		ap, err := s.svc.AttachPrimary(ctx, id, &AttachRequest{Stdin: req.Stdin, Replay: req.Replay, SkipStdout: req.SkipStdout, SkipStderr: req.SkipStderr}, stdin, stdout, stderr)
		if err != nil {
			return nil, err
		}
		return primaryTarget{ap: ap, start: func() error { _, err := s.svc.Resume(id, nil); return err }, refused: make(chan error, 1)}, nil
	})
}

// primaryTarget is an attached main command as serveStream drives it: start
// resumes its sandbox (FrameResume), and a start refused ends the stream.
type primaryTarget struct {
	ap      *AttachedPrimary
	start   func() error
	refused chan error
}

func (p primaryTarget) resume() {
	if err := p.start(); err != nil {
		select {
		case p.refused <- err:
		default:
		}
	}
}

func (p primaryTarget) running() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
func (p primaryTarget) resize(height, width uint) error { return p.ap.Resize(height, width) }
func (p primaryTarget) signal(sig string) error         { return p.ap.Signal(sig) }
func (p primaryTarget) close()                          { p.ap.Close() }
func (p primaryTarget) direct() (*os.File, []byte)      { return nil, nil }
func (p primaryTarget) endDirect()                      {}
func (p primaryTarget) wait() client.ExitFrame {
	var end PrimaryEnd
	select {
	case end = <-p.ap.Done:
	case err := <-p.refused:
		p.ap.Close()
		return client.ExitFrame{ExitCode: -1, Error: err.Error()}
	}
	if end.Err != nil {
		return client.ExitFrame{ExitCode: -1, Error: end.Err.Error()}
	}
	return client.ExitFrame{ExitCode: end.ExitCode, DaemonsStopping: end.DaemonsStopping}
}
