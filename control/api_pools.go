package control

import (
	"net/http"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
)

func (s *server) pools(w http.ResponseWriter, _ *http.Request) {
	list, total, max := s.svc.Pools()
	out := client.PoolList{Pools: make([]client.Pool, 0, len(list)), Pooled: total, PoolMax: max}
	for _, p := range list {
		out.Pools = append(out.Pools, wirePool(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) warmPool(w http.ResponseWriter, r *http.Request) {
	var req client.WarmRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	wreq := &WarmRequest{Secrets: req.Secrets, Size: req.Size}
	if req.Manifest != nil {
		m := manifest.Wire(*req.Manifest)
		wreq.Manifest = &m
	}
	var err error
	if wreq.Engine, err = endpointFromWire(req.Engine); err != nil {
		writeError(w, err)
		return
	}
	if req.ManifestTOML != "" || req.ManifestDoc != nil || req.ProjectDir != "" || req.Vars != nil {
		wreq.Text = &ManifestText{TOML: req.ManifestTOML, Doc: req.ManifestDoc, ProjectDir: req.ProjectDir, Vars: req.Vars}
	}
	p, err := s.svc.WarmPool(r.Context(), wreq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wirePool(p))
}

func (s *server) drainPools(w http.ResponseWriter, r *http.Request) {
	var req client.DrainRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	if req.Project == "" && !req.All {
		writeError(w, errorf(ErrInvalidRequest, "name a project, or all"))
		return
	}
	writeJSON(w, http.StatusOK, client.DrainResult{Removed: s.svc.DrainPools(r.Context(), req.Project)})
}

func wirePool(p PoolStatus) client.Pool {
	out := client.Pool{Key: p.Key, Project: p.Project, File: p.File, Engine: p.Engine, Size: p.Size, Ready: p.Ready,
		Starting: p.Starting, Hits: p.Hits, Misses: p.Misses, Stale: p.Stale, Failures: p.Failures, LastError: p.LastError,
		IdleTTL: p.IdleTTL.String(), LastUsed: p.LastUsed, Sandboxes: make([]client.PooledSandbox, 0, len(p.Sandboxes))}
	if out.Misses == nil {
		out.Misses = map[string]int{}
	}
	for _, m := range p.Sandboxes {
		out.Sandboxes = append(out.Sandboxes, client.PooledSandbox(m))
	}
	return out
}
