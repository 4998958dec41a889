package control

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/client"
)

// readFiles: GET /v1/sandboxes/{id}/files?path=P. Accept: application/x-tar
// gives a tar stream, anything else one regular file's bytes. Once the
// headers are sent an error can only break the connection: a tar stream over
// the bound, or one the backend ends early, is aborted, never ended cleanly.
func (s *server) readFiles(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, err := s.svc.ReadFiles(r.Context(), id, r.URL.Query().Get("path"), accepts(r, client.MediaTar))
	if err != nil {
		writeError(w, err)
		return
	}
	defer d.Close()
	if d.Tar {
		w.Header().Set("Content-Type", client.MediaTar)
	} else {
		w.Header().Set("Content-Type", client.MediaBytes)
		w.Header().Set("Content-Length", strconv.FormatInt(d.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, d.Body); err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("files: a transfer was broken off", "sandbox", id, "path", r.URL.Query().Get("path"), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// writeFiles: PUT /v1/sandboxes/{id}/files?path=P[&mode=0644].
// Content-Type: application/x-tar extracts the body into the folder P; any
// other makes it the regular file P.
func (s *server) writeFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	u := Upload{Path: q.Get("path"), Body: r.Body, Size: r.ContentLength, Tar: mt == client.MediaTar, Mode: 0o644}
	if m := q.Get("mode"); m != "" {
		if u.Tar {
			writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "mode is for one file: the entries of an archive (Content-Type: application/x-tar) carry their own"})
			return
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(m, "0o"), 8, 32)
		if err != nil || v > 0o7777 {
			writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "mode " + strconv.Quote(m) + " is not a file mode: an octal number from 0 to 7777 (e.g. 0644)"})
			return
		}
		u.Mode = uint32(v)
	}
	if err := s.svc.WriteFiles(r.Context(), r.PathValue("id"), u); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
