package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/registryauth"
)

// [sandbox.build] (design.md §7) builds the sandbox image through the Engine API with
// the classic builder (Engine 20.10 offers no BuildKit over the API without a
// session), from the context projectfs.ReadBuildContext reads (or one a client
// sent), tagged by its hash (projectfs.BuildTag). While the hash is unchanged the
// tagged image is reused without a build. A built image is labelled
// dev.airlock.project=<project dir>.

// Build builds [sandbox.build] through the Engine API and returns the image reference.
func (w *Work) Build(ctx context.Context, r *manifest.Resolved) (string, error) {
	var src buildInput
	if w.Out.BuildTar != "" {
		// A context a client on another machine sent (PUT /v1/build-contexts).
		src = buildInput{tag: projectfs.BuildTag(r.ProjectDir, w.Out.BuildSum), from: "the context sent by the client",
			dockerfile: uploadedDockerfile(r), args: r.Sandbox.Build.Args,
			tar: func(wr io.Writer) error {
				f, err := os.Open(w.Out.BuildTar)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(wr, f)
				return err
			}}
	} else {
		bs, err := projectfs.ReadBuildContext(r)
		if err != nil {
			return "", err
		}
		src = buildInput{tag: bs.Tag, from: bs.Dir, dockerfile: bs.Dockerfile, args: bs.Args, tar: bs.WriteTar}
	}
	tag := src.tag
	if _, err := w.Engine.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", failed("cannot inspect image %s: %v", tag, err)
	}

	// As docker build: every stored credential goes with the build, for private FROM images.
	auths := w.Out.BuildAuths
	if auths == nil {
		var err error
		if auths, err = registryauth.All(w.Getenv); err != nil {
			return "", failed("cannot build the sandbox image: %v", err)
		}
	}
	w.Notice("building image %s from %s", tag, src.from)
	pr, pw := io.Pipe()
	defer pr.Close() // unblocks the writer when the Engine stops reading early
	go func() { pw.CloseWithError(src.tar(pw)) }()
	args := make(map[string]*string, len(src.args))
	for k, v := range src.args {
		args[k] = &v
	}
	resp, err := w.Engine.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  src.dockerfile,
		BuildArgs:   args,
		Labels:      BuildLabels(w.Owner, r.ProjectDir),
		AuthConfigs: auths,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return "", failed("cannot build the sandbox image: %v", err)
	}
	defer resp.Body.Close()
	if err := w.buildOutput(resp.Body); err != nil {
		return "", failed("cannot build the sandbox image: %v", err)
	}
	if _, err := w.Engine.ImageInspect(ctx, tag); err != nil {
		return "", failed("cannot build the sandbox image: %s is missing after the build: %v", tag, err)
	}
	return tag, nil
}

// buildInput is what a build sends the Engine.
type buildInput struct {
	tag, from  string
	dockerfile string // slash path in the context
	args       map[string]string
	tar        func(io.Writer) error
}

// uploadedDockerfile is the Dockerfile's path in a context a client sent.
func uploadedDockerfile(r *manifest.Resolved) string {
	df := r.Sandbox.Build.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	return path.Clean(filepath.ToSlash(df))
}

// buildMessage is one JSON message of the classic builder's output stream.
type buildMessage struct {
	Stream      string        `json:"stream"`
	Status      string        `json:"status"`
	ID          string        `json:"id"`
	Progress    *jsonProgress `json:"progressDetail"`
	Error       string        `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// buildOutput reads the build stream to its end, copying its text to the progress
// writer as plain lines ("Step 1/3 : FROM …"), and returns the error it reports.
func (w *Work) buildOutput(r io.Reader) error {
	show := !w.Out.Quiet && w.Out.Progress != nil
	var partial strings.Builder // text of the line being received
	flush := func(all bool) {
		s := partial.String()
		for {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				break
			}
			if show {
				fmt.Fprintln(w.Out.Progress, strings.TrimRight(s[:i], "\r"))
			}
			s = s[i+1:]
		}
		if all && s != "" {
			if show {
				fmt.Fprintln(w.Out.Progress, s)
			}
			s = ""
		}
		partial.Reset()
		partial.WriteString(s)
	}
	// Base images pulled by FROM report layer progress, shown like a pull.
	p := newProgress(w.Out.Progress, w.Out.ProgressTTY, !show)
	defer p.done()
	dec := json.NewDecoder(r)
	for {
		var m buildMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			flush(true)
			return nil
		} else if err != nil {
			flush(true)
			return fmt.Errorf("cannot read the build output: %v", err)
		}
		if m.Stream != "" {
			partial.WriteString(m.Stream)
			flush(false)
		}
		if m.Status != "" {
			flush(true)
			p.update(m.ID, m.Status, m.Progress)
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			flush(true)
			return errors.New(strings.TrimSpace(msg))
		}
	}
}
