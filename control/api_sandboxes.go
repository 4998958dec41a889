package control

import (
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/manifest"
)

func (s *server) create(w http.ResponseWriter, r *http.Request) {
	var req client.CreateRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	creq, err := fromCreateRequest(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.svc.Create(r.Context(), creq)
	if err != nil {
		writeSnapshotError(w, err) // writeError's, and a from_snapshot's
		return
	}
	writeJSON(w, http.StatusAccepted, toClientSandbox(sb))
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	labels := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "label filters are KEY=VALUE"})
			return
		}
		labels[k] = v
	}
	list, err := s.svc.List(labels)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]client.Sandbox, 0, len(list))
	for _, sb := range list {
		out = append(out, toClientSandbox(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientSandbox(sb))
}

func (s *server) stop(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Stop(r.PathValue("id"), "")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, toClientSandbox(sb))
}

func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	var req client.ResumeRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	sb, err := s.svc.Resume(r.PathValue("id"), req.Secrets)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, toClientSandbox(sb))
}

func (s *server) remove(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Delete(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, toClientSandbox(sb))
}

// fromCreateRequest is the service's create request for the API's.
func fromCreateRequest(req *client.CreateRequest) (*CreateRequest, error) {
	out := &CreateRequest{ID: req.ID, Kind: req.Kind, Secrets: req.Secrets, Command: req.Command, Env: req.Env,
		EnvSecrets: req.EnvSecrets, Workdir: req.Workdir, TTY: req.TTY, Stdin: req.Stdin, Labels: req.Labels,
		Quiet: req.Quiet, RemoveOnExit: req.RemoveOnExit, FastEnd: req.FastEnd, Start: req.Start, CLIPid: req.CLIPid, CLIStart: req.CLIStart, ClientFiles: req.ClientFiles, NoPool: req.NoPool, ToolEnv: req.ToolEnv, FromSnapshot: req.FromSnapshot}
	if req.Manifest != nil {
		w := manifest.Wire(*req.Manifest)
		out.Manifest = &w
	}
	var err error
	if out.Engine, err = endpointFromWire(req.Engine); err != nil {
		return nil, err
	}
	if out.Lifetime, err = lifetimeFromWire(req.LifetimeRequest); err != nil {
		return nil, err
	}
	if req.ManifestTOML != "" || req.ManifestDoc != nil || req.ProjectDir != "" || req.Vars != nil {
		out.Text = &ManifestText{TOML: req.ManifestTOML, Doc: req.ManifestDoc, ProjectDir: req.ProjectDir, Vars: req.Vars}
	}
	return out, nil
}

// toClientSandbox is the API's view of a sandbox.
func toClientSandbox(sb Sandbox) client.Sandbox {
	rec := sb.Record
	out := client.Sandbox{ID: rec.ID, State: rec.State, Kind: rec.Kind, Project: rec.Project, Labels: rec.Labels,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Reason: rec.Reason, LastSeq: rec.LastSeq, Container: rec.ContainerID,
		Daemons: client.DaemonCount{Up: sb.DaemonsUp, Total: len(sb.DaemonNames)}, DaemonNames: sb.DaemonNames,
		MainExitCode: sb.MainExitCode}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Engine = wireEngine(sb.Engine)
	if rec.State != store.StateDeleting && rec.State != store.StateDeleted {
		out.Lifetime = wireLifetime(rec.Lifetime)
	}
	for _, p := range sb.Ports {
		out.Ports = append(out.Ports, client.Port(p))
	}
	return out
}

func (s *server) compare(w http.ResponseWriter, r *http.Request) {
	var req client.CompareRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	creq := &CompareRequest{Secrets: req.Secrets}
	if req.Manifest != nil {
		m := manifest.Wire(*req.Manifest)
		creq.Manifest = &m
	}
	var err error
	if creq.Engine, err = endpointFromWire(req.Engine); err != nil {
		writeError(w, err)
		return
	}
	cmp, err := s.svc.Compare(r.Context(), r.PathValue("id"), creq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.Comparison{Same: cmp.Same, Found: cmp.Found})
}
