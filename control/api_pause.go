package control

import "net/http"

// pause is POST /v1/sandboxes/{id}/pause: 200 and the record once frozen.
func (s *server) pause(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Pause(r.PathValue("id"), "")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientSandbox(sb))
}

// unpause is POST /v1/sandboxes/{id}/unpause: 200 and the record once thawed.
func (s *server) unpause(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Unpause(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientSandbox(sb))
}
