package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// PrepareRequest asks the daemon to do a future create's checks and image work
// now, with its progress streamed back (POST /v1/prepare): the host side of the
// manifest is checked (a missing mount source with missing = "fail" is a config
// error), and the sandbox image is built from [sandbox.build] or pulled when
// missing, as is every service's image. The manifest is given as a create
// takes it: Manifest and Secrets, or a ManifestSource (ManifestTOML or
// ManifestDoc with Vars and ProjectDir).
type PrepareRequest struct {
	Manifest *Manifest         `json:"manifest,omitempty"`
	Secrets  map[string]string `json:"secrets,omitempty"`
	ManifestSource
	// Engine is the Docker Engine (or Kubernetes cluster) the sandbox is to
	// be created on; nil for the daemon's own.
	Engine *Engine `json:"engine,omitempty"`
	// Quiet leaves out the progress and notices: only the last frame comes.
	Quiet bool `json:"quiet,omitempty"`
	// TTY draws the progress for a terminal (one line per layer, redrawn in
	// place) rather than as plain lines.
	TTY bool `json:"tty,omitempty"`
	// RegistryAuth are the credentials to pull with, by image reference as
	// the manifest names it (sandbox.image, services.NAME.image): the
	// caller's, as docker pull finds them. They are used for this request
	// only, never stored, logged or shown. An image left out is pulled with
	// the credentials the daemon's own environment has, as a create's.
	RegistryAuth map[string]RegistryAuth `json:"registry_auth,omitempty"`
	// BuildAuth are the credentials a build from [sandbox.build] sends (for
	// its FROM images), by registry as the docker config keys them
	// ("registry.example:5000", "https://index.docker.io/v1/"); left out,
	// the daemon's own. For this request only, as RegistryAuth.
	BuildAuth map[string]RegistryAuth `json:"build_auth,omitempty"`
	// ClientFiles: the manifest's host paths are on the caller's machine
	// (CreateRequest.ClientFiles): mounts are checked as on a remote Engine.
	ClientFiles bool `json:"client_files,omitempty"`
	// ToolEnv: as CreateRequest.ToolEnv.
	ToolEnv map[string]string `json:"tool_env,omitempty"`
	// BuildContext is the hash of the [sandbox.build] context the caller sent
	// with PutBuildContext: the image is built from it (and tagged by it)
	// rather than from a directory on the daemon's machine.
	BuildContext string `json:"build_context,omitempty"`
}

// PutBuildContext sends a [sandbox.build] context (a tar stream, as the
// builder takes it) whose hash is sum, for the next Prepare that names it.
func (c *Client) PutBuildContext(ctx context.Context, sum string, tar io.Reader) error {
	resp, err := c.sendRaw(ctx, http.MethodPut, "/v1/build-contexts/"+url.PathEscape(sum), tar, http.Header{"Content-Type": {"application/x-tar"}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// RegistryAuth is a registry credential, as the docker CLI's config holds one
// (a user and password, or auth, the base64 of user:password, or a token),
// and, for messages only, where the caller found it. Print it freely: its
// String shows no secret.
type RegistryAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identity_token,omitempty"`
	RegistryToken string `json:"registry_token,omitempty"`
	ServerAddress string `json:"server_address,omitempty"`
	// Source is where the credentials came from ("/home/me/.docker/config.json",
	// "credential helper docker-credential-pass"); "" when there are none.
	Source string `json:"source,omitempty"`
	// Where is where the caller looked for them, and Warning why it found
	// none (a credential helper that failed): both for the error of a pull
	// the registry refused.
	Where   string `json:"where,omitempty"`
	Warning string `json:"warning,omitempty"`
	// Error is the caller's failed lookup (a config.json that does not
	// parse): a pull of the image fails with it.
	Error string `json:"error,omitempty"`
}

// String says whose credentials these are, never the secret.
func (a RegistryAuth) String() string {
	if a.Source == "" {
		return "registry credentials (none)"
	}
	return "registry credentials from " + a.Source
}

// GoString keeps %#v from printing the secret.
func (a RegistryAuth) GoString() string { return a.String() }

// PrepareFrame is one line of a prepare's answer (NDJSON): the progress as it
// comes, then a last frame with the exit code: 0 when the images are ready, else
// the exit code a CLI ends with (2 for a config error, 125 otherwise) and the
// error.
type PrepareFrame struct {
	// Progress is text of the progress display and notices, as written
	// (lines; with tty, a terminal's redraws).
	Progress string `json:"progress,omitempty"`
	// ExitCode is set on the last frame only.
	ExitCode *int `json:"exit_code,omitempty"`
	// Error is why the prepare failed (the last frame of a failure).
	Error *Error `json:"error,omitempty"`
}

// PrepareError is the failure a prepare's last frame reports.
type PrepareError struct {
	ExitCode int // 2 for a config error, else 125
	Err      *Error
}

func (e *PrepareError) Error() string { return e.Err.Message }

// Unwrap gives the API error, so that errors.Is matches its reason.
func (e *PrepareError) Unwrap() error { return e.Err }

// Prepare does a future create's checks and image work in the daemon (see
// PrepareRequest), writing its progress to progress (nil: discarded) as it
// comes. A request the daemon refuses is an *Error; a prepare that failed a
// *PrepareError with its exit code.
func (c *Client) Prepare(ctx context.Context, req *PrepareRequest, progress io.Writer) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("cannot encode the request: %w", err)
	}
	resp, err := c.sendRaw(ctx, http.MethodPost, "/v1/prepare", bytes.NewReader(b),
		http.Header{"Content-Type": {"application/json"}, "Accept": {NDJSON}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var f PrepareFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return fmt.Errorf("cannot decode a frame of the prepare's stream: %w", err)
		}
		switch {
		case f.ExitCode != nil && *f.ExitCode == 0:
			return nil
		case f.ExitCode != nil:
			e := f.Error
			if e == nil {
				e = &Error{Reason: ReasonInternal, Message: "the prepare failed"}
			}
			return &PrepareError{ExitCode: *f.ExitCode, Err: e}
		case f.Progress != "" && progress != nil:
			if _, err := io.WriteString(progress, f.Progress); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read the prepare's stream: %w", err)
	}
	return fmt.Errorf("cannot read the prepare's stream: it ended before its result")
}
