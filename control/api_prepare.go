package control

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/registryauth"
)

// prepare answers POST /v1/prepare: a request the daemon cannot take is an
// ordinary error answer; else 200 and NDJSON, the progress frames flushed as
// they are written, then the last frame with the exit code (and the error).
func (s *server) prepare(w http.ResponseWriter, r *http.Request) {
	var req client.PrepareRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	preq, err := fromPrepareRequest(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	work, err := s.svc.Prepare(preq)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", client.NDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	out := &frameWriter{w: w, rc: http.NewResponseController(w)}
	err = work(r.Context(), out)
	code := 0
	last := client.PrepareFrame{ExitCode: &code}
	if err != nil {
		last.Error = apiError(err)
		code = prepareExitCode(err, last.Error.Reason)
	}
	out.frame(last)
}

// prepareExitCode is the exit code of a failed prepare, as a failed create's
// (exitExtra): a runtime error's own, 2 for a request or manifest the user must
// fix, else 125.
func prepareExitCode(err error, reason string) int {
	var se *backend.Error
	switch {
	case errors.As(err, &se):
		return se.Code
	case reason == client.ReasonConfig || reason == client.ReasonInvalidRequest:
		return 2
	}
	return 125
}

// frameWriter writes each Write as a progress frame, flushed at once. A client
// that went away is written to no more (its request's context ends the work).
type frameWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	broken bool
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.frame(client.PrepareFrame{Progress: string(p)})
	return len(p), nil
}

func (f *frameWriter) frame(fr client.PrepareFrame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return
	}
	enc := json.NewEncoder(f.w)
	enc.SetEscapeHTML(false) // progress is read by people, not pasted into HTML
	if enc.Encode(fr) != nil || f.rc.Flush() != nil {
		f.broken = true
	}
}

// fromPrepareRequest is the service's prepare request for the API's.
func fromPrepareRequest(req *client.PrepareRequest) (*PrepareRequest, error) {
	out := &PrepareRequest{Secrets: req.Secrets, Quiet: req.Quiet, TTY: req.TTY, ClientFiles: req.ClientFiles, BuildContext: req.BuildContext, ToolEnv: req.ToolEnv}
	if req.Manifest != nil {
		w := manifest.Wire(*req.Manifest)
		out.Manifest = &w
	}
	if req.ManifestTOML != "" || req.ManifestDoc != nil || req.ProjectDir != "" || req.Vars != nil {
		out.Text = &ManifestText{TOML: req.ManifestTOML, Doc: req.ManifestDoc, ProjectDir: req.ProjectDir, Vars: req.Vars}
	}
	var err error
	if out.Engine, err = endpointFromWire(req.Engine); err != nil {
		return nil, err
	}
	if req.RegistryAuth != nil {
		out.Credentials = make(map[string]PullCredentials, len(req.RegistryAuth))
	}
	for ref, a := range req.RegistryAuth {
		c, err := registryauth.Given(ref, authConfig(a), a.Source, a.Where, a.Warning)
		if err != nil {
			return nil, errorf(ErrInvalidRequest, "registry_auth: %v", err)
		}
		out.Credentials[ref] = PullCredentials{Credentials: c, LookupError: a.Error}
	}
	if req.BuildAuth != nil {
		out.BuildAuths = make(map[string]registry.AuthConfig, len(req.BuildAuth))
	}
	for key, a := range req.BuildAuth {
		out.BuildAuths[key] = authConfig(a)
	}
	return out, nil
}

func authConfig(a client.RegistryAuth) registry.AuthConfig {
	return registry.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth, IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken, ServerAddress: a.ServerAddress}
}

// putBuildContext answers PUT /v1/build-contexts/{sum}: a tar body kept for
// the prepare that names it.
func (s *server) putBuildContext(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.PutBuildContext(r.PathValue("sum"), r.Body); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
