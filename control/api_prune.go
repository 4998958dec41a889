package control

import (
	"net/http"

	"github.com/airlock-dev/airlock/client"
)

func (s *server) prune(w http.ResponseWriter, r *http.Request) {
	var req client.PruneRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	preq := &PruneRequest{DryRun: req.DryRun, All: req.All}
	var err error
	if preq.Engine, err = endpointFromWire(req.Engine); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.svc.Prune(r.Context(), preq)
	if err != nil {
		writeError(w, err)
		return
	}
	out := client.PruneResult{DryRun: res.DryRun, Removed: make([]client.PrunedObject, 0, len(res.Removed)), Reclaimed: res.Reclaimed, Errors: res.Errors}
	for _, o := range res.Removed {
		out.Removed = append(out.Removed, client.PrunedObject(o))
	}
	writeJSON(w, http.StatusOK, out)
}
