package control_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, PEM,
// and returns their paths.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock test daemon"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "daemon.crt"), filepath.Join(dir, "daemon.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestTCPNeedsTLSOffLoopback: a TCP listener on an address that is not
// loopback without TLS is refused (exit 2, saying how), as is half a TLS
// pair; with --tls-cert and --tls-key the listener serves TLS: a client that
// trusts the certificate (client.TLSConfigCA, AIRLOCK_TLS_CA) and sends the
// token gets answers, plain HTTP and an untrusted certificate do not.
func TestTCPNeedsTLSOffLoopback(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	tokenFile := filepath.Join(e.home, "token")
	writeTokenFile(t, tokenFile, "tls-token-5e1f", 0o600)
	cert, key := selfSigned(t, e.home)

	for _, args := range [][]string{
		{"run", "--host", "0.0.0.0"},
		{"start", "--host", "0.0.0.0"},
		{"run", "--host", "192.0.2.1"},
		{"start", "--host", "box.example"},
	} {
		argv := append([]string{"daemon"}, args...)
		argv = append(argv, "--port", strconv.Itoa(freePort(t)), "--token-file", tokenFile)
		r := e.run(binA, argv...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "without TLS") || !strings.Contains(r.Stderr, "--tls-cert") {
			t.Errorf("%v: %s; want exit 2 saying TLS is needed and how", argv, r)
		}
	}
	r := e.run(binA, "daemon", "run", "--host", "127.0.0.1", "--port", strconv.Itoa(freePort(t)), "--token-file", tokenFile, "--tls-cert", cert)
	if r.Code != 2 || !strings.Contains(r.Stderr, "--tls-key") {
		t.Errorf("--tls-cert alone: %s", r)
	}
	if _, err := client.New(e.paths.Socket()).Health(context.Background()); err == nil {
		t.Fatal("a daemon runs after refused listen options")
	}

	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokenFile, "--tls-cert", cert, "--tls-key", key)
	waitTCP(t, port)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx := ctxT(t, time.Minute)
	trust, err := client.TLSConfigCA(cert)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := client.NewTLS(addr, "tls-token-5e1f", trust).Health(ctx); err != nil || h.PID != d.pid {
		t.Fatalf("health over TLS: %+v, %v", h, err)
	}
	if _, err := client.NewTLS(addr, "tls-token-5e1f", trust).List(ctx, nil); err != nil {
		t.Errorf("list over TLS: %v", err)
	}
	if _, err := client.NewTLS(addr, "wrong-token", trust).List(ctx, nil); err == nil {
		t.Error("a wrong token over TLS was accepted")
	}
	if _, err := client.NewTLS(addr, "tls-token-5e1f", nil).Health(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the certificate: %v, want a certificate error", err)
	}
	if _, err := client.NewTCP(addr, "tls-token-5e1f").Health(ctx); err == nil {
		t.Error("plain HTTP to the TLS listener was answered")
	}
	if l, ok := daemonfiles.ReadListen(e.paths); !ok || l.TLSCert != cert || l.TLSKey != key {
		t.Errorf("the recorded listen options %+v keep no TLS files (a daemon started again would serve plain HTTP)", l)
	}
	if !daemonfiles.Loopback("127.0.0.1") || !daemonfiles.Loopback("::1") || !daemonfiles.Loopback("localhost") || daemonfiles.Loopback("0.0.0.0") || daemonfiles.Loopback("box.example") {
		t.Error("daemonfiles.Loopback")
	}
}
