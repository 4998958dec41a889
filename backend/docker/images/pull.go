// Package images is the Docker backend's image work: the sandbox image pulled
// (with the credentials `docker pull` would send, and its progress shown) or
// built from [sandbox.build], and the pruning of the images a daemon built.
package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/go-units"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/registryauth"
)

// Work is the image side of one create or prepare: the Engine, the host
// environment (for registry credentials), the daemon's owner key (put on the
// images it builds), and the call's output and credentials.
type Work struct {
	Engine client.APIClient
	Getenv func(string) (string, bool)
	Owner  string
	Out    backend.PrepareOptions
}

func failed(format string, args ...any) error {
	return &backend.Error{Code: 125, Err: fmt.Errorf(format, args...)}
}

// Notice prints a line of the call's output ("airlock: ..."), unless quiet.
func (w *Work) Notice(format string, args ...any) {
	if w.Out.Quiet || w.Out.Progress == nil {
		return
	}
	fmt.Fprintf(w.Out.Progress, "airlock: "+format+"\n", args...)
}

// Sandbox returns the sandbox image: built from [sandbox.build], or
// sandbox.image (pulled when missing).
func (w *Work) Sandbox(ctx context.Context, r *manifest.Resolved) (string, image.InspectResponse, error) {
	if r.Sandbox.Build != nil {
		ref, err := w.Build(ctx, r)
		if err != nil {
			return "", image.InspectResponse{}, err
		}
		img, err := w.Engine.ImageInspect(ctx, ref)
		if err != nil {
			return "", image.InspectResponse{}, failed("cannot inspect the built image %s: %v", ref, err)
		}
		return ref, img, nil
	}
	img, err := w.Ensure(ctx, r.Sandbox.Image)
	return r.Sandbox.Image, img, err
}

// Ensure makes ref available: present locally, or pulled with a progress display.
func (w *Work) Ensure(ctx context.Context, ref string) (image.InspectResponse, error) {
	img, err := w.Engine.ImageInspect(ctx, ref)
	if err == nil {
		return img, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return img, failed("cannot inspect image %s: %v", ref, err)
	}
	if err := w.pull(ctx, ref); err != nil {
		return img, err
	}
	img, err = w.Engine.ImageInspect(ctx, ref)
	if err != nil {
		return img, failed("image %s is missing after its pull: %v", ref, err)
	}
	return img, nil
}

// jsonProgress is the progressDetail of a pull or build message.
type jsonProgress struct {
	Current int64 `json:"current"`
	Total   int64 `json:"total"`
}

// pullMessage is one line of the Engine's pull progress stream.
type pullMessage struct {
	ID             string        `json:"id"`
	Status         string        `json:"status"`
	ProgressDetail *jsonProgress `json:"progressDetail"`
	Error          string        `json:"error"`
	ErrorDetail    *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// pull pulls ref with the credentials `docker pull` would send (registryauth:
// the caller's, else as this process finds them), showing progress. A registry
// that wants credentials it did not get, or refuses them, is an error that says
// which `docker login` to run.
func (w *Work) pull(ctx context.Context, ref string) error {
	creds, given, err := registryauth.Credentials{}, false, error(nil)
	if w.Out.Credentials != nil {
		creds, given, err = w.Out.Credentials(ref)
	}
	if !given && err == nil {
		creds, err = registryauth.For(ref, w.Getenv)
	}
	if err != nil {
		return failed("cannot pull image %s: %v", ref, err)
	}
	w.Notice("pulling image %s", ref)
	rc, err := w.Engine.ImagePull(ctx, ref, image.PullOptions{RegistryAuth: creds.Header()})
	if err != nil {
		return pullError(ref, creds, err.Error(), cerrdefs.IsUnauthorized(err))
	}
	defer rc.Close()
	p := newProgress(w.Out.Progress, w.Out.ProgressTTY, w.Out.Quiet)
	defer p.done()
	dec := json.NewDecoder(rc)
	for {
		var m pullMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return failed("cannot pull image %s: %v", ref, err)
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			return pullError(ref, creds, strings.TrimSpace(msg), false)
		}
		p.update(m.ID, m.Status, m.ProgressDetail)
	}
}

// unauthorizedMessages mark the Engine's reports of a registry that wants
// credentials or refused them (the Engine reports them as plain text).
var unauthorizedMessages = []string{"no basic auth credentials", "unauthorized", "authentication required"}

// pullError is the error of a failed pull: for want of credentials, what to do.
func pullError(ref string, creds registryauth.Credentials, msg string, unauthorized bool) error {
	msg = strings.TrimPrefix(msg, "Error response from daemon: ")
	for _, m := range unauthorizedMessages {
		unauthorized = unauthorized || strings.Contains(strings.ToLower(msg), m)
	}
	if !unauthorized {
		return failed("cannot pull image %s, which is not available locally: %s", ref, msg)
	}
	why := "no credentials for " + creds.Host + " in " + creds.Where()
	switch {
	case creds.Found():
		why = "the registry refused the credentials from " + creds.Source + ": " + msg
	case creds.Warning != "":
		why = "no credentials for " + creds.Host + ": " + creds.Warning
	}
	return failed("cannot pull image %s: unauthorized: run %s (%s)", ref, creds.Login(), why)
}

// progressWidth bounds a line drawn on a terminal: a line that wraps would break
// the cursor arithmetic of the redraw.
const progressWidth = 79

// progress shows pull progress. On a terminal it keeps one line per layer (status
// and bytes) and redraws that block in place; a message without a layer is printed
// below the block, which then stays as it is. Otherwise it prints plain lines, one per layer status change
// ("a1b2c3d4e5f6: Pull complete"), and messages without a layer as they come.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool
	order []string          // layer IDs, first seen first
	lines map[string]string // layer ID → its rendered line
	drawn int               // lines of the block on screen, below which the cursor is
}

func newProgress(w io.Writer, tty, quiet bool) *progress {
	return &progress{w: w, tty: tty, quiet: quiet || w == nil, lines: map[string]string{}}
}

func (p *progress) update(id, status string, detail *jsonProgress) {
	status = strings.TrimSpace(status)
	if p.quiet || status == "" {
		return
	}
	if !p.tty {
		if id == "" {
			fmt.Fprintln(p.w, status)
			return
		}
		if p.lines[id] != status {
			p.lines[id] = status
			fmt.Fprintf(p.w, "%s: %s\n", id, status)
		}
		return
	}
	if id == "" {
		// Below the block, which stays as it is; later layer lines start a new one.
		// Never redrawn, so never clipped.
		fmt.Fprintf(p.w, "%s\n", status)
		p.order, p.lines, p.drawn = nil, map[string]string{}, 0
		return
	}
	line := id + ": " + status
	if detail != nil && detail.Total > 0 {
		line += fmt.Sprintf(" %s/%s", units.HumanSize(float64(detail.Current)), units.HumanSize(float64(detail.Total)))
	} else if detail != nil && detail.Current > 0 {
		line += " " + units.HumanSize(float64(detail.Current))
	}
	line = clip(line)
	old, seen := p.lines[id]
	if seen && old == line {
		return
	}
	if !seen {
		p.order = append(p.order, id)
	}
	p.lines[id] = line
	// Redraw the block from its first line, in one write: no half-drawn block.
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\r\x1b[%dA", p.drawn)
	}
	for _, l := range p.order {
		fmt.Fprintf(&b, "\x1b[2K%s\n", p.lines[l])
	}
	p.drawn = len(p.order)
	io.WriteString(p.w, b.String())
}

// done ends the display; the block stays as last drawn, the cursor below it.
func (p *progress) done() {}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= progressWidth {
		return s
	}
	r := []rune(s)
	return string(r[:progressWidth-1]) + "…"
}
