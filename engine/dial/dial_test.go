package dial

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/engine"
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

	got, err := engine.Resolve(env(map[string]string{"DOCKER_CONFIG": cfg}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (engine.Endpoint{Context: "standin", Host: "tcp://127.0.0.1:2375"}); got != want {
		t.Errorf("current context: got %+v, want %+v", got, want)
	}
	got, err = engine.Resolve(env(map[string]string{"DOCKER_CONFIG": cfg, "DOCKER_CONTEXT": "secure"}))
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
	if _, err := tlsConfig(got); err != nil {
		t.Errorf("tlsConfig from the CLI's files: %v", err)
	}
}

// TestConnectLocalEngine needs the Engine at the default socket: it fails when none answers,
// unless AIRLOCK_SKIP_DOCKER=1.
func TestConnectLocalEngine(t *testing.T) {
	if os.Getenv("AIRLOCK_SKIP_DOCKER") == "1" {
		t.Skip("AIRLOCK_SKIP_DOCKER=1")
	}
	ep := engine.Endpoint{Host: defaultSock}
	if !ep.Local() {
		t.Errorf("%s is not Local", ep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := Connect(ctx, ep)
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
	for _, ep := range []engine.Endpoint{
		{Host: "tcp://127.0.0.1:1"},
		{Host: "tcp://127.0.0.1:1", Context: "standin"},
		{Host: missing},
	} {
		start := time.Now()
		cli, err := Connect(context.Background(), ep)
		if err == nil {
			cli.Close()
			t.Fatalf("Connect(%s) succeeded", ep)
		}
		if !errors.Is(err, engine.ErrUnreachable) {
			t.Errorf("Connect(%s) = %v, want an error wrapping engine.ErrUnreachable", ep, err)
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
	ep := engine.Endpoint{Host: "ssh://nobody@127.0.0.1:1"}
	cli, err := Connect(context.Background(), ep)
	if err == nil {
		cli.Close()
		t.Fatal("Connect over ssh to a closed port succeeded")
	}
	if !errors.Is(err, engine.ErrUnreachable) || !strings.Contains(err.Error(), ep.Host) {
		t.Errorf("Connect = %v, want engine.ErrUnreachable naming the host", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q spans lines", err)
	}
	if _, err := Connect(context.Background(), engine.Endpoint{Host: "ssh://me:secret@h"}); err == nil || errors.Is(err, engine.ErrUnreachable) {
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
		ep   engine.Endpoint
		ok   bool
	}{
		{"verified with the CA", engine.Endpoint{Host: host, TLSCA: ca, TLSVerify: true}, true},
		{"unverified", engine.Endpoint{Host: host, SkipTLSVerify: true}, true},
		{"verify without the CA", engine.Endpoint{Host: host, TLSVerify: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := Connect(context.Background(), tc.ep)
			if !tc.ok {
				if err == nil {
					cli.Close()
					t.Fatal("Connect succeeded")
				}
				if !errors.Is(err, engine.ErrUnreachable) || !strings.Contains(err.Error(), "certificate") {
					t.Errorf("Connect = %v, want engine.ErrUnreachable with the certificate error", err)
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

	cfg, err := tlsConfig(engine.Endpoint{Host: "tcp://h:2376", TLSCA: ca, TLSCert: cert, TLSKey: key, TLSVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.InsecureSkipVerify {
		t.Errorf("tlsConfig: roots %v, %d certificates, insecure %v", cfg.RootCAs != nil, len(cfg.Certificates), cfg.InsecureSkipVerify)
	}
	for _, bad := range []engine.Endpoint{
		{Host: "tcp://h:2376", TLSCert: cert, TLSVerify: true},
		{Host: "tcp://h:2376", TLSCA: key, TLSVerify: true},
		{Host: "tcp://h:2376", TLSCA: filepath.Join(dir, "missing.pem"), TLSVerify: true},
	} {
		if _, err := Connect(context.Background(), bad); err == nil || errors.Is(err, engine.ErrUnreachable) {
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
