package control

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// FuzzCreateRequest feeds the daemon's create endpoint's decoding and checks
// (what runs before anything is reserved or created) arbitrary bodies: they must
// never panic, and every refusal is an API error with a reason, never a 500.
func FuzzCreateRequest(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"run","manifest":{"resolved":{"sandbox":{"image":"busybox"}},"file":"/p/sandbox.toml","project_dir":"/p"}}`,
		`{"kind":"up","manifest":{"resolved":{"sandbox":{"image":"x","cpus":1e300}},"project_dir":"/p"}}`,
		`{"kind":"run","manifest":{"resolved":{"sandbox":{"image":"x"},"daemons":{"d":{"command":["a\u0000"],"signal":"SIGBOGUS"}}}}}`,
		`{"kind":"run","manifest":{"resolved":{"sandbox":{"image":"x","egress":{"allow":["*."]}}}}}`,
		`{"kind":"bogus"}`, `{}`, `[]`, `{"manifest":null}`, `not json`,
		`{"kind":"run","engine":{"host":"kubernetes:///a?pod=%7B"}}`, `{"kind":"run","engine":{"host":"unix:///d.sock","kubernetes":{"namespace":"a"}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/sandboxes", bytes.NewReader(body))
		var req client.CreateRequest
		if err := decode(r, &req); err != nil {
			checkAPIError(t, err)
			return
		}
		creq, err := fromCreateRequest(&req)
		if err == nil {
			_, err = checkCreate(creq)
		}
		if err != nil {
			checkAPIError(t, err)
		}
	})
}

// checkAPIError fails unless err maps onto an API error with a reason of a
// bad request (a 4xx status), never an internal error.
func checkAPIError(t *testing.T, err error) {
	ce := apiError(err)
	if ce.Reason == "" || ce.Reason == client.ReasonInternal || ce.Status < 400 || ce.Status >= 500 {
		t.Fatalf("a bad request gave %v, status %d (want an API error with a reason)", err, ce.Status)
	}
}
