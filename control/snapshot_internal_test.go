package control

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// TestSnapshotsNotSupportedOnKubernetes: a backend that cannot take
// snapshots (the Kubernetes one) makes a snapshot, a create from a snapshot
// and a fork a clear "not supported by this backend", 501 not_supported on
// the API, naming the cluster.
func TestSnapshotsNotSupportedOnKubernetes(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := NewService(st, &stopRecorder{}, Config{OpenEngine: func(ep engine.Endpoint) (backend.Backend, error) {
		return &clusterBackend{ep: ep}, nil
	}})
	ctx := context.Background()
	eng, _ := json.Marshal(kubeTyped)
	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp, Engine: eng}, store.Event{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(rec.ID, store.Event{Kind: "sandbox.ready"}, store.StateReady); err != nil {
		t.Fatal(err)
	}
	ep := kubeTyped
	for what, err := range map[string]error{
		"snapshot": func() error { _, err := s.TakeSnapshot(ctx, rec.ID, "k"); return err }(),
		"fork":     func() error { _, _, err := s.Fork(ctx, rec.ID, 2, nil); return err }(),
		"create":   func() error { _, err := s.Create(ctx, &CreateRequest{FromSnapshot: "k", Engine: &ep}); return err }(),
	} {
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "not supported by this backend") || !strings.Contains(err.Error(), "kubernetes") {
			t.Errorf("%s on Kubernetes: %v", what, err)
			continue
		}
		w := httptest.NewRecorder()
		writeSnapshotError(w, err)
		var ce client.Error
		if w.Code != http.StatusNotImplemented || json.Unmarshal(w.Body.Bytes(), &ce) != nil || ce.Reason != client.ReasonNotSupported {
			t.Errorf("%s on Kubernetes answers %d %s", what, w.Code, w.Body)
		}
	}
}
