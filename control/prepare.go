package control

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"slices"

	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/registryauth"
)

// PrepareRequest asks for a future create's checks and image work, its
// progress going to the caller (the API's prepare request, decoded).
type PrepareRequest struct {
	// Manifest and Secrets, or Text, as a create's.
	Manifest *manifest.Wire
	Text     *ManifestText
	Secrets  map[string]string
	// Engine is the Docker Engine (or cluster) the sandbox is for; nil for
	// the daemon's own.
	Engine     *engine.Endpoint
	Quiet, TTY bool
	// Credentials are the caller's to pull with, by image reference; an
	// image left out is pulled with the daemon's own (as a create's pull).
	// BuildAuths are the caller's for a build, by registry (nil: the
	// daemon's own). Both are held for the call only.
	Credentials map[string]PullCredentials
	BuildAuths  map[string]registry.AuthConfig
	// ClientFiles: the host paths are on the caller's machine.
	ClientFiles bool
	// ToolEnv: the caller's environment for the tools.
	ToolEnv map[string]string
	// BuildContext is the hash of a build context the caller sent (PUT
	// /v1/build-contexts/{sum}): the image is built from it, which is then
	// removed.
	BuildContext string
}

// PullCredentials are the credentials a caller found for an image, or why it
// found none.
type PullCredentials struct {
	registryauth.Credentials
	// LookupError is the caller's failed lookup: a pull of the image fails
	// with it.
	LookupError string
}

// Prepare checks a prepare request and returns its work, which writes its
// progress to w as it comes and returns how it ended: a request that cannot be
// taken is an error here, before any output. The work's error text is masked
// of the request's credentials and values; they are masked in the daemon's log
// while it runs, and forgotten when it returns.
func (s *Service) Prepare(req *PrepareRequest) (func(ctx context.Context, w io.Writer) error, error) {
	wire, values := req.Manifest, req.Secrets
	if req.Text != nil {
		if req.Manifest != nil {
			return nil, errorf(ErrInvalidRequest, "give a resolved manifest or a manifest text, not both")
		}
		var err error
		if wire, values, err = s.resolveText(req.Text); err != nil {
			return nil, err
		}
	}
	if wire == nil {
		return nil, errorf(ErrInvalidRequest, "a manifest is required")
	}
	resolved, err := fromWire(*wire, values)
	if err != nil {
		return nil, err
	}
	rt := s.rt
	if req.Engine != nil && !req.Engine.IsZero() {
		rt = s.runtimeFor(*req.Engine)
	}
	var buildTar string
	dropContext := func() {}
	if req.BuildContext != "" {
		if resolved.Sandbox.Build == nil {
			return nil, errorf(ErrInvalidRequest, "build_context is for a manifest with [sandbox.build]")
		}
		if buildTar, dropContext, err = s.buildContexts.take(req.BuildContext); err != nil {
			return nil, err
		}
	}
	held := slices.Collect(maps.Values(values))
	for _, c := range req.Credentials {
		held = append(held, secretsOf(c.AuthConfig())...)
	}
	for _, a := range req.BuildAuths {
		held = append(held, secretsOf(a)...)
	}
	creds := req.Credentials
	o := backend.PrepareOptions{ProgressTTY: req.TTY, Quiet: req.Quiet, BuildAuths: req.BuildAuths, ClientFiles: req.ClientFiles, ToolEnv: req.ToolEnv,
		BuildTar: buildTar, BuildSum: req.BuildContext,
		Credentials: func(ref string) (registryauth.Credentials, bool, error) {
			c, ok := creds[ref]
			if ok && c.LookupError != "" {
				return c.Credentials, true, errors.New(c.LookupError)
			}
			return c.Credentials, ok, nil
		}}
	return func(ctx context.Context, w io.Writer) error {
		defer dropContext()
		s.cfg.Redactor.Add(held...)
		defer s.cfg.Redactor.Remove(held...)
		o.Progress = s.cfg.Redactor.Writer(w)
		err := rt.Prepare(ctx, resolved, o)
		if err != nil {
			err = &maskedError{err: err, msg: s.cfg.Redactor.RedactString(err.Error())}
			s.log.Info("prepare failed", "project", resolved.ProjectDir, "engine", rt.Location().String(), "error", err.Error())
		}
		return err
	}, nil
}

// secretsOf are the values of a registry credential that must not be shown.
func secretsOf(a registry.AuthConfig) []string {
	out := []string{a.Password, a.Auth, a.IdentityToken, a.RegistryToken}
	if a.Username != "" && a.Password != "" {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(a.Username+":"+a.Password)))
	}
	return out
}

// maskedError is an error whose text had secret values masked; errors.As still
// finds what it wraps (the exit code of a *backend.Error).
type maskedError struct {
	err error
	msg string
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }
