package control

import (
	"net/http"
	"strconv"

	"github.com/airlock-dev/airlock/client"
)

// logs: GET /v1/sandboxes/{id}/logs?daemon=NAME[&stream=stdout|stderr|both][&tail=N][&follow=1]
// answers a daemon's log as text, each write flushed (with follow, until the
// sandbox stops or the client goes). stderr=1 is stream=stderr.
func (s *server) logs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := LogRequest{Daemon: q.Get("daemon"), Stream: q.Get("stream"), Follow: truthy(q.Get("follow")), Tail: -1}
	if truthy(q.Get("stderr")) {
		if req.Stream != "" && req.Stream != client.StreamStderr {
			writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "stderr=1 and stream=" + req.Stream + " disagree: give one"})
			return
		}
		req.Stream = client.StreamStderr
	}
	switch req.Stream {
	case "", client.StreamStdout, client.StreamStderr, client.StreamBoth:
	default:
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "stream " + strconv.Quote(req.Stream) + " is not stdout, stderr or both"})
		return
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "tail " + strconv.Quote(v) + " is not a number of lines (0 or more)"})
			return
		}
		req.Tail = n
	}
	write, err := s.svc.DaemonLog(r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	write(r.Context(), &flushWriter{w: w, rc: http.NewResponseController(w)})
}

// truthy is a query flag: 1 or true.
func truthy(v string) bool { return v == "1" || v == "true" }

// flushWriter flushes every write to the client.
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
