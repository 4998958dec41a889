package control

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// A cluster as this daemon names it (typed) and as earlier CLIs sent it and
// earlier daemons recorded it (packed in Host), with the Key both computed.
var (
	kubeTyped  = engine.Endpoint{Kubernetes: &engine.Kubernetes{Namespace: "ci", Context: "prod", Image: "registry.example.com/airlock:1", AllowPrivileged: true}}
	kubePacked = "kubernetes:///ci?allow_privileged=true&context=prod&image=registry.example.com%2Fairlock%3A1"
	kubeKey    = "d0d6c9bb4fd86a29"
)

// clusterBackend is a Backend at an endpoint: what runtimeFor opens.
type clusterBackend struct {
	backend.Backend
	ep engine.Endpoint
}

func (b *clusterBackend) Location() engine.Endpoint { return b.ep }
func (*clusterBackend) SetHooks(func(string, string, bool, string), func(string, string, time.Duration)) {
}

// TestKubeEndpointFromWire: the API's engine is read into the typed form,
// a cluster packed in host as earlier CLIs send it included, and answered
// typed; an engine naming both a host and a cluster is a bad request.
func TestKubeEndpointFromWire(t *testing.T) {
	full := client.Engine{Kubernetes: &client.Kubernetes{Namespace: "ci", Context: "prod", Kubeconfig: "/k", Image: "i", AllowPrivileged: true, CreateNamespace: true,
		Pod: &client.KubePod{NodeSelector: map[string]string{"a": "b"}, RuntimeClassName: "gvisor", ServiceAccount: "sa",
			Tolerations: []client.KubeToleration{{Key: "k", Operator: "Exists", Effect: "NoExecute", Seconds: new(int64)}},
			Resources:   &client.KubeResources{Requests: map[string]string{"cpu": "250m"}, Limits: map[string]string{"memory": "4Gi"}}}}}
	for _, tc := range []struct {
		name string
		in   client.Engine
		want engine.Endpoint
	}{
		{"docker", client.Engine{Context: "remote", Host: "tcp://h:2376", TLSCA: "/ca", TLSCert: "/cert", TLSKey: "/key", TLSVerify: true},
			engine.Endpoint{Context: "remote", Host: "tcp://h:2376", TLSCA: "/ca", TLSCert: "/cert", TLSKey: "/key", TLSVerify: true}},
		{"typed", client.Engine{Kubernetes: &client.Kubernetes{Namespace: "ci", Context: "prod", Image: "registry.example.com/airlock:1", AllowPrivileged: true}}, kubeTyped},
		{"packed", client.Engine{Host: kubePacked}, kubeTyped},
	} {
		ep, err := endpointFromWire(&tc.in)
		if err != nil || ep == nil || !reflect.DeepEqual(*ep, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, ep, err, tc.want)
			continue
		}
		if ep.IsKubernetes() != (tc.want.Kubernetes != nil) {
			t.Errorf("%s: IsKubernetes %v", tc.name, ep.IsKubernetes())
		}
	}
	if ep, err := endpointFromWire(nil); ep != nil || err != nil {
		t.Errorf("no engine: %+v, %v", ep, err)
	}
	_, err := endpointFromWire(&client.Engine{Host: "unix:///d.sock", Kubernetes: &client.Kubernetes{Namespace: "a"}})
	if ce := apiError(err); err == nil || ce.Reason != client.ReasonInvalidRequest {
		t.Errorf("host and cluster: %v, want an invalid request", err)
	}
	if _, err := fromCreateRequest(&client.CreateRequest{Kind: backend.KindRun, Engine: &client.Engine{Host: "kubernetes:///a?pod=%7B"}}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("create with an unreadable packed cluster: %v, want an invalid request", err)
	}
	creq, err := fromCreateRequest(&client.CreateRequest{Kind: backend.KindRun, Engine: &client.Engine{Host: kubePacked}})
	if err != nil || creq.Engine == nil || !reflect.DeepEqual(*creq.Engine, kubeTyped) {
		t.Errorf("create with a packed cluster: %+v, %v", creq, err)
	}

	// Every field survives the way in and out, and the two types write the same JSON.
	ep, err := endpointFromWire(&full)
	if err != nil {
		t.Fatal(err)
	}
	if back := wireEngine(*ep); !reflect.DeepEqual(*back, full) {
		t.Errorf("in and out: %+v, want %+v", back.Kubernetes, full.Kubernetes)
	}
	a, _ := json.Marshal(full)
	b, _ := json.Marshal(*ep)
	if string(a) != string(b) {
		t.Errorf("client.Engine and engine.Endpoint differ on the wire:\n%s\n%s", a, b)
	}
}

// TestKubeEndpointRecords: a sandbox an earlier daemon recorded on a cluster
// (its endpoint packed in Host) is served on the cluster's backend, opened
// with the typed endpoint, under the same Key as a typed request for the same
// cluster (one backend for both), and shown typed by the API.
func TestKubeEndpointRecords(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var mu sync.Mutex
	var opened []engine.Endpoint
	s := NewService(st, &stopRecorder{}, Config{OpenEngine: func(ep engine.Endpoint) (backend.Backend, error) {
		mu.Lock()
		defer mu.Unlock()
		opened = append(opened, ep)
		return &clusterBackend{ep: ep}, nil
	}})
	old, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp, Engine: json.RawMessage(`{"host":"` + kubePacked + `"}`)}, store.Event{})
	if err != nil {
		t.Fatal(err)
	}
	ep := s.endpointOf(old)
	if !reflect.DeepEqual(ep, kubeTyped) || ep.Key() != kubeKey || (engine.Endpoint{Host: kubePacked}).Key() != kubeKey {
		t.Errorf("the earlier daemon's record: %+v (Key %s), want %+v (Key %s)", ep.Kubernetes, ep.Key(), kubeTyped.Kubernetes, kubeKey)
	}
	rt := s.rtOf(old.ID)
	if s.runtimeFor(kubeTyped) != rt {
		t.Error("a typed request for the cluster gets another backend than the record of an earlier daemon")
	}
	if len(opened) != 1 || !opened[0].IsKubernetes() || !reflect.DeepEqual(opened[0], kubeTyped) {
		t.Errorf("opened %+v, want the typed cluster once", opened)
	}
	if got := toClientSandbox(s.view(old)).Engine; got == nil || got.Host != "" || got.Kubernetes == nil || got.Kubernetes.Namespace != "ci" || got.Kubernetes.Context != "prod" {
		t.Errorf("the API shows %+v", got)
	}
	// A record of this daemon carries the typed form.
	b, _ := json.Marshal(kubeTyped)
	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp, Engine: b}, store.Event{})
	if err != nil {
		t.Fatal(err)
	}
	if s.rtOf(rec.ID) != rt || len(opened) != 1 {
		t.Errorf("a typed record: opened %d backends", len(opened))
	}
	// A record naming no Engine, or one that cannot be read, is on the daemon's own.
	for _, raw := range []string{``, `{"host":""}`, `{"host":"kubernetes:///a?pod=%7B"}`, `{"host":"unix:///d.sock","kubernetes":{"namespace":"a"}}`} {
		rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp, Engine: json.RawMessage(raw)}, store.Event{})
		if err != nil {
			t.Fatal(err)
		}
		if s.rtOf(rec.ID) != s.rt {
			t.Errorf("record with engine %s: not the daemon's own backend", raw)
		}
	}
}
