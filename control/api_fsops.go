package control

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/fsentry"
)

// The files operations' routes (fsops.go): list, stat, remove, mkdir, rename
// and watch, every path a query parameter (any bytes but NUL, percent-encoded).

// watchKeepAlive is how often a quiet watch sends an SSE comment, so that a
// client gone is noticed.
var watchKeepAlive = 15 * time.Second

// listFiles: GET /v1/sandboxes/{id}/files/list?path=P[&depth=N][&limit=N].
func (s *server) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	depth, err := queryInt(q.Get("depth"), "depth")
	if err != nil {
		writeError(w, err)
		return
	}
	limit, err := queryInt(q.Get("limit"), "limit")
	if err != nil {
		writeError(w, err)
		return
	}
	l, err := s.svc.ListFiles(r.Context(), r.PathValue("id"), q.Get("path"), depth, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// statFile: GET /v1/sandboxes/{id}/files/stat?path=P.
func (s *server) statFile(w http.ResponseWriter, r *http.Request) {
	e, err := s.svc.StatFile(r.Context(), r.PathValue("id"), r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// removeFile: DELETE /v1/sandboxes/{id}/files?path=P[&recursive=true].
func (s *server) removeFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rec, err := queryBool(q.Get("recursive"), "recursive")
	if err == nil {
		err = s.svc.RemoveFile(r.Context(), r.PathValue("id"), q.Get("path"), rec)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// removeFiles: POST /v1/sandboxes/{id}/files/remove, a RemoveFilesRequest:
// many paths removed in one exec.
func (s *server) removeFiles(w http.ResponseWriter, r *http.Request) {
	var req client.RemoveFilesRequest
	err := decode(r, &req)
	if err == nil {
		err = s.svc.RemoveFiles(r.Context(), r.PathValue("id"), req)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// makeDir: POST /v1/sandboxes/{id}/files/mkdir?path=P[&parents=true].
func (s *server) makeDir(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	parents, err := queryBool(q.Get("parents"), "parents")
	if err == nil {
		err = s.svc.MakeDir(r.Context(), r.PathValue("id"), q.Get("path"), parents)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// renameFile: POST /v1/sandboxes/{id}/files/rename?from=A&to=B[&overwrite=true].
func (s *server) renameFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	over, err := queryBool(q.Get("overwrite"), "overwrite")
	if err == nil {
		err = s.svc.RenameFile(r.Context(), r.PathValue("id"), q.Get("from"), q.Get("to"), over)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// watchFiles: GET /v1/sandboxes/{id}/files/watch?path=P[&recursive=true]
// [&max_dirs=N][&rate=N], server-sent events: `data:` one event's JSON
// (fsentry.Event), the first of type ready. It ends when the client goes
// away (then so does the watcher in the sandbox), when P is removed (after
// its removed event) or when the watch fails (an event of type error).
func (s *server) watchFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var o WatchOptions
	var err error
	if o.Recursive, err = queryBool(q.Get("recursive"), "recursive"); err == nil {
		if o.MaxDirs, err = queryInt(q.Get("max_dirs"), "max_dirs"); err == nil {
			o.Rate, err = queryInt(q.Get("rate"), "rate")
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	fw, err := s.svc.WatchFiles(r.Context(), r.PathValue("id"), q.Get("path"), o)
	if err != nil {
		writeError(w, err)
		return
	}
	defer fw.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(ev fsentry.Event) bool {
		b, err := json.Marshal(ev)
		if err != nil {
			return false
		}
		var buf bytes.Buffer
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !send(fw.Ready) {
		return
	}
	keep := time.NewTicker(watchKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		case ev, ok := <-fw.Events:
			if !ok {
				if err := fw.Err(); err != nil {
					send(fsentry.Event{Type: fsentry.EventError, Reason: apiError(err).Message})
				}
				return
			}
			if !send(ev) {
				return
			}
		}
	}
}

// queryBool reads a boolean query parameter: "" is false.
func queryBool(v, name string) (bool, error) {
	switch v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, &client.Error{Reason: client.ReasonInvalidRequest, Message: name + " " + strconv.Quote(v) + " is not a boolean: true or false"}
}

// queryInt reads a whole number query parameter: "" is 0.
func queryInt(v, name string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &client.Error{Reason: client.ReasonInvalidRequest, Message: name + " " + strconv.Quote(v) + " is not a whole number"}
	}
	return n, nil
}
