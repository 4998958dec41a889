package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
)

type imageInspect = image.InspectResponse

// ensureImage makes ref available: present locally, or pulled with a progress display.
func (rt *Runtime) ensureImage(ctx context.Context, ref string) (image.InspectResponse, error) {
	img, err := rt.Engine.ImageInspect(ctx, ref)
	if err == nil {
		return img, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return img, failed("cannot inspect image %s: %v", ref, err)
	}
	if err := rt.pull(ctx, ref); err != nil {
		return img, err
	}
	img, err = rt.Engine.ImageInspect(ctx, ref)
	if err != nil {
		return img, failed("image %s is missing after its pull: %v", ref, err)
	}
	return img, nil
}

// pullMessage is one line of the Engine's pull progress stream.
type pullMessage struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Progress       string `json:"progress"`
	ProgressDetail struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
	Error       string `json:"error"`
	ErrorDetail struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

func (rt *Runtime) pull(ctx context.Context, ref string) error {
	rt.notice("pulling image %s", ref)
	rc, err := rt.Engine.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return failed("image %s is not available locally and cannot be pulled: %v", ref, err)
	}
	defer rc.Close()
	p := newProgress(rt.Progress, rt.ProgressTTY && !rt.Quiet, rt.Quiet)
	defer p.done()
	dec := json.NewDecoder(rc)
	for {
		var m pullMessage
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return failed("cannot pull image %s: %v", ref, err)
		}
		if m.Error != "" {
			return failed("image %s is not available locally and cannot be pulled: %s", ref, m.Error)
		}
		p.update(m.ID, m.Status, m.Progress)
	}
}

// progress shows one line per layer: redrawn in place on a terminal, printed as
// plain lines (status changes only) otherwise.
type progress struct {
	w      io.Writer
	tty    bool
	quiet  bool
	order  []string
	lines  map[string]string
	drawn  int
	plain  map[string]string
	global []string
}

func newProgress(w io.Writer, tty, quiet bool) *progress {
	return &progress{w: w, tty: tty, quiet: quiet || w == nil, lines: map[string]string{}, plain: map[string]string{}}
}

func (p *progress) update(id, status, bar string) {
	if p.quiet {
		return
	}
	if id == "" {
		fmt.Fprintf(p.w, "%s\n", status)
		return
	}
	if !p.tty {
		if p.plain[id] != status {
			p.plain[id] = status
			fmt.Fprintf(p.w, "%s: %s\n", id, status)
		}
		return
	}
	if _, ok := p.lines[id]; !ok {
		p.order = append(p.order, id)
	}
	p.lines[id] = strings.TrimSpace(status + " " + bar)
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\x1b[%dA", p.drawn)
	}
	for _, l := range p.order {
		fmt.Fprintf(p.w, "\x1b[2K%s: %s\n", l, p.lines[l])
	}
	p.drawn = len(p.order)
}

func (p *progress) done() {}

// sortedEnvKeys returns the keys of an env map in order.
func sortedEnvKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
