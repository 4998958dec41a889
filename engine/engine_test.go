package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
