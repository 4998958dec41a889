package engine

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/versions"
)

const defaultSock = "unix:///var/run/docker.sock"

// env is a getenv over a fixed map, so no test reads the process environment.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// writeFile writes data to path, making its folders.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func contextID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// writeContext writes a context the way `docker context create` stores it.
func writeContext(t *testing.T, cfgDir, name, host string, skipTLS bool, tlsFiles ...string) {
	t.Helper()
	meta := map[string]any{
		"Name":      name,
		"Metadata":  map[string]any{"Description": "test"},
		"Endpoints": map[string]any{"docker": map[string]any{"Host": host, "SkipTLSVerify": skipTLS}},
	}
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfgDir, "contexts", "meta", contextID(name), "meta.json"), string(b))
	for _, f := range tlsFiles {
		writeFile(t, tlsPath(cfgDir, name, f), "PEM "+f)
	}
}

func tlsPath(cfgDir, name, file string) string {
	return filepath.Join(cfgDir, "contexts", "tls", contextID(name), "docker", file)
}

func writeCurrent(t *testing.T, cfgDir, name string) {
	t.Helper()
	writeFile(t, filepath.Join(cfgDir, "config.json"), `{"auths": {}, "currentContext": "`+name+`"}`)
}

func TestResolve(t *testing.T) {
	type fixture struct {
		home, cfgDir, certDir string // cfgDir = $HOME/.docker
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, f fixture)
		env     func(f fixture) map[string]string
		want    func(f fixture) Endpoint
		wantErr []string // substrings of the error; the fixture's paths are put in by %cfg% / %home%
	}{
		{
			name: "default without any setting",
			want: func(fixture) Endpoint { return Endpoint{Host: defaultSock} },
		},
		{
			name: "DOCKER_HOST wins over DOCKER_CONTEXT and currentContext",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "cur", "tcp://cur.example:2375", false)
				writeContext(t, f.cfgDir, "envctx", "tcp://envctx.example:2375", false)
				writeCurrent(t, f.cfgDir, "cur")
			},
			env: func(fixture) map[string]string {
				return map[string]string{"DOCKER_HOST": "tcp://host.example:2375", "DOCKER_CONTEXT": "envctx"}
			},
			want: func(fixture) Endpoint { return Endpoint{Host: "tcp://host.example:2375"} },
		},
		{
			name: "DOCKER_CONTEXT wins over currentContext",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "cur", "tcp://cur.example:2375", false)
				writeContext(t, f.cfgDir, "envctx", "tcp://envctx.example:2375", false)
				writeCurrent(t, f.cfgDir, "cur")
			},
			env:  func(fixture) map[string]string { return map[string]string{"DOCKER_CONTEXT": "envctx"} },
			want: func(fixture) Endpoint { return Endpoint{Context: "envctx", Host: "tcp://envctx.example:2375"} },
		},
		{
			name: "currentContext from config.json",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "standin", "tcp://127.0.0.1:2375", false)
				writeCurrent(t, f.cfgDir, "standin")
			},
			want: func(fixture) Endpoint { return Endpoint{Context: "standin", Host: "tcp://127.0.0.1:2375"} },
		},
		{
			name: "empty DOCKER_HOST and DOCKER_CONTEXT count as unset",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "standin", "tcp://127.0.0.1:2375", false)
				writeCurrent(t, f.cfgDir, "standin")
			},
			env:  func(fixture) map[string]string { return map[string]string{"DOCKER_HOST": "", "DOCKER_CONTEXT": ""} },
			want: func(fixture) Endpoint { return Endpoint{Context: "standin", Host: "tcp://127.0.0.1:2375"} },
		},
		{
			name: "DOCKER_CONTEXT=default is the default Engine over currentContext",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "standin", "tcp://127.0.0.1:2375", false)
				writeCurrent(t, f.cfgDir, "standin")
			},
			env:  func(fixture) map[string]string { return map[string]string{"DOCKER_CONTEXT": "default"} },
			want: func(fixture) Endpoint { return Endpoint{Host: defaultSock} },
		},
		{
			name:  "currentContext default",
			setup: func(t *testing.T, f fixture) { writeCurrent(t, f.cfgDir, "default") },
			want:  func(fixture) Endpoint { return Endpoint{Host: defaultSock} },
		},
		{
			name:  "config.json without currentContext",
			setup: func(t *testing.T, f fixture) { writeFile(t, filepath.Join(f.cfgDir, "config.json"), `{"auths":{}}`) },
			want:  func(fixture) Endpoint { return Endpoint{Host: defaultSock} },
		},
		{
			name: "context with TLS files",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "secure", "tcp://secure.example:2376", false, "ca.pem", "cert.pem", "key.pem")
				writeCurrent(t, f.cfgDir, "secure")
			},
			want: func(f fixture) Endpoint {
				return Endpoint{
					Context: "secure", Host: "tcp://secure.example:2376",
					TLSCA:   tlsPath(f.cfgDir, "secure", "ca.pem"),
					TLSCert: tlsPath(f.cfgDir, "secure", "cert.pem"),
					TLSKey:  tlsPath(f.cfgDir, "secure", "key.pem"), TLSVerify: true,
				}
			},
		},
		{
			name: "context with a CA and SkipTLSVerify",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "insecure", "tcp://insecure.example:2376", true, "ca.pem")
			},
			env: func(fixture) map[string]string { return map[string]string{"DOCKER_CONTEXT": "insecure"} },
			want: func(f fixture) Endpoint {
				return Endpoint{
					Context: "insecure", Host: "tcp://insecure.example:2376",
					TLSCA: tlsPath(f.cfgDir, "insecure", "ca.pem"), SkipTLSVerify: true,
				}
			},
		},
		{
			name: "ssh context",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "remote", "ssh://builder@build.example", false)
			},
			env:  func(fixture) map[string]string { return map[string]string{"DOCKER_CONTEXT": "remote"} },
			want: func(fixture) Endpoint { return Endpoint{Context: "remote", Host: "ssh://builder@build.example"} },
		},
		{
			name:  "context without a host uses the default socket",
			setup: func(t *testing.T, f fixture) { writeContext(t, f.cfgDir, "bare", "", false) },
			env:   func(fixture) map[string]string { return map[string]string{"DOCKER_CONTEXT": "bare"} },
			want:  func(fixture) Endpoint { return Endpoint{Context: "bare", Host: defaultSock} },
		},
		{
			name:    "unknown context from DOCKER_CONTEXT",
			env:     func(fixture) map[string]string { return map[string]string{"DOCKER_CONTEXT": "nope"} },
			wantErr: []string{`docker context "nope"`, "DOCKER_CONTEXT", "does not exist", "%cfg%/config.json"},
		},
		{
			name:    "unknown current context",
			setup:   func(t *testing.T, f fixture) { writeCurrent(t, f.cfgDir, "gone") },
			wantErr: []string{`docker context "gone"`, "currentContext in %cfg%/config.json", "does not exist"},
		},
		{
			name: "config.json that does not parse",
			setup: func(t *testing.T, f fixture) {
				writeFile(t, filepath.Join(f.cfgDir, "config.json"), `{"currentContext": `)
			},
			wantErr: []string{"parse docker config %cfg%/config.json"},
		},
		{
			name: "DOCKER_CONFIG replaces ~/.docker",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "home", "tcp://home.example:2375", false)
				writeCurrent(t, f.cfgDir, "home")
				other := filepath.Join(f.home, "elsewhere")
				writeContext(t, other, "other", "tcp://other.example:2375", false)
				writeCurrent(t, other, "other")
			},
			env: func(f fixture) map[string]string {
				return map[string]string{"DOCKER_CONFIG": filepath.Join(f.home, "elsewhere")}
			},
			want: func(fixture) Endpoint { return Endpoint{Context: "other", Host: "tcp://other.example:2375"} },
		},
		{
			name: "DOCKER_HOST without a scheme is tcp",
			env:  func(fixture) map[string]string { return map[string]string{"DOCKER_HOST": "host.example:2375"} },
			want: func(fixture) Endpoint { return Endpoint{Host: "tcp://host.example:2375"} },
		},
		{
			name: "DOCKER_HOST ssh",
			env:  func(fixture) map[string]string { return map[string]string{"DOCKER_HOST": "ssh://me@remote.example"} },
			want: func(fixture) Endpoint { return Endpoint{Host: "ssh://me@remote.example"} },
		},
		{
			name:    "DOCKER_HOST invalid",
			env:     func(fixture) map[string]string { return map[string]string{"DOCKER_HOST": "http://x"} },
			wantErr: []string{"DOCKER_HOST", "invalid bind address"},
		},
		{
			name: "DOCKER_HOST with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH",
			setup: func(t *testing.T, f fixture) {
				for _, n := range []string{"ca.pem", "cert.pem", "key.pem"} {
					writeFile(t, filepath.Join(f.certDir, n), "PEM")
				}
			},
			env: func(f fixture) map[string]string {
				return map[string]string{"DOCKER_HOST": "tcp://secure.example:2376", "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": f.certDir}
			},
			want: func(f fixture) Endpoint {
				return Endpoint{
					Host:    "tcp://secure.example:2376",
					TLSCA:   filepath.Join(f.certDir, "ca.pem"),
					TLSCert: filepath.Join(f.certDir, "cert.pem"),
					TLSKey:  filepath.Join(f.certDir, "key.pem"), TLSVerify: true,
				}
			},
		},
		{
			name:  "DOCKER_TLS_VERIFY takes the certificates from ~/.docker, client pair optional",
			setup: func(t *testing.T, f fixture) { writeFile(t, filepath.Join(f.cfgDir, "ca.pem"), "PEM") },
			env: func(fixture) map[string]string {
				return map[string]string{"DOCKER_HOST": "tcp://secure.example:2376", "DOCKER_TLS_VERIFY": "1"}
			},
			want: func(f fixture) Endpoint {
				return Endpoint{Host: "tcp://secure.example:2376", TLSCA: filepath.Join(f.cfgDir, "ca.pem"), TLSVerify: true}
			},
		},
		{
			name:  "DOCKER_TLS without verify, and the CLI's TLS default host",
			setup: func(t *testing.T, f fixture) { writeFile(t, filepath.Join(f.cfgDir, "ca.pem"), "PEM") },
			env:   func(fixture) map[string]string { return map[string]string{"DOCKER_TLS": "1"} },
			want: func(f fixture) Endpoint {
				return Endpoint{Host: "tcp://localhost:2376", TLSCA: filepath.Join(f.cfgDir, "ca.pem"), SkipTLSVerify: true}
			},
		},
		{
			name: "DOCKER_TLS_VERIFY without a CA",
			env: func(fixture) map[string]string {
				return map[string]string{"DOCKER_HOST": "tcp://secure.example:2376", "DOCKER_TLS_VERIFY": "1"}
			},
			wantErr: []string{"DOCKER_CERT_PATH", "%cfg%/ca.pem"},
		},
		{
			name: "TLS variables do not apply to a named context",
			setup: func(t *testing.T, f fixture) {
				writeContext(t, f.cfgDir, "plain", "tcp://plain.example:2375", false)
			},
			env: func(fixture) map[string]string {
				return map[string]string{"DOCKER_CONTEXT": "plain", "DOCKER_TLS_VERIFY": "1"}
			},
			want: func(fixture) Endpoint { return Endpoint{Context: "plain", Host: "tcp://plain.example:2375"} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			f := fixture{home: home, cfgDir: filepath.Join(home, ".docker"), certDir: filepath.Join(home, "certs")}
			if tc.setup != nil {
				tc.setup(t, f)
			}
			vars := map[string]string{}
			if tc.env != nil {
				vars = tc.env(f)
			}
			vars["HOME"] = home
			got, err := Resolve(env(vars))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Resolve = %+v, want an error", got)
				}
				for _, s := range tc.wantErr {
					s = strings.ReplaceAll(s, "%cfg%", f.cfgDir)
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if want := tc.want(f); got != want {
				t.Errorf("Resolve =\n  %+v\nwant\n  %+v", got, want)
			}
		})
	}
}

// TestResolveMatchesDockerCLI checks the store reader against contexts the real docker CLI
// wrote, when the CLI is installed (the product itself never runs it).
func TestResolveMatchesDockerCLI(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI to write contexts with")
	}
	cfg := t.TempDir()
	certs := t.TempDir()
	caPEM, certPEM, keyPEM := testPKI(t)
	writeFile(t, filepath.Join(certs, "ca.pem"), caPEM)
	writeFile(t, filepath.Join(certs, "cert.pem"), certPEM)
	writeFile(t, filepath.Join(certs, "key.pem"), keyPEM)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(docker, append([]string{"--config", cfg}, args...)...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v\n%s", args, err, out)
		}
	}
	run("context", "create", "standin", "--docker", "host=tcp://127.0.0.1:2375")
	run("context", "create", "secure", "--docker", "host=tcp://secure.example:2376,ca="+filepath.Join(certs, "ca.pem")+
		",cert="+filepath.Join(certs, "cert.pem")+",key="+filepath.Join(certs, "key.pem"))
	run("context", "use", "standin")

	got, err := Resolve(env(map[string]string{"DOCKER_CONFIG": cfg}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Endpoint{Context: "standin", Host: "tcp://127.0.0.1:2375"}); got != want {
		t.Errorf("current context: got %+v, want %+v", got, want)
	}
	got, err = Resolve(env(map[string]string{"DOCKER_CONFIG": cfg, "DOCKER_CONTEXT": "secure"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "tcp://secure.example:2376" || !got.TLSVerify || got.SkipTLSVerify {
		t.Errorf("secure context: got %+v", got)
	}
	for file, want := range map[string]string{got.TLSCA: caPEM, got.TLSCert: certPEM, got.TLSKey: keyPEM} {
		b, err := os.ReadFile(file)
		if err != nil || string(b) != want {
			t.Errorf("TLS file %q: err %v, content differs: %v", file, err, string(b) != want)
		}
	}
	if _, err := got.tlsConfig(); err != nil {
		t.Errorf("tlsConfig from the CLI's files: %v", err)
	}
}

func TestLocal(t *testing.T) {
	// A short folder: a unix socket path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "engine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	regular := filepath.Join(dir, "file")
	writeFile(t, regular, "")

	tests := []struct {
		host string
		want bool
	}{
		{"unix://" + sock, true},
		{"unix://" + filepath.Join(dir, "missing.sock"), false},
		{"unix://" + regular, false},
		{"unix://", false},
		{"tcp://127.0.0.1:2375", false},
		{"ssh://me@" + "localhost", false},
		{"npipe:////./pipe/docker_engine", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := (Endpoint{Host: tc.host}).Local(); got != tc.want {
			t.Errorf("Endpoint{Host: %q}.Local() = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestKey(t *testing.T) {
	a := Endpoint{Host: "tcp://a.example:2376", TLSCA: "/c/ca.pem", TLSVerify: true}
	k := a.Key()
	if len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("Key() = %q, want 16 lowercase hex digits", k)
	}
	if a.Key() != k {
		t.Error("Key() changes between calls")
	}
	var back Endpoint
	b, _ := json.Marshal(a)
	if err := json.Unmarshal(b, &back); err != nil || back.Key() != k {
		t.Errorf("Key() after a JSON round trip = %q (err %v), want %q", back.Key(), err, k)
	}
	named := a
	named.Context = "prod"
	if named.Key() != k {
		t.Error("Key() depends on the context name, want only on how the Engine is reached")
	}
	for _, other := range []Endpoint{
		{Host: "tcp://b.example:2376", TLSCA: "/c/ca.pem", TLSVerify: true},
		{Host: "tcp://a.example:2376", TLSCA: "/d/ca.pem", TLSVerify: true},
		{Host: "tcp://a.example:2376", TLSCA: "/c/ca.pem", SkipTLSVerify: true},
		{Host: "tcp://a.example:2376"},
		{Host: defaultSock},
	} {
		if other.Key() == k {
			t.Errorf("%+v has the same Key as %+v", other, a)
		}
	}
	if (Endpoint{Host: defaultSock}).Key() == (Endpoint{Host: "unix:///run/user/1000/docker.sock"}).Key() {
		t.Error("different sockets share a Key")
	}
}

func TestString(t *testing.T) {
	if got := (Endpoint{Host: defaultSock}).String(); got != defaultSock {
		t.Errorf("String() = %q", got)
	}
	if got, want := (Endpoint{Context: "standin", Host: "tcp://127.0.0.1:2375"}).String(), "tcp://127.0.0.1:2375 (context standin)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestConnectLocalEngine needs the Engine at the default socket: it fails when none answers,
// unless AIRLOCK_SKIP_DOCKER=1.
func TestConnectLocalEngine(t *testing.T) {
	if os.Getenv("AIRLOCK_SKIP_DOCKER") == "1" {
		t.Skip("AIRLOCK_SKIP_DOCKER=1")
	}
	ep := Endpoint{Host: defaultSock}
	if !ep.Local() {
		t.Errorf("%s is not Local", ep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := ep.Connect(ctx)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cli.Close()
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		t.Fatalf("ServerVersion: %v", err)
	}
	if versions.GreaterThan(cli.ClientVersion(), v.APIVersion) {
		t.Errorf("client speaks API %s, Engine at most %s: not negotiated", cli.ClientVersion(), v.APIVersion)
	}
	t.Logf("Engine %s, API %s, client API %s", v.Version, v.APIVersion, cli.ClientVersion())
}

func TestConnectUnreachable(t *testing.T) {
	missing := "unix://" + filepath.Join(t.TempDir(), "none.sock")
	for _, ep := range []Endpoint{
		{Host: "tcp://127.0.0.1:1"},
		{Host: "tcp://127.0.0.1:1", Context: "standin"},
		{Host: missing},
	} {
		start := time.Now()
		cli, err := ep.Connect(context.Background())
		if err == nil {
			cli.Close()
			t.Fatalf("Connect(%s) succeeded", ep)
		}
		if !errors.Is(err, ErrUnreachable) {
			t.Errorf("Connect(%s) = %v, want an error wrapping ErrUnreachable", ep, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q spans lines", err)
		}
		for _, s := range []string{ep.Host, "start", "DOCKER_HOST"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
		if ep.Context != "" && !strings.Contains(err.Error(), "context "+ep.Context) {
			t.Errorf("error %q does not name the context", err)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("Connect(%s) took %v", ep, d)
		}
	}
}

func TestConnectSSHUnreachable(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	ep := Endpoint{Host: "ssh://nobody@127.0.0.1:1"}
	cli, err := ep.Connect(context.Background())
	if err == nil {
		cli.Close()
		t.Fatal("Connect over ssh to a closed port succeeded")
	}
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), ep.Host) {
		t.Errorf("Connect = %v, want ErrUnreachable naming the host", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q spans lines", err)
	}
	if _, err := (Endpoint{Host: "ssh://me:secret@h"}).Connect(context.Background()); err == nil || errors.Is(err, ErrUnreachable) {
		t.Errorf("ssh URL with a password: err = %v, want a configuration error", err)
	}
}

// fakeEngine answers /_ping as an Engine speaking API 1.41 would.
func fakeEngine(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Ostype", "linux")
		_, _ = w.Write([]byte("OK"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failing handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestConnectTLS(t *testing.T) {
	srv := fakeEngine(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	host := "tcp://" + srv.Listener.Addr().String()

	for _, tc := range []struct {
		name string
		ep   Endpoint
		ok   bool
	}{
		{"verified with the CA", Endpoint{Host: host, TLSCA: ca, TLSVerify: true}, true},
		{"unverified", Endpoint{Host: host, SkipTLSVerify: true}, true},
		{"verify without the CA", Endpoint{Host: host, TLSVerify: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := tc.ep.Connect(context.Background())
			if !tc.ok {
				if err == nil {
					cli.Close()
					t.Fatal("Connect succeeded")
				}
				if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "certificate") {
					t.Errorf("Connect = %v, want ErrUnreachable with the certificate error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer cli.Close()
			if got := cli.ClientVersion(); got != "1.41" {
				t.Errorf("ClientVersion = %s, want 1.41 (negotiated)", got)
			}
		})
	}
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	caPEM, certPEM, keyPEM := testPKI(t)
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, ca, caPEM)
	writeFile(t, cert, certPEM)
	writeFile(t, key, keyPEM)

	cfg, err := Endpoint{Host: "tcp://h:2376", TLSCA: ca, TLSCert: cert, TLSKey: key, TLSVerify: true}.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.InsecureSkipVerify {
		t.Errorf("tlsConfig: roots %v, %d certificates, insecure %v", cfg.RootCAs != nil, len(cfg.Certificates), cfg.InsecureSkipVerify)
	}
	for _, bad := range []Endpoint{
		{Host: "tcp://h:2376", TLSCert: cert, TLSVerify: true},
		{Host: "tcp://h:2376", TLSCA: key, TLSVerify: true},
		{Host: "tcp://h:2376", TLSCA: filepath.Join(dir, "missing.pem"), TLSVerify: true},
	} {
		if _, err := bad.Connect(context.Background()); err == nil || errors.Is(err, ErrUnreachable) {
			t.Errorf("Connect(%+v) = %v, want a TLS configuration error", bad, err)
		}
	}
}

// testPKI makes a self-signed certificate (CA and client certificate at once) and its key, in PEM.
func testPKI(t *testing.T) (caPEM, certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "airlock test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IsCA:         true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return c, c, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}
